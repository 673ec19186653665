/**
 * The supervised comparison for the planner: the same relevance model p(item | query)
 * (generators/planner/relevance.ts: text BM25 and training-judgement features, fitted on
 * the training queries) without the keyword constraint. Each query's items are sorted by
 * p and cut where the planner's objective peaks over prefixes of that order,
 *   k* = argmax_k 2·Σ_{i ≤ k} p_(i) / (k + α·E),   E = Σ_i p_i,
 * the expected-F1 cut (α = 1 is the plain ratio of expectations); α is tuned on the
 * training queries (their own judgements out of their features) over the planner's grid.
 * The ranking is p over all items (its top 1,000 for the ranked metrics).
 */
import { ALPHA_GRID } from '../../generators/planner/training.ts';
import { expectedF1Cut, sortByP } from '../../generators/planner/expectedCut.ts';
import { DEFAULT_RELEVANCE, RelevanceModel, type RelevanceOptions } from '../../generators/planner/relevance.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { Corpus, Query } from '../../index/core/types.ts';
import { evaluateRun, type RunEntry } from '../metrics.ts';
import type { RunQuery } from '../trec.ts';
import { judgedQueryIds, kFolds } from '../splits.ts';
import type { SplitBaseline } from './bm25.ts';
import { baselineResult, checkFolds, type Bm25BaselineResult, type FoldResult } from './bm25.ts';

const RANK_DEPTH = 1000;

function f1Of(set: ArrayLike<number>, n: number, rel: ReadonlySet<number>): number {
  let tp = 0;
  for (let i = 0; i < n; i++) if (rel.has(set[i])) tp++;
  return tp === 0 ? 0 : (2 * tp) / (n + rel.size);
}

/** Figures of the model baseline on one split: α tuned on `train`, applied to `heldOut`. */
export function modelOnQueries(
  model: RelevanceModel,
  corpus: Pick<Corpus, 'qrels' | 'relevant'>,
  train: readonly Query[],
  heldOut: readonly Query[],
): SplitBaseline & { alpha: number; entries: RunEntry[] } {
  const relOrd = (q: Query) => new Set([...(corpus.relevant.get(q.id) ?? [])].map((id) => model.itemOrdinal(id)).filter((o) => o >= 0));
  const trainSorted = train.map((q) => ({ s: sortByP(model.probabilities(q)), rel: relOrd(q) }));
  let alpha = 1;
  let trainF1 = -1;
  for (const a of ALPHA_GRID) {
    let sum = 0;
    for (const t of trainSorted) sum += f1Of(t.s.order, expectedF1Cut(t.s, a), t.rel);
    const m = trainSorted.length ? sum / trainSorted.length : 0;
    if (m > trainF1 + 1e-12) {
      trainF1 = m;
      alpha = a;
    }
  }
  let cutSum = 0;
  const entries: RunEntry[] = heldOut.map((q) => {
    const p = model.probabilities(q);
    const s = sortByP(p);
    const k = expectedF1Cut(s, alpha);
    cutSum += k;
    const ids = (n: number) => Array.from(s.order.subarray(0, n), (o) => model.itemIds[o]);
    const depth = Math.min(RANK_DEPTH, s.order.length);
    // The scores let the ranked metrics order ties as trec_eval does (src/metrics.ts).
    return { queryId: q.id, ranked: ids(depth), scores: Array.from(s.order.subarray(0, depth), (o) => p[o]), matched: ids(k) };
  });
  const ev = evaluateRun(entries, corpus);
  return {
    cutoff: heldOut.length ? cutSum / heldOut.length : 0,
    trainF1: Math.max(0, trainF1),
    f1: ev.set?.f1 ?? 0,
    precision: ev.set?.precision ?? 0,
    recall: ev.set?.recall ?? 0,
    ndcg10: ev.ranked['ndcg@10'] ?? 0,
    map: ev.ranked['ap@1000'] ?? 0,
    alpha,
    entries,
  };
}

/** Fit the relevance model on training queries and their judgements. */
export function fitModel(corpus: Corpus, train: readonly Query[], opts: Partial<RelevanceOptions> = {}): RelevanceModel {
  return RelevanceModel.fit(
    corpus.items,
    train.map((q) => [{ id: q.id, text: q.text }, [...(corpus.relevant.get(q.id) ?? [])]] as const),
    opts,
  );
}

/** The k-fold model baseline: per fold, the relevance model fitted and α tuned on the fold's training queries. */
export function runModelBaseline(
  corpus: Corpus,
  options: { folds?: number; seed?: number; relevance?: Partial<RelevanceOptions>; logger?: Logger; run?: RunQuery[] } = {},
): Bm25BaselineResult & { method: 'model'; alphas: number[] } {
  const folds = options.folds ?? 5;
  const seed = options.seed ?? 1;
  const logger = options.logger ?? silentLogger;
  checkFolds(corpus, folds);
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  const pick = (ids: readonly string[]) => ids.map((id) => byId.get(id)!).filter(Boolean);
  const ids = judgedQueryIds(corpus);
  const perFold: FoldResult[] = [];
  const alphas: number[] = [];
  const all: RunEntry[] = [];
  kFolds(ids, folds, seed).forEach((split, f) => {
    logger.info(`model: fold ${f + 1}/${folds}: fitting the relevance model on ${split.train.length} training queries`);
    const model = fitModel(corpus, pick(split.train), { ...options.relevance, seed });
    const r = modelOnQueries(model, corpus, pick(split.train), pick(split.eval));
    all.push(...r.entries);
    for (const e of r.entries) options.run?.push({ queryId: e.queryId, hits: e.ranked.map((id, i) => ({ id, score: e.scores![i] })) });
    alphas.push(r.alpha);
    perFold.push({
      fold: f + 1,
      trainQueries: split.train.length,
      evalQueries: split.eval.length,
      cutoff: r.cutoff,
      trainF1: r.trainF1,
      f1: r.f1,
      precision: r.precision,
      recall: r.recall,
      ndcg10: r.ndcg10,
      map: r.map,
    });
    logger.info(`model: fold ${f + 1}/${folds} alpha=${r.alpha} mean cut=${r.cutoff.toFixed(1)} f1=${r.f1.toFixed(4)}`);
  });
  // k1 and b: the text BM25 features' parameters (generators/planner/textIndex.ts).
  return {
    method: 'model',
    alphas,
    ...baselineResult(
      corpus,
      { folds, seed, k1: 1.2, b: 0.75, analysis: options.relevance?.textAnalysis ?? DEFAULT_RELEVANCE.textAnalysis },
      perFold,
      all,
    ),
  };
}
