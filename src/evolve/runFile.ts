/**
 * The served ranking of a stored run's final step (its best dev step: run/state.ts
 * bestServing) for the split's held-out queries, as a TREC run (src/trec.ts): each
 * held-out query planned by that step's query planner (greedy, or sampled with the
 * step's seed, as the step was evaluated), its whole matched set retrieved from that
 * step's item generation, the SFT floor added (ranking.ts servedSet) and ordered by the
 * run's served ranker (ranking.ts rankMatched), each item with the ranker's score. A
 * query whose keywords match nothing (and gets no fallback) has no lines.
 */
import type { CogrDb } from '../../index/store/db.ts';
import { deriveSeed } from '../../index/core/random.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Corpus, Query } from '../../index/core/types.ts';
import { backfill, NO_FLOOR, rankMatched, servedSet, type Ranker } from '../../generators/planner/ranking.ts';
import { queryInput } from '../../generators/sft.ts';
import type { RunConfig } from '../run/config.ts';
import { loadPlanner, policyStore } from '../run/policies.ts';
import { bestServing, rankOf, type RunSplit, type StepRecord } from '../run/state.ts';
import type { RunQuery } from '../trec.ts';
import { plannerKeywords } from './evaluate.ts';

export async function finalServedRun(
  db: CogrDb,
  corpus: Corpus,
  config: RunConfig,
  split: RunSplit,
  steps: readonly StepRecord[],
): Promise<{ step: string | null; ranker: Ranker; queries: RunQuery[] }> {
  const serving = bestServing(steps);
  const ranker = rankOf(steps);
  if (!serving) return { step: null, ranker, queries: [] };
  const view = await new KeywordIndexStore(db).openView('item', serving.itemGeneration);
  const planner = await loadPlanner(policyStore(db), serving.plannerRound, corpus.items);
  planner.attachOpposite(view);
  const floor = steps.find((s) => s.phase === 'sft')?.floor ?? NO_FLOOR;
  const keywordsOf = plannerKeywords(planner, deriveSeed(config.seed, serving.step), config);
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  const queries: RunQuery[] = [];
  for (const id of split.eval) {
    const q = byId.get(id) as Query | undefined;
    if (!q) continue;
    const input = queryInput(q);
    const found = view.search({ self: q.text, keywords: keywordsOf(q) }, { all: true });
    const served = servedSet(view, found.items, planner, input, { floor: floor.floor, fallback: floor.fallback });
    const ranked = backfill(rankMatched(served.items, ranker, planner, input), ranker, planner, input, view, floor.backfill ?? 0);
    queries.push({ queryId: q.id, hits: ranked.map((x) => ({ id: x.id, score: x.score })) });
  }
  return { step: serving.step, ranker, queries };
}
