/**
 * Test-only references for the reward modules: full-recompute or one-call forms of
 * what production computes incrementally or inline, kept here so production exports
 * only what production uses (npm run knip).
 */
import { DEFAULTS } from '../../index/core/defaults.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { f1Bags, size, tokens } from '../../rewards/grouping.ts';
import type { ItemRewardContext, QueryCounts } from '../../rewards/itemReward.ts';
import { budgetPenalty, layered, type LayeredOptions, type RewardReason } from '../../rewards/layered.ts';
import { queryResult, type QueryRewardResult } from '../../rewards/queryReward.ts';
import type { RelevanceData } from '../../rewards/relevance.ts';
import { fBetaFromCounts } from '../../rewards/setMetrics.ts';

/** Token-level F1 of two strings (words after normalisation). Two empty strings: 1. */
export function tokenF1(a: string, b: string): number {
  const ta = tokens(a);
  const tb = tokens(b);
  return f1Bags(ta, size(ta), tb, size(tb));
}

/** Σ over counted queries of F_β for the given counts. */
export function sumF(ctx: ItemRewardContext, counts: QueryCounts): number {
  const beta = ctx.beta ?? DEFAULTS.run.beta;
  const { counted, nRel } = ctx.relevance;
  let s = 0;
  for (let q = 0; q < counts.nRet.length; q++) {
    if (counted[q]) s += fBetaFromCounts(counts.nRet[q], nRel[q], counts.nTp[q], beta);
  }
  return s;
}

export interface LayeredResult {
  reward: number;
  reason: RewardReason;
  /** The normalised keywords the result layer saw (empty for invalid_format). */
  keywords: string[];
}

/**
 * `parsed` is the generator output already parsed into raw keywords, or null when it
 * could not be parsed. `result` computes the result reward of the normalised keywords
 * (it is only called for outputs that pass both earlier layers).
 */
export function layeredReward(
  parsed: readonly string[] | null | undefined,
  result: (keywords: string[]) => number,
  opts: LayeredOptions,
): LayeredResult {
  const r = layered(
    parsed,
    (list) => normalizeKeywordSet(list),
    (p) => result(p.keywords),
    opts,
  );
  return { reward: r.reward, reason: r.reason, keywords: r.prepared?.keywords ?? [] };
}

/** How many results ended in each layer. */
export function countReasons(results: Iterable<{ reason: RewardReason }>): Record<RewardReason, number> {
  const out: Record<RewardReason, number> = { invalid_format: 0, over_budget: 0, ok: 0 };
  for (const r of results) out[r.reason]++;
  return out;
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

/** One query's layered reward (budget, then F_β of the matched set) in a single call. */
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

/** Relevant item ordinals of a query ordinal (a view on the CSR array). */
export function relevantItems(rel: RelevanceData, q: number): Int32Array {
  return rel.qRel.subarray(rel.qRelOff[q], rel.qRelOff[q + 1]);
}

/** Query ordinals for which an item ordinal is relevant. */
export function relevantQueries(rel: RelevanceData, i: number): Int32Array {
  return rel.iRel.subarray(rel.iRelOff[i], rel.iRelOff[i + 1]);
}
