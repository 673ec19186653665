/**
 * Held-out evaluation of a (query generator, item generation) pair: each held-out query's
 * keywords come from the query planner (greedy, or sampled at the run's decode
 * temperature, seeded per query), the whole matched set is retrieved by the CoGR rule
 * and ranked by BM25; P/R/F1 of the whole set and the ranked metrics are macro-averaged
 * (src/metrics.ts). F1 is the mean of per-query F1, so it can sit below both mean P and
 * mean R.
 */
import { normalizeKeyword } from '../../index/text/normalize.ts';
import { createRng, deriveSeed } from '../../index/core/random.ts';
import type { Corpus, Query } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import { servedList, servedSet, type Floor, type RankingMetrics } from '../../generators/planner/ranking.ts';
import { RANKERS, type Ranker } from '../../generators/planner/rankers.ts';
import { keywordCosines } from '../../generators/planner/queryContext.ts';
import { denseVectorsOf } from '../../generators/planner/relevance.ts';
import { queryInput } from '../../generators/sft.ts';
import { evaluateRun, type RunEntry } from '../metrics.ts';
import { auditQueries, keywordMatches, ownTextMatches, type AuditedQuery } from '../drift/keywordAudit.ts';
import type { RunConfig } from '../run/config.ts';
import type { HeldOutMetrics } from '../run/state.ts';

export interface QueryKeywordsFn {
  (q: Query): string[];
}

/**
 * A query's keywords from the planner as the run's config says: greedy, or sampled at
 * the decode temperature and seeded per query.
 */
export function plannerKeywords(
  planner: KeywordPlanner,
  seed: number,
  config: Pick<RunConfig, 'decode' | 'decodeTemperature'>,
): QueryKeywordsFn {
  if (config.decode === 'greedy') return (q) => planner.plan(queryInput(q)).keywords;
  const temperature = config.decodeTemperature;
  return (q) => planner.plan(queryInput(q), { temperature, rng: createRng(deriveSeed(seed, 'eval', q.id)) }).keywords;
}

/**
 * What evaluating with several rankers needs: the planner attached to the item view (its
 * p and text BM25). `ownNames`: evaluate training queries as held out — no {q} in the
 * probe and the query's own names (string, label) dropped from its keywords, as their
 * rewards score them.
 */
export interface RankWith {
  planner: KeywordPlanner;
  ownNames?: (q: Query) => readonly string[];
  /** Skip the rankers (only the matched sets' figures are wanted). */
  noRankings?: boolean;
  /** The served set's floor (ranking.ts servedSet); none by default. */
  floor?: Floor;
  /**
   * Give each keyword's cosine to its query in the keyword audit, when the planner has an embeddings
   * model with its vectors registered: only where the audit is kept (a step's held-out figures, an
   * import's), not in the adoption tests' many evaluations of training queries.
   */
  cosines?: boolean;
}

/**
 * The metrics of a query set, and each query's F_β of its whole matched set, in order (the
 * dev adoption test pairs them). `metrics.ranked` and `ndcg10` rank the matched set by
 * keyword-bag BM25 (the paper's rule); with `rankWith`, `rankings` gives every ranker's
 * nDCG@10 / MAP / MRR@10 over the same matched sets (generators/planner/ranking.ts).
 */
export function evaluateQueries(
  itemView: KeywordView,
  queries: readonly Query[],
  keywordsOf: QueryKeywordsFn,
  judgements: Pick<Corpus, 'qrels' | 'relevant'>,
  beta = 1,
  rankWith?: RankWith,
): { metrics: HeldOutMetrics; perQuery: number[] } {
  const entries: RunEntry[] = [];
  const byRanker = new Map<Ranker, RunEntry[]>(RANKERS.map((r) => [r, []]));
  let kwTotal = 0;
  let matchedTotal = 0;
  let fallbacks = 0;
  const audited: AuditedQuery[] = [];
  // With an embeddings model behind the planner (and its vectors registered in this thread), the audit
  // gives each keyword's cosine to its query, as `cogr audit --embeddings` does.
  const model = rankWith?.cosines ? (rankWith.planner.config.keywordModel ?? rankWith.planner.relevance.embeddingsModel ?? null) : null;
  const cosinesOf = model !== null && denseVectorsOf(model) !== undefined ? rankWith!.planner.relevance : null;
  rankWith?.planner.prefetch(queries.map(queryInput));
  for (const q of queries) {
    let keywords = keywordsOf(q);
    const own = rankWith?.ownNames?.(q);
    if (own) {
      const drop = new Set(own.map((k) => normalizeKeyword(k)));
      keywords = keywords.filter((k) => !drop.has(normalizeKeyword(k)));
    }
    kwTotal += keywords.length;
    audited.push({
      text: q.text,
      keywords,
      matches: keywords.map((k) => keywordMatches(itemView, k)),
      // Matched by its own text ({q}) unless its own names stand in for it.
      ownMatches: own ? 0 : ownTextMatches(itemView, q.text),
      ...(cosinesOf ? { cosines: Array.from(keywordCosines(cosinesOf, q.text, keywords, model)) } : {}),
    });
    const found = itemView.search(own ? { keywords } : { self: q.text, keywords }, { all: true });
    const served = rankWith?.floor ? servedSet(itemView, found.items, rankWith.planner, queryInput(q), rankWith.floor) : null;
    if (served?.fallback) fallbacks++;
    const res = served ? { matched: served.items.length, items: served.items } : found;
    matchedTotal += res.matched;
    const ranked = res.items.map((x) => x.id);
    const scores = res.items.map((x) => x.score);
    // With scores the ranked metrics order ties as trec_eval does (src/metrics.ts), so they equal trec_eval's on `--run-file`.
    entries.push({ queryId: q.id, ranked, scores, matched: ranked });
    if (rankWith && !rankWith.noRankings) {
      for (const r of RANKERS) {
        if (r === 'keywords') {
          byRanker.get(r)!.push({ queryId: q.id, ranked, scores });
          continue;
        }
        const input = queryInput(q);
        const order = servedList(res.items, r, rankWith.planner, input, itemView, rankWith.floor?.backfill ?? 0);
        byRanker.get(r)!.push({ queryId: q.id, ranked: order.map((x) => x.id), scores: order.map((x) => x.score) });
      }
    }
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
    keywords: auditQueries(audited),
  };
  if (rankWith?.floor) metrics.fallbacks = fallbacks;
  if (rankWith && !rankWith.noRankings) {
    const rankings = {} as Record<Ranker, RankingMetrics>;
    for (const r of RANKERS) {
      const e = r === 'keywords' ? ev : evaluateRun(byRanker.get(r)!, judgements);
      rankings[r] = { ndcg10: e.ranked['ndcg@10'] ?? 0, map: e.ranked['ap@1000'] ?? 0, mrr10: e.ranked['mrr@10'] ?? 0 };
    }
    metrics.rankings = rankings;
  }
  return { metrics, perQuery: ev.perQuery.map((q) => q.set?.fBeta ?? 0) };
}

/** Every ranker's figures pooled over several query sets (weighted by their query counts), and the number of queries. */
export function pooledRankings(measured: readonly { queries: number; rankings?: Record<Ranker, RankingMetrics> }[]): {
  queries: number;
  rankings: Record<Ranker, RankingMetrics>;
} {
  const used = measured.filter((m) => m.rankings && m.queries > 0);
  const queries = used.reduce((a, m) => a + m.queries, 0);
  const mean = (r: Ranker, f: keyof RankingMetrics) => used.reduce((a, m) => a + m.rankings![r][f] * m.queries, 0) / Math.max(1, queries);
  const rankings = {} as Record<Ranker, RankingMetrics>;
  for (const r of RANKERS) rankings[r] = { ndcg10: mean(r, 'ndcg10'), map: mean(r, 'map'), mrr10: mean(r, 'mrr10') };
  return { queries, rankings };
}

/**
 * The served ranker: `rank` when the run names one, else the ranker with the best nDCG@10
 * over the pooled figures (ties: the earlier of RANKERS, keywords first; keywords when
 * nothing was measured).
 */
export function chooseRanker(rank: Ranker | 'auto', pooled: { queries: number; rankings: Record<Ranker, RankingMetrics> }): Ranker {
  if (rank !== 'auto' || pooled.queries === 0) return rank === 'auto' ? 'keywords' : rank;
  let best: Ranker = 'keywords';
  for (const r of RANKERS) if (pooled.rankings[r].ndcg10 > pooled.rankings[best].ndcg10 + 1e-12) best = r;
  return best;
}
