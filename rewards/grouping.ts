/**
 * Semantic grouping (CoSearch): inputs that differ only in wording are put in one GRPO
 * group. Similarity is token-level F1 (SQuAD-style, over multisets of normalised
 * words): common = Σ_w min(c_a(w), c_b(w)), P = common/|a|, R = common/|b|,
 * F1 = 2PR/(P + R). Greedy clustering: inputs are visited in order; each joins the
 * existing group whose representative (its first member) it matches best with
 * F1 ≥ δ (ties: the earliest group), or founds a new group. Groups smaller than k_min
 * are dropped (their members are returned in `dropped`).
 */
import { z } from 'zod';
import { cogrError } from '../index/errors.ts';
import { normalizeSelf } from '../index/normalize.ts';
import { DEFAULTS } from '../index/defaults.ts';


const GroupingOptions = z.object({
  delta: z.number().min(0, 'delta must be in [0, 1]').max(1, 'delta must be in [0, 1]').optional(),
  kMin: z.number().int('kMin must be an integer').min(1, 'kMin must be at least 1').optional(),
});

function tokens(s: string): Map<string, number> {
  const m = new Map<string, number>();
  const n = normalizeSelf(s);
  if (n.length === 0) return m;
  for (const w of n.split(' ')) m.set(w, (m.get(w) ?? 0) + 1);
  return m;
}
function size(m: Map<string, number>): number {
  let s = 0;
  for (const c of m.values()) s += c;
  return s;
}
function f1Bags(a: Map<string, number>, na: number, b: Map<string, number>, nb: number): number {
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

/** Token-level F1 of two strings (words after normalisation). Two empty strings: 1. */
export function tokenF1(a: string, b: string): number {
  const ta = tokens(a);
  const tb = tokens(b);
  return f1Bags(ta, size(ta), tb, size(tb));
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
    throw cogrError('INVALID_ARGUMENT', `grouping options: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const delta = parsed.data.delta ?? DEFAULTS.grouping.delta;
  const kMin = parsed.data.kMin ?? DEFAULTS.grouping.minSize;
  const reps: { bag: Map<string, number>; n: number }[] = [];
  const all: number[][] = [];
  inputs.forEach((s, idx) => {
    const bag = tokens(s);
    const n = size(bag);
    let best = -1;
    let bestF = -1;
    for (let g = 0; g < reps.length; g++) {
      const f = f1Bags(bag, n, reps[g].bag, reps[g].n);
      if (f >= delta && f > bestF) {
        best = g;
        bestF = f;
      }
    }
    if (best < 0) {
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
