/**
 * A stored run's own SFT targets, for an external model's SFT (`cogr sft --export` on a
 * run): what the embedded generators were initialised on, read from the run's SFT step
 * rather than a split of its own.
 *
 *   items    every item judged relevant to a core training query, with its keywords in the
 *            SFT step's item generation (the base item keywords: under the shared vocabulary,
 *            phrases several items carry)
 *   queries  every core training query, with the SFT planner's keywords planned as held out
 *            against that item generation (no {q}, its own names left out; greedy)
 *   dev      the run's dev queries the same way, and the items judged relevant only to them:
 *            never trained on, what a trainer's dev loss (when to stop SFT) is measured on
 *
 * Held-out queries and their judgements are never read.
 */
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import type { Query } from '../../index/core/types.ts';
import { exportTrl, queryInput } from '../../generators/sft.ts';
import { runPlanner, type RunReader } from '../run/context.ts';

export interface SftTargets {
  /** The SFT step's item generation. */
  itemGeneration: number;
  items: Map<string, string[]>;
  queries: Map<string, string[]>;
  devItems: Map<string, string[]>;
  devQueries: Map<string, string[]>;
}

export async function runSftTargets(run: RunReader): Promise<SftTargets> {
  const sft = run.steps.find((s) => s.phase === 'sft');
  if (!sft) throw cogrError('NOT_FOUND', `the run in ${run.path} has no SFT step yet`);
  const view = await run.openView('item', sft.itemGeneration);
  const planner = await runPlanner(run, 0);
  planner.attachOpposite(view);
  const keywordsOf = (ids: Iterable<string>) => {
    const out = new Map<string, string[]>();
    for (const id of ids) {
      const o = view.ordinalOf(id);
      if (o >= 0) out.set(id, view.keywordsOf(o));
    }
    return out;
  };
  const judged = (qs: readonly Query[], also: ReadonlyMap<string, ReadonlySet<string>>) => {
    const out = new Set<string>();
    for (const q of qs) for (const id of also.get(q.id) ?? []) out.add(id);
    return out;
  };
  const plans = (qs: readonly Query[]) => new Map(qs.map((q) => [q.id, planner.plan(queryInput(q), { asHeldOut: true }).keywords]));
  const coreItems = judged(run.coreQueries, run.coreRelevant);
  const devRelevant = new Map(run.devQueries.map((q) => [q.id, new Set(run.corpus.relevant.get(q.id) ?? [])]));
  const devOnly = [...judged(run.devQueries, devRelevant)].filter((id) => !coreItems.has(id));
  return {
    itemGeneration: sft.itemGeneration,
    items: keywordsOf(coreItems),
    queries: plans(run.coreQueries),
    devItems: keywordsOf(devOnly),
    devQueries: plans(run.devQueries),
  };
}

/** The targets in TRL's conversational format: `dir/item.jsonl`, `dir/query.jsonl`, and the dev ones under `dir/dev/`; compact prompts (the user message alone, prompts.ts). */
export function exportSftTargets(
  run: RunReader,
  t: SftTargets,
  dir: string,
  keywordLimit: number,
): { item: number; query: number; devItem: number; devQuery: number } {
  const items = run.corpus.items;
  const train = exportTrl(dir, {
    items,
    itemKeywords: t.items,
    queries: run.coreQueries,
    queryTargets: t.queries,
    keywordLimit,
    examples: 'compact',
  });
  const dev = exportTrl(join(dir, 'dev'), {
    items,
    itemKeywords: t.devItems,
    queries: run.devQueries,
    queryTargets: t.devQueries,
    keywordLimit,
    examples: 'compact',
  });
  return { item: train.item, query: train.query, devItem: dev.item, devQuery: dev.query };
}
