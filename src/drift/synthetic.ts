/**
 * A seeded synthetic co-evolution history, for tests, benchmarks and looking at the
 * report before a real run exists. It imitates the trends the paper reports: the share
 * of one-word keywords falls and that of 3+-word phrases rises over the rounds, the
 * item and query vocabularies converge in size, their overlap grows, and entities keep
 * part of their keywords from one generation to the next. Same seed, same output.
 */
import { createRng, deriveSeed, randInt, type Rng } from '../../index/core/random.ts';
import type { IndexEntry, Side } from '../../index/core/types.ts';
import type { DriftInput, F1Point, GenerationSnapshot } from './analyze.ts';

export interface SyntheticOptions {
  seed: number;
  items: number;
  queries: number;
  /** Generations 0..generations−1 on both sides (generation 0 = SFT). */
  generations: number;
  topics?: number;
  keywordsPerEntity?: number;
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'ze', 'pa', 'do', 'gi', 'fu', 'he', 'ba', 'ro'];

function word(seed: number, i: number): string {
  const rng = createRng(deriveSeed(seed, 'word', i));
  const n = 2 + randInt(rng, 2);
  let w = '';
  for (let j = 0; j < n; j++) w += SYLLABLES[randInt(rng, SYLLABLES.length)];
  return w;
}

function phrase(seed: number, topic: number, index: number, len: number, vocab: string[]): string {
  const rng = createRng(deriveSeed(seed, 'phrase', topic, index, len));
  const words: string[] = [];
  for (let i = 0; i < len; i++) words.push(vocab[(topic * 13 + randInt(rng, 40)) % vocab.length]);
  return [...new Set(words)].join(' ');
}

function zipfIndex(rng: Rng, n: number): number {
  // Inverse-CDF sample of a 1/(k+1) law over 0..n−1.
  const u = rng() * Math.log(n + 1);
  return Math.min(n - 1, Math.floor(Math.exp(u) - 1));
}

export function syntheticDriftInput(opts: SyntheticOptions): DriftInput {
  const { seed, items, queries, generations } = opts;
  const topics = opts.topics ?? 12;
  const perEntity = opts.keywordsPerEntity ?? 8;
  const vocab = Array.from({ length: 400 }, (_, i) => word(seed, i));
  const sides: Record<Side, GenerationSnapshot[]> = { item: [], query: [] };
  for (const side of ['item', 'query'] as const) {
    const n = side === 'item' ? items : queries;
    let previous: IndexEntry[] | null = null;
    for (let g = 0; g < generations; g++) {
      const p = generations > 1 ? g / (generations - 1) : 0;
      const pOne = 0.37 - 0.24 * p;
      const pThree = 0.12 + 0.19 * p;
      // Phrases per topic: items start broad, queries narrow; both converge on 70.
      const pool = Math.round(side === 'item' ? 160 - 90 * p : 25 + 45 * p);
      const keep = g === 0 ? 0 : 0.35 + 0.4 * p;
      const entries: IndexEntry[] = [];
      for (let e = 0; e < n; e++) {
        const rng = createRng(deriveSeed(seed, side, g, e));
        const id = `${side === 'item' ? 'i' : 'q'}${e}`;
        const topic = e % topics;
        const set = new Set<string>();
        const old = previous ? previous[e].keywords : [];
        for (const k of old) if (rng() < keep) set.add(k);
        const want = Math.max(1, perEntity - 2 + randInt(rng, 5));
        for (let tries = 0; set.size < want && tries < want * 4; tries++) {
          const u = rng();
          const len = u < pOne ? 1 : u < 1 - pThree ? 2 : 3 + randInt(rng, 2);
          set.add(phrase(seed, topic, zipfIndex(rng, pool), len, vocab));
        }
        entries.push({ id, self: `${side} ${e}`, keywords: [...set] });
      }
      sides[side].push({ generation: g, entries });
      previous = entries;
    }
  }
  const f1ByRound: F1Point[] = [];
  const rng = createRng(deriveSeed(seed, 'f1'));
  for (let r = 0; r < generations; r++) {
    const base = 0.16 + 0.24 * (1 - Math.exp(-1.2 * r));
    f1ByRound.push({ round: r, side: 'query', f1: +(base + 0.02 * rng()).toFixed(4) });
    if (r > 0) f1ByRound.push({ round: r, side: 'item', f1: +(base + 0.02 + 0.02 * rng()).toFixed(4) });
  }
  return { sides, f1ByRound };
}
