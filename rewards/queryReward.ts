/**
 * The query-side reward of CoGR: F_β of the whole set the frozen item index matches for
 * S_q ∪ {q} against rel(q); 0 when |S_q| > K_max (after normalisation and
 * de-duplication). The query need not be in any query index.
 */
import { DEFAULTS } from '../index/core/defaults.ts';
import { normalizeKeywordSet } from '../index/text/normalize.ts';
import type { KeywordView } from '../index/view/view.ts';
import { budgetPenalty } from './layered.ts';
import { fBetaFromCounts, precisionFromCounts, recallFromCounts } from './setMetrics.ts';

export interface QueryRewardResult {
  reward: number;
  precision: number;
  recall: number;
  nRet: number;
  tp: number;
  overBudget: boolean;
}

export interface QueryRewardOptions {
  kMax?: number;
  beta?: number;
  /**
   * |rel(q)| when it differs from the number of relevant ordinals given (relevant items
   * absent from the item view still count against recall). Default: distinct ordinals.
   */
  nRel?: number;
}

/** The distinct values of a sorted Int32Array (in place). */
function distinctSorted(a: Int32Array): Int32Array {
  let m = 0;
  for (let j = 0; j < a.length; j++) if (j === 0 || a[j] !== a[j - 1]) a[m++] = a[j];
  return a.subarray(0, m);
}

/**
 * The result layer: F_β of the set the item view matches for `keywords` (already
 * normalised) ∪ {self} against the sorted, distinct relevant ordinals `rel`.
 */
export function queryResult(
  itemView: KeywordView,
  self: string | undefined,
  keywords: readonly string[],
  rel: Int32Array,
  nRel: number,
  beta: number,
): Omit<QueryRewardResult, 'overBudget'> {
  const matched = itemView.match({ self, keywords });
  let tp = 0;
  let r = 0;
  for (let j = 0; j < matched.length && r < rel.length; j++) {
    const e = matched[j];
    while (r < rel.length && rel[r] < e) r++;
    if (r < rel.length && rel[r] === e) tp++;
  }
  return {
    reward: fBetaFromCounts(matched.length, nRel, tp, beta),
    precision: precisionFromCounts(matched.length, tp),
    recall: recallFromCounts(nRel, tp),
    nRet: matched.length,
    tp,
  };
}

export function queryReward(
  itemView: KeywordView,
  probe: { self?: string; keywords: readonly string[] },
  relevantItemOrdinals: ArrayLike<number>,
  opts: QueryRewardOptions = {},
): QueryRewardResult {
  const rel = distinctSorted(Int32Array.from(relevantItemOrdinals).sort());
  const nRel = opts.nRel ?? rel.length;
  const { keywords } = normalizeKeywordSet(probe.keywords);
  const penalty = budgetPenalty(keywords.length, { side: 'query', kMax: opts.kMax });
  if (penalty !== null) return { reward: penalty, precision: 0, recall: 0, nRet: 0, tp: 0, overBudget: true };
  return { ...queryResult(itemView, probe.self, keywords, rel, nRel, opts.beta ?? DEFAULTS.run.beta), overBudget: false };
}
