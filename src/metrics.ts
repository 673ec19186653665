/**
 * Evaluation metrics.
 *
 * Whole-set metrics (the CoGR quality measure) come from rewards/setMetrics.ts:
 * precision, recall, F1 and F-beta of the whole retrieved set, macro-averaged.
 *
 * Ranked metrics at cut-offs k (default 1, 3, 10, 100, 1000), for one query with a
 * ranked list r_1..r_n (duplicates after the first occurrence ignored), relevant set
 * R and grades g(d) (grade >= 1 relevant; unjudged = 0):
 * - `mrr@k`  = 1 / (rank of the first relevant item) if it is within k, else 0;
 * - `ndcg@k` graded, linear gain g and log2 discount (as trec_eval / BEIR):
 *     DCG@k = Σ_{i ≤ k} g(r_i) / log2(i + 1),  nDCG@k = DCG@k / IDCG@k, where IDCG
 *     sorts all judged grades in descending order; 0 when there is nothing relevant;
 * - `ndcgBinary@k`: the same with gain 1 for every relevant item;
 * - `p@k` = tp@k / k (the denominator is k even when fewer than k items were ranked,
 *   as in trec_eval); `r@k` = tp@k / |R|; `f1@k` = 2·tp@k / (k + |R|) with the same k;
 * - `hit@k` = 1 if any relevant item is within k, else 0;
 * - `ap@k` = Σ_{i ≤ k, r_i relevant} (tp@i / i) / |R|, average precision cut at k
 *   (trec_eval's map_cut_k; `ap@1000` is its `map` over a 1,000-item run).
 * Macro means average over the evaluated queries.
 */
import { f1FromCounts, fBetaFromCounts, macroAverage, setScores, type SetScores } from '../rewards/setMetrics.ts';
import type { Corpus } from '../index/core/types.ts';
import { trecOrder } from './trec.ts';

export const DEFAULT_CUTOFFS: readonly number[] = Object.freeze([1, 3, 10, 100, 1000]);
export const RANKED_METRICS = ['mrr', 'ndcg', 'ndcgBinary', 'p', 'r', 'f1', 'hit', 'ap'] as const;
export type RankedMetricName = (typeof RANKED_METRICS)[number];
/** e.g. "ndcg@10" */
export type RankedMetricKey = `${RankedMetricName}@${number}`;
export type RankedScores = Record<RankedMetricKey, number>;

/** What evaluation needs from a corpus (a Corpus satisfies it). */
export type Judgements = Pick<Corpus, 'qrels' | 'relevant'>;

function dedupe(ranked: readonly string[]): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const id of ranked) {
    if (!seen.has(id)) {
      seen.add(id);
      out.push(id);
    }
  }
  return out;
}

/**
 * Ranked metrics of one query's ranking. `grades` gives graded relevance (defaults to
 * grade 1 for every relevant item).
 */
export function rankedMetrics(
  rankedIn: readonly string[],
  relevant: ReadonlySet<string>,
  grades?: ReadonlyMap<string, number>,
  cutoffs: readonly number[] = DEFAULT_CUTOFFS,
): RankedScores {
  const ranked = dedupe(rankedIn);
  const gradeOf = (id: string): number => (relevant.has(id) ? (grades?.get(id) ?? 1) : 0);
  const ideal = [...relevant].map(gradeOf).sort((a, b) => b - a);
  const out = {} as RankedScores;
  const nRel = relevant.size;
  for (const k of cutoffs) {
    let tp = 0;
    let firstRank = 0;
    let dcg = 0;
    let dcgBin = 0;
    let precSum = 0;
    const lim = Math.min(k, ranked.length);
    for (let i = 0; i < lim; i++) {
      const g = gradeOf(ranked[i]);
      if (g > 0) {
        tp++;
        precSum += tp / (i + 1);
        if (firstRank === 0) firstRank = i + 1;
        const disc = Math.log2(i + 2);
        dcg += g / disc;
        dcgBin += 1 / disc;
      }
    }
    let idcg = 0;
    let idcgBin = 0;
    for (let i = 0; i < Math.min(k, ideal.length); i++) {
      const disc = Math.log2(i + 2);
      idcg += ideal[i] / disc;
      idcgBin += 1 / disc;
    }
    out[`mrr@${k}`] = firstRank > 0 ? 1 / firstRank : 0;
    out[`ndcg@${k}`] = idcg > 0 ? dcg / idcg : 0;
    out[`ndcgBinary@${k}`] = idcgBin > 0 ? dcgBin / idcgBin : 0;
    out[`p@${k}`] = tp / k;
    out[`r@${k}`] = nRel > 0 ? tp / nRel : 0;
    out[`f1@${k}`] = f1FromCounts(k, nRel, tp);
    out[`hit@${k}`] = tp > 0 ? 1 : 0;
    out[`ap@${k}`] = nRel > 0 ? precSum / nRel : 0;
  }
  return out;
}

/**
 * F1 (or F-beta) of the top-k set for every k = 1..maxK of one ranking, as an array
 * indexed by k (index 0 unused, 0). Beyond the end of the ranking the set stops
 * growing (top-k = the whole ranking). Used to tune a retrieval cut-off.
 */
export function setF1Curve(rankedIn: readonly string[], relevant: ReadonlySet<string>, maxK: number, beta = 1): Float64Array {
  const ranked = dedupe(rankedIn);
  const curve = new Float64Array(maxK + 1);
  let tp = 0;
  for (let k = 1; k <= maxK; k++) {
    if (k <= ranked.length && relevant.has(ranked[k - 1])) tp++;
    const nRet = Math.min(k, ranked.length);
    curve[k] = fBetaFromCounts(nRet, relevant.size, tp, beta);
  }
  return curve;
}

export interface RunEntry {
  queryId: string;
  /** The ranking (best first). */
  ranked: readonly string[];
  /**
   * The ranking's scores (aligned with `ranked`). When given, the ranked metrics order the
   * items as trec_eval does (score, highest first; ties by document id, the larger first:
   * src/trec.ts trecOrder), so they equal trec_eval's on the run file written from them.
   */
  scores?: readonly number[];
  /** The whole retrieved (matched) set, when the system produces one. */
  matched?: Iterable<string>;
}

export interface RunEvaluation {
  /** Number of queries evaluated. */
  queries: number;
  /** Macro means of the ranked metrics. */
  ranked: RankedScores;
  /** Macro means of whole-set P/R/F1/F-beta; present when every entry has `matched`. */
  set?: SetScores;
  perQuery: { queryId: string; ranked: RankedScores; set?: SetScores }[];
}

/**
 * Macro-averaged evaluation of a run. Every entry is evaluated against the query's
 * relevant set (empty when the query has none: callers should pass judged queries
 * only, see splits.judgedQueryIds).
 */
export function evaluateRun(
  entries: readonly RunEntry[],
  judgements: Judgements,
  opts: { cutoffs?: readonly number[]; beta?: number } = {},
): RunEvaluation {
  const cutoffs = opts.cutoffs ?? DEFAULT_CUTOFFS;
  const beta = opts.beta ?? 1;
  const empty = new Set<string>();
  const perQuery: RunEvaluation['perQuery'] = [];
  let allMatched = entries.length > 0;
  for (const e of entries) {
    const rel = judgements.relevant.get(e.queryId) ?? empty;
    const order = e.scores ? trecOrder(e.ranked.map((id, i) => ({ id, score: e.scores![i] }))).map((h) => h.id) : e.ranked;
    const ranked = rankedMetrics(order, rel, judgements.qrels.get(e.queryId), cutoffs);
    if (e.matched === undefined) {
      allMatched = false;
      perQuery.push({ queryId: e.queryId, ranked });
    } else {
      perQuery.push({ queryId: e.queryId, ranked, set: setScores(e.matched, rel, beta) });
    }
  }
  const mean = {} as RankedScores;
  for (const name of RANKED_METRICS) {
    for (const k of cutoffs) {
      const key: RankedMetricKey = `${name}@${k}`;
      let s = 0;
      for (const q of perQuery) s += q.ranked[key];
      mean[key] = perQuery.length > 0 ? s / perQuery.length : 0;
    }
  }
  const out: RunEvaluation = { queries: perQuery.length, ranked: mean, perQuery };
  if (allMatched) out.set = macroAverage(perQuery.map((q) => q.set as SetScores));
  return out;
}
