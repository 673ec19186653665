/**
 * The expected-F1 cut of one query's items by p(item | query): items sorted by p (ties by
 * ordinal) and cut where the planner's objective peaks over prefixes of that order,
 *   k* = argmax_k 2·Σ_{i ≤ k} p_(i) / (k + α·E),   E = Σ_i p_i.
 * The model baseline (src/baseline/model.ts) serves it for every query; a run whose set
 * guard chose it serves it instead of the keyword plans (ranking.ts servedSet), through
 * `expectedF1Top`, which finds the same cut without sorting every item.
 */
import { topByP } from './queryContext.ts';

/** A query's items by p (best first, ties by ordinal) with the prefix sums the cut needs. */
export interface Sorted {
  order: Int32Array;
  prefix: Float64Array;
  E: number;
}

export function sortByP(p: Float64Array): Sorted {
  const order = Int32Array.from({ length: p.length }, (_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
  const prefix = new Float64Array(p.length + 1);
  for (let k = 0; k < p.length; k++) prefix[k + 1] = prefix[k] + p[order[k]];
  return { order, prefix, E: prefix[p.length] };
}

/** The expected-F1 cut k* ≥ 1 of a sorted query (ties: the smaller k). */
export function expectedF1Cut(s: Sorted, alpha: number): number {
  let best = 1;
  let bestG = -1;
  for (let k = 1; k < s.prefix.length; k++) {
    const g = (2 * s.prefix[k]) / (k + alpha * s.E);
    if (g > bestG + 1e-15) {
      bestG = g;
      best = k;
    }
  }
  return best;
}

/**
 * The items of the expected-F1 cut at `alpha`, best first: sortByP + expectedF1Cut's
 * prefix, found from the top m items by p alone (topByP: the same order, ties by ordinal),
 * m = 64, 256, … until the objective has clearly fallen past its peak — it rises while the
 * next p exceeds half of it and then falls for good (the next objective is the mediant of
 * the current half and the next p), so no later k can beat the peak. E is summed in ordinal
 * order here, in p order there: the two differ by rounding only.
 */
export function expectedF1Top(p: Float64Array, alpha: number): number[] {
  let E = 0;
  for (let i = 0; i < p.length; i++) E += p[i];
  const d = alpha * E;
  for (let m = Math.min(p.length, 64); ; m = Math.min(p.length, m * 4)) {
    const top = topByP(p, m);
    let S = 0;
    let best = 1;
    let bestG = -1;
    let g = 0;
    for (let k = 1; k <= m; k++) {
      S += p[top[k - 1]];
      g = (2 * S) / (k + d);
      if (g > bestG + 1e-15) {
        bestG = g;
        best = k;
      }
    }
    if (m === p.length || g < bestG - 1e-12) return top.slice(0, best);
  }
}
