/**
 * The served ranking of a stored run's final step (its best dev step: run/state.ts
 * bestServing) for the split's held-out queries, as a TREC run (src/trec.ts): each
 * held-out query planned by that step's query planner (greedy, or sampled with the
 * step's seed, as the step was evaluated), its whole matched set retrieved from that
 * step's item generation, the SFT floor added — or the relevance model's own set when the
 * step's set guard chose those (run/state.ts servedFloor, ranking.ts servedSet) — and
 * ordered by the run's served ranker (ranking.ts rankMatched), each item with the ranker's
 * score. A query whose keywords match nothing (and gets no fallback) has no lines.
 */
import { deriveSeed } from '../../index/core/random.ts';
import { servedList, servedSet } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import { queryInput } from '../../generators/sft.ts';
import { runPlanner, type RunContext } from '../run/context.ts';
import { bestServing, generatorRound, rankOf, servedFloor, type StepRecord } from '../run/state.ts';
import type { RunQuery } from '../trec.ts';
import { plannerKeywords } from './evaluate.ts';

export async function finalServedRun(
  run: RunContext,
  steps: readonly StepRecord[],
  /** Another stored step to serve as the final step is served (its generations, planner and floor); default the final step. */
  at?: StepRecord,
): Promise<{ step: string | null; ranker: Ranker; queries: RunQuery[]; sets: Map<string, string[]> }> {
  const serving = at
    ? {
        step: at.step,
        itemGeneration: at.itemGeneration,
        plannerRound: generatorRound(steps.slice(0, steps.indexOf(at) + 1), 'query'),
      }
    : bestServing(steps);
  const ranker = rankOf(steps);
  // Each held-out query's served set (its ids, in search order), the list's head before the backfill.
  const sets = new Map<string, string[]>();
  if (!serving) return { step: null, ranker, queries: [], sets };
  const view = await run.store.openView('item', serving.itemGeneration);
  const planner = await runPlanner(run, serving.plannerRound);
  planner.attachOpposite(view);
  const floor = servedFloor(steps, at);
  const keywordsOf = plannerKeywords(planner, deriveSeed(run.config.seed, serving.step), run.config);
  const queries: RunQuery[] = [];
  for (const q of run.evalQueries) {
    const input = queryInput(q);
    const found = view.search({ self: q.text, keywords: keywordsOf(q) }, { all: true });
    const served = servedSet(view, found.items, planner, input, floor);
    const ranked = servedList(served.items, ranker, planner, input, view, floor.backfill ?? 0);
    queries.push({ queryId: q.id, hits: ranked.map((x) => ({ id: x.id, score: x.score })) });
    sets.set(
      q.id,
      served.items.map((x) => x.id),
    );
  }
  return { step: serving.step, ranker, queries, sets };
}
