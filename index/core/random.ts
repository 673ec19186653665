/**
 * Seeded pseudo-random numbers for everything that must be reproducible (splits,
 * sampling, synthetic corpora). mulberry32 for the stream; seeds are hashed with a
 * 32-bit mix so that nearby seeds give unrelated streams.
 */
export type Rng = () => number;

function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** A generator of floats in [0, 1) from a numeric or string seed. */
export function createRng(seed: number | string): Rng {
  let s: number;
  if (typeof seed === 'string') {
    let h = 2166136261;
    for (let i = 0; i < seed.length; i++) h = Math.imul(h ^ seed.charCodeAt(i), 16777619);
    s = mix32(h >>> 0);
  } else {
    s = mix32((seed >>> 0) ^ Math.floor(seed / 0x100000000));
  }
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Integer in [0, n). */
export function randInt(rng: Rng, n: number): number {
  return Math.floor(rng() * n);
}

/** Fisher–Yates shuffle of a copy. */
export function shuffle<T>(list: readonly T[], rng: Rng): T[] {
  const a = [...list];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    const t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
  return a;
}

/** Derive an independent seed for a named sub-stream (e.g. per round and side). */
export function deriveSeed(seed: number, ...parts: (string | number)[]): number {
  let h = mix32(seed >>> 0);
  for (const p of parts) {
    const s = String(p);
    for (let i = 0; i < s.length; i++) h = mix32(h ^ s.charCodeAt(i));
    h = mix32(h ^ 0x9e3779b9);
  }
  return h;
}
