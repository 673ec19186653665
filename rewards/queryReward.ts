/**
 * The query-side reward of CoGR: F_β of the whole set the frozen item index matches for
 * S_q ∪ {q} against rel(q); 0 when |S_q| > K_max (after normalisation and
 * de-duplication). The query need not be in any query index.
 */
import type { KeywordView } from '../index/view/view.ts';
import { fBetaFromCounts, precisionFromCounts, recallFromCounts } from './setMetrics.ts';

export interface QueryRewardResult {
  reward: number;
  precision: number;
  recall: number;
  nRet: number;
  tp: number;
  overBudget: boolean;
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
