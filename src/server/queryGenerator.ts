/**
 * The served round's query-side generator as a document that a keyword worker can
 * rebuild (keywordPool.ts): loading it on the main thread (`loadQueryGenerator`, from the
 * published policies) and rebuilding it in a worker (`rebuildQueryGenerator`, once per
 * worker and generation) are the only two places that know what the generator is. Today
 * it is the round's query planner (generators/planner), decoded greedily over the served
 * item view; its relevance model is rebuilt over the dataset's items, so serving it needs
 * them (the stored run's dataset or --dataset).
 */
import type { Item } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { KeyValueStore } from '../../generators/types.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { servedList, servedSet } from '../../generators/planner/ranking.ts';
import { RelevanceModel, denseVectorsOf } from '../../generators/planner/relevance.ts';
import { textTokens } from '../../index/text/analyzer.ts';
import { NoSearchableTerms, type QueryGeneratorDocument, type RankedSet, type RankRequest } from './queryTypes.ts';
export type { QueryGeneratorDocument } from './queryTypes.ts';
import { cogrError } from '../../index/core/errors.ts';
import { readServedPlanner } from '../run/policies.ts';

/** A generator rebuilt in a worker: one query text in, its keywords out. */
export interface QueryPlanner {
  /** The relevance model it plans with (reused by the next generator rebuilt over the same items). */
  readonly relevance: RelevanceModel | null;
  plan(text: string): string[] | Promise<string[]>;
  /** The served set of a query ordered by a ranker (over the view the planner was rebuilt on). */
  rank(req: RankRequest): RankedSet;
}

/**
 * The query generator serving `round` (run/policies.ts readServedPlanner: the planner of
 * round `exact` when saved, else the newest at or before `round`), or null when the
 * database saved none.
 */
export async function loadQueryGenerator(
  policies: KeyValueStore,
  round: number | null,
  exact?: number,
): Promise<QueryGeneratorDocument | null> {
  const served = await readServedPlanner(policies, round, exact);
  return served === null ? null : { kind: 'planner', ...served };
}

/**
 * Rebuild a generator from its document against the served item view (in a keyword worker);
 * `reuse`: the relevance model a generator of the same document was rebuilt with over the same
 * items (its text index and memos are kept; only the view is attached anew).
 */
export function rebuildQueryGenerator(
  doc: QueryGeneratorDocument,
  itemView: KeywordView,
  items: readonly Item[] | null,
  reuse?: RelevanceModel,
): QueryPlanner {
  if (!items)
    throw cogrError(
      'INVALID_ARGUMENT',
      "the query planner needs the dataset's items (serve it with the stored run's dataset or --dataset)",
    );
  const planner = KeywordPlanner.fromJSON(doc.json, items, reuse);
  planner.attachOpposite(itemView);
  // Build the lazily made structures (text index, per-view maps) now, at load, not in the first request.
  // With dense features the warm-up text needs a vector: a zero one (cosine 0 with every item).
  // (A run whose encoder only judges the keywords has its vectors under the planner's keywordModel.)
  const denseModel =
    planner.config.keywordModel ?? (planner.relevance instanceof RelevanceModel ? planner.relevance.embeddingsModel : null);
  const dv = denseModel !== null ? denseVectorsOf(denseModel) : undefined;
  if (dv && dv.query('warm up') === undefined) dv.addQuery('warm up', new Float32Array(dv.dim));
  planner.plan({ id: '\u0000warm-up', text: 'warm up' });
  planner.clearCache();
  const relevance = planner.relevance instanceof RelevanceModel ? planner.relevance : null;
  // A text none of whose words occurs in the items' texts or keywords has nothing to plan
  // from: the planner would offer the keywords of the items likeliest a priori.
  const searchable = (text: string): boolean => {
    if (relevance !== null && relevance.knownWords(text) > 0) return true;
    for (const w of textTokens(text, itemView.analyzer)) if (itemView.wordOrdinal(w) >= 0) return true;
    return false;
  };
  return {
    relevance,
    // Greedy decoding: the same query always gets the same keywords (and caches well).
    async plan(text: string): Promise<string[]> {
      if (!searchable(text)) throw new NoSearchableTerms(text);
      const out = await planner.generate('query', [{ id: 'http', text }], { samples: 1, temperature: 0 });
      const s = out[0]?.[0];
      if (!s || s.format !== 'ok') throw new Error('the generator output is not a keyword list');
      return s.keywords;
    },
    rank(req: RankRequest): RankedSet {
      const input = { id: 'http', text: req.text };
      const found = itemView.search({ self: req.text, keywords: req.keywords }, { all: true });
      const served = servedSet(itemView, found.items, planner, input, req.floor);
      const ranked = servedList(served.items, req.ranker, planner, input, itemView, req.floor.backfill ?? 0).slice(
        0,
        Math.max(0, req.limit),
      );
      return {
        matched: served.items.length,
        ordinals: ranked.map((x) => x.ordinal),
        scores: ranked.map((x) => x.score),
        keywordScores: ranked.map((x) => x.keywordScore),
        fallback: served.fallback,
      };
    },
  };
}
