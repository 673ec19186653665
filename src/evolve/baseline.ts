/**
 * The baselines on a run's own split (the demo's reference rows and each fold of
 * `cogr evolve`): BM25 over raw item text (wink-bm25-text-search, src/baseline/bm25.ts)
 * and BM25 + RM3 (src/baseline/rm3.ts), both over the baselines' default text analysis
 * (DEFAULTS.baseline.analysis: Lucene's EnglishAnalyzer chain, index/text/english.ts), the retrieval cut-off tuned on the training
 * queries to maximise F1 and applied to the held-out ones; and the run's relevance model
 * with an expected-F1 cut over all items (src/baseline/model.ts).
 */
import type { Corpus } from '../../index/core/types.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { RelevanceModel } from '../../generators/planner/relevance.ts';
import { Bm25Index, tuneCutoff, type SplitBaseline } from '../baseline/bm25.ts';
import { modelOnQueries } from '../baseline/model.ts';
import type { StepRecord } from '../run/records.ts';
import { Rm3Index } from '../baseline/rm3.ts';
import { evaluateRun, setF1Curve, type RunEntry } from '../metrics.ts';
import { trecOrder, type ScoredId } from '../trec.ts';
import { runPlanner, type RunContext } from '../run/context.ts';
import { listPolicyRounds } from '../run/policies.ts';
import type { RunSplit } from '../run/state.ts';

export type { SplitBaseline } from '../baseline/bm25.ts';

/** A ranking of scored item ids for a query text, best first (ties by id as trec_eval), at most `limit`. */
export type TextRanking = (text: string, limit: number) => ScoredId[];

/** Any text ranking on the split: the cut-off tuned on its training queries, figures over its held-out ones. */
export function rankedOnSplit(
  corpus: Corpus,
  split: RunSplit,
  rank: TextRanking,
  maxCutoff: number = DEFAULTS.baseline.maxCutoff,
): SplitBaseline {
  return rankedWithFigures(corpus, split, rank, maxCutoff).baseline;
}

/** rankedOnSplit, and each held-out query's figures (in split order) whose means it reports. */
function rankedWithFigures(
  corpus: Corpus,
  split: RunSplit,
  rank: TextRanking,
  maxCutoff: number,
): { baseline: SplitBaseline; figures: PerQueryFigures } {
  const text = new Map(corpus.queries.map((q) => [q.id, q.text]));
  const ranked = new Map<string, string[]>();
  for (const id of [...split.train, ...split.eval])
    ranked.set(
      id,
      trecOrder(rank(text.get(id) ?? '', maxCutoff)).map((h) => h.id),
    );
  const curves = split.train.map((id) => setF1Curve(ranked.get(id)!, corpus.relevant.get(id) ?? new Set(), maxCutoff));
  const { cutoff, f1: trainF1 } = tuneCutoff(curves, maxCutoff);
  const entries: RunEntry[] = split.eval.map((id) => {
    const r = ranked.get(id)!;
    return { queryId: id, ranked: r, matched: r.slice(0, cutoff) };
  });
  const ev = evaluateRun(entries, corpus);
  return {
    baseline: {
      cutoff,
      trainF1,
      f1: ev.set?.f1 ?? 0,
      precision: ev.set?.precision ?? 0,
      recall: ev.set?.recall ?? 0,
      ndcg10: ev.ranked['ndcg@10'] ?? 0,
      map: ev.ranked['ap@1000'] ?? 0,
    },
    figures: figuresOf(ev),
  };
}

export function bm25OnSplit(
  corpus: Corpus,
  split: RunSplit,
  maxCutoff: number = DEFAULTS.baseline.maxCutoff,
  index?: Bm25Index,
): SplitBaseline {
  const bm25 = index ?? new Bm25Index(corpus.items);
  return rankedOnSplit(corpus, split, (text, limit) => bm25.search(text, limit), maxCutoff);
}

/** F1 of the served set and nDCG@10 of the served list of every held-out query of a split, in split order. */
export interface PerQueryFigures {
  f1: number[];
  ndcg10: number[];
}

/**
 * The per-query figures of a run's served sets and lists (runFile.ts finalServedRun, for
 * the final step or another): a query it has no lines for counts as empty. Their means
 * are the step's held-out F1 and served nDCG@10.
 */
export function servedFigures(
  corpus: Corpus,
  split: RunSplit,
  served: { queries: readonly { queryId: string; hits: readonly ScoredId[] }[]; sets: ReadonlyMap<string, readonly string[]> },
): PerQueryFigures {
  const hits = new Map(served.queries.map((q) => [q.queryId, q.hits]));
  return figuresOf(
    evaluateRun(
      split.eval.map((id) => {
        const h = hits.get(id) ?? [];
        return { queryId: id, ranked: h.map((x) => x.id), scores: h.map((x) => x.score), matched: served.sets.get(id) ?? [] };
      }),
      corpus,
    ),
  );
}

function figuresOf(ev: ReturnType<typeof evaluateRun>): PerQueryFigures {
  return { f1: ev.perQuery.map((q) => q.set?.f1 ?? 0), ndcg10: ev.perQuery.map((q) => q.ranked['ndcg@10'] ?? 0) };
}

/** The text indexes the baselines of several splits of one corpus share. */
export interface BaselineIndexes {
  bm25: Bm25Index;
  rm3: Rm3Index;
}

export function baselineIndexes(corpus: Corpus): BaselineIndexes {
  return { bm25: new Bm25Index(corpus.items), rm3: new Rm3Index(corpus.items) };
}

/** Every baseline of a run's split: BM25 and BM25 + RM3 (cut-offs tuned on the training queries) and the run's own relevance model without the keyword constraint. */
export interface SplitBaselines {
  bm25: SplitBaseline;
  rm3: SplitBaseline;
  /**
   * The relevance model of what the run serves without the keyword constraint, α of the
   * expected-F1 cut tuned on the queries it was fitted on: the SFT step's (core training
   * queries), or after a final refit the refit's (every training query); null before SFT.
   */
  model: (SplitBaseline & { alpha: number }) | null;
}

/**
 * The baselines of a run's split; the model baseline uses the relevance model of the run's
 * final refit when `steps` has one (fitted on every training query, as what is served),
 * else the SFT step's (its round-0 planner, core training queries). Beside them, each
 * held-out query's figures under BM25 and BM25 + RM3 (for the paired comparisons).
 */
export async function splitBaselines(
  run: RunContext,
  indexes: BaselineIndexes = baselineIndexes(run.corpus),
  steps: readonly StepRecord[] = [],
): Promise<{ baselines: SplitBaselines; figures: { bm25: PerQueryFigures; rm3: PerQueryFigures } }> {
  const { corpus, split } = run;
  const max = DEFAULTS.baseline.maxCutoff;
  const bm25 = rankedWithFigures(corpus, split, (text, limit) => indexes.bm25.search(text, limit), max);
  const rm3 = rankedWithFigures(corpus, split, (text, limit) => indexes.rm3.search(text, limit), max);
  const figures = { bm25: bm25.figures, rm3: rm3.figures };
  if (!(await listPolicyRounds(run.policies, 'planner')).includes(0))
    return { baselines: { bm25: bm25.baseline, rm3: rm3.baseline, model: null }, figures };
  const refit = steps.find((s) => s.phase === 'refit');
  const planner = await runPlanner(run, refit ? refit.round : 0);
  const train = refit ? [...run.coreQueries, ...run.devQueries] : run.coreQueries;
  const { entries: _e, ...model } = modelOnQueries(planner.relevance as RelevanceModel, corpus, train, run.evalQueries);
  return { baselines: { bm25: bm25.baseline, rm3: rm3.baseline, model }, figures };
}
