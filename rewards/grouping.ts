/**
 * Semantic grouping (CoSearch): inputs that differ only in wording are put in one GRPO
 * group. Similarity is token-level F1 (SQuAD-style, over multisets of normalised
 * words): common = Σ_w min(c_a(w), c_b(w)), P = common/|a|, R = common/|b|,
 * F1 = 2PR/(P + R). Greedy clustering: inputs are visited in order; each joins the
 * existing group whose representative (its first member) it matches best with
 * F1 ≥ δ (ties: the earliest group), or founds a new group. Groups smaller than k_min
 * are dropped (their members are returned in `dropped`). `grpoGroups` turns this into
 * the GRPO groups of the loop and of `cogr rollouts --grouping semantic`: a group's
 * samples share one mean and standard deviation (rewards/grpo.ts, pooledAdvantages).
 */
import { z } from 'zod';
import { schemaError } from '../index/core/errors.ts';
import { normalizeSelf } from '../index/text/normalize.ts';
import { DEFAULTS } from '../index/core/defaults.ts';

const GroupingOptions = z.object({
  delta: z.number().min(0, 'delta must be in [0, 1]').max(1, 'delta must be in [0, 1]').optional(),
  kMin: z.number().int('kMin must be an integer').min(1, 'kMin must be at least 1').optional(),
});

export function tokens(s: string): Map<string, number> {
  const m = new Map<string, number>();
  const n = normalizeSelf(s);
  if (n.length === 0) return m;
  for (const w of n.split(' ')) m.set(w, (m.get(w) ?? 0) + 1);
  return m;
}
export function size(m: Map<string, number>): number {
  let s = 0;
  for (const c of m.values()) s += c;
  return s;
}
export function f1Bags(a: Map<string, number>, na: number, b: Map<string, number>, nb: number): number {
  if (na === 0 || nb === 0) return na === nb ? 1 : 0;
  let common = 0;
  for (const [w, c] of a) {
    const d = b.get(w);
    if (d !== undefined) common += Math.min(c, d);
  }
  if (common === 0) return 0;
  const p = common / na;
  const r = common / nb;
  return (2 * p * r) / (p + r);
}

export interface Grouping {
  /** Kept groups as input indices, each in input order; groups in order of foundation. */
  groups: number[][];
  /** Indices of inputs whose group was smaller than k_min. */
  dropped: number[];
}

export function groupInputs(inputs: readonly string[], opts: { delta?: number; kMin?: number } = {}): Grouping {
  const parsed = GroupingOptions.safeParse(opts);
  if (!parsed.success) {
    throw schemaError('INVALID_ARGUMENT', parsed.error, { what: 'grouping options' });
  }
  const delta = parsed.data.delta ?? DEFAULTS.grouping.delta;
  const kMin = parsed.data.kMin ?? DEFAULTS.grouping.minSize;
  const reps: { bag: Map<string, number>; n: number }[] = [];
  // word → representatives whose bag holds it: with δ > 0 only those can reach F1 ≥ δ,
  // so each input is compared with a few representatives instead of all of them.
  const byWord = new Map<string, number[]>();
  const all: number[][] = [];
  inputs.forEach((s, idx) => {
    const bag = tokens(s);
    const n = size(bag);
    let candidates: Iterable<number>;
    if (delta > 0 && n > 0) {
      const seen = new Set<number>();
      for (const w of bag.keys()) for (const g of byWord.get(w) ?? []) seen.add(g);
      candidates = [...seen].sort((a, b) => a - b);
    } else candidates = reps.keys();
    let best = -1;
    let bestF = -1;
    for (const g of candidates) {
      const f = f1Bags(bag, n, reps[g].bag, reps[g].n);
      if (f >= delta && f > bestF) {
        best = g;
        bestF = f;
      }
    }
    if (best < 0) {
      for (const w of bag.keys()) {
        const list = byWord.get(w);
        if (list) list.push(reps.length);
        else byWord.set(w, [reps.length]);
      }
      reps.push({ bag, n });
      all.push([idx]);
    } else {
      all[best].push(idx);
    }
  });
  const groups: number[][] = [];
  const dropped: number[] = [];
  for (const g of all) {
    if (g.length >= kMin) groups.push(g);
    else dropped.push(...g);
  }
  dropped.sort((a, b) => a - b);
  return { groups, dropped };
}

/**
 * GRPO groups of a list of inputs: with 'exact', every input is its own group; with
 * 'semantic', the groups of `groupInputs` (token F1 ≥ δ, at least k_min inputs) pool
 * their members, and every input of a smaller cluster stays its own group. Groups are
 * listed by their first member (ascending input index), members ascending.
 */
export function grpoGroups(
  inputs: readonly string[],
  mode: 'exact' | 'semantic',
  opts: { delta?: number; kMin?: number } = {},
): number[][] {
  if (mode === 'exact') return inputs.map((_, i) => [i]);
  const g = groupInputs(inputs, opts);
  return [...g.groups, ...g.dropped.map((i) => [i])].sort((a, b) => a[0] - b[0]);
}

/** Items grouped by a key, groups in order of their first item, items in order (indices into `keys`). */
export function groupsByKey<K>(keys: readonly K[]): number[][] {
  const out = new Map<K, number[]>();
  keys.forEach((k, i) => {
    const l = out.get(k);
    if (l) l.push(i);
    else out.set(k, [i]);
  });
  return [...out.values()];
}

/**
 * An ordered list of groups cut into batches of at most `batchSize` inputs without
 * splitting a group (a larger group is a batch of its own). Singleton groups give plain
 * consecutive chunks of `batchSize`.
 */
export function batchGroups(groups: readonly (readonly number[])[], batchSize: number): number[][][] {
  const out: number[][][] = [];
  let cur: number[][] = [];
  let size = 0;
  for (const g of groups) {
    if (size > 0 && size + g.length > batchSize) {
      out.push(cur);
      cur = [];
      size = 0;
    }
    cur.push([...g]);
    size += g.length;
  }
  if (size > 0) out.push(cur);
  return out;
}
