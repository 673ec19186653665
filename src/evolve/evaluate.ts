/**
 * Held-out evaluation of a (query generator, item generation) pair: each held-out query's
 * keywords come from the query planner (greedy, or sampled at the run's decode
 * temperature, seeded per query), the whole matched set is retrieved by the CoGR rule
 * and ranked by BM25; P/R/F1 of the whole set and the ranked metrics are macro-averaged
 * (src/metrics.ts). F1 is the mean of per-query F1, so it can sit below both mean P and
 * mean R.
 */
import { createRng, deriveSeed } from '../../index/random.ts';
import type { Corpus, Query } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import { queryInput } from '../../generators/sft.ts';
import { evaluateRun, type RunEntry } from '../metrics.ts';
import type { RunConfig } from '../run/config.ts';
import type { HeldOutMetrics } from '../run/state.ts';

export interface QueryKeywordsFn {
  (q: Query): string[];
}

/**
 * A query's keywords from the planner as the run's config says: greedy, or sampled at
 * the decode temperature and seeded per query.
 */
export function plannerKeywords(planner: KeywordPlanner, seed: number, config: Pick<RunConfig, 'decode' | 'decodeTemperature'>): QueryKeywordsFn {
  if (config.decode === 'greedy') return (q) => planner.plan(queryInput(q)).keywords;
  const temperature = config.decodeTemperature;
  return (q) => planner.plan(queryInput(q), { temperature, rng: createRng(deriveSeed(seed, 'eval', q.id)) }).keywords;
}

/** The metrics of a query set, and each query's F_β of its whole matched set, in order (the dev adoption test pairs them). */
export function evaluateQueries(
  itemView: KeywordView,
  queries: readonly Query[],
  keywordsOf: QueryKeywordsFn,
  judgements: Pick<Corpus, 'qrels' | 'relevant'>,
  beta = 1,
): { metrics: HeldOutMetrics; perQuery: number[] } {
  const entries: RunEntry[] = [];
  let kwTotal = 0;
  let matchedTotal = 0;
  for (const q of queries) {
    const keywords = keywordsOf(q);
    kwTotal += keywords.length;
    const res = itemView.search({ self: q.text, keywords }, { all: true });
    matchedTotal += res.matched;
    const ranked = res.items.map((x) => x.id);
    entries.push({ queryId: q.id, ranked, matched: ranked });
  }
  const ev = evaluateRun(entries, judgements, { beta });
  const n = queries.length || 1;
  const metrics: HeldOutMetrics = {
    queries: queries.length,
    f1: ev.set?.f1 ?? 0,
    precision: ev.set?.precision ?? 0,
    recall: ev.set?.recall ?? 0,
    ndcg10: ev.ranked['ndcg@10'] ?? 0,
    mrr10: ev.ranked['mrr@10'] ?? 0,
    hit3: ev.ranked['hit@3'] ?? 0,
    meanMatched: matchedTotal / n,
    meanKeywords: kwTotal / n,
    ranked: { ...ev.ranked },
  };
  return { metrics, perQuery: ev.perQuery.map((q) => q.set?.fBeta ?? 0) };
}
