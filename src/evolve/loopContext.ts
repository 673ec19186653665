/**
 * The co-evolution loop's context (run.ts) and the helpers every step shares: committing a
 * generation, decoding the items, planning the query generation, refitting the relevance
 * model on a set of training queries, a generation held in memory.
 */
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { createRng, deriveSeed } from '../../index/core/random.ts';
import { makeKeywordNormalizer } from '../../index/text/normalize.ts';
import type { Item, Query, Side } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { carriedOnly } from '../../generators/policy/vocabulary.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { itemInput, queryInput, relevantOrdinals } from '../../generators/sft.ts';
import { RewardPool } from '../../workers/pool.ts';
import type { ProgressSink } from '../progress.ts';
import type { RunConfig } from '../run/config.ts';
import type { RunContext } from '../run/context.ts';
import { bestStep, type StepRecord } from '../run/state.ts';
import type { Floor } from '../../generators/planner/ranking.ts';

/** The loop's context: the run's (run/context.ts) with the worker pool, the served floor and the caller's sinks. */
export interface Ctx extends RunContext {
  pool: () => RewardPool;
  /** The served set's floor, chosen at SFT (none for runs written before it). */
  floor: Floor;
  logger: Logger;
  progress: ProgressSink;
  signal?: AbortSignal;
}

/** The judgements of `queries`, from the corpus. */
export function relevantOf(ctx: Ctx, queries: readonly Query[]): Map<string, ReadonlySet<string>> {
  const none = new Set<string>();
  return new Map(queries.map((q) => [q.id, ctx.corpus.relevant.get(q.id) ?? none]));
}

/** The relevance model of `base` fitted again, with its options, on `queries` and their judgements (the cross-fitted inner planners, the final refit). */
export function refitRelevance(
  ctx: Ctx,
  base: KeywordPlanner,
  queries: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
): RelevanceModel {
  const training = queries.map((q) => [queryInput(q), [...(relevant.get(q.id) ?? [])]] as const);
  return RelevanceModel.fit(ctx.corpus.items, training, (base.relevance as RelevanceModel).options);
}

/** A generation held in memory, built as the store builds a committed one (the writer's normalisation, the run's analyzer). */
export function memoryView(
  ctx: Ctx,
  entries: readonly { id: string; self: string; keywords: string[] }[],
  norm: ReturnType<typeof makeKeywordNormalizer> = makeKeywordNormalizer({ memo: 0 }),
): KeywordView {
  const normalised = entries.map((e) => ({ id: e.id, self: norm.self(e.self), keywords: norm.set(e.keywords).keywords }));
  return KeywordView.build('item', -1, normalised, { analyzer: ctx.config.analyzer });
}

// ---------------------------------------------------------------------------------------

export async function commitGeneration(
  ctx: Ctx,
  side: Side,
  entries: { id: string; self: string; keywords: string[] }[],
  meta: Record<string, unknown>,
  base: number | null,
): Promise<number> {
  const w = ctx.store.writer(side, base === null ? { base, mode: 'replace', analyzer: ctx.config.analyzer } : { base, mode: 'replace' });
  for (const e of entries) w.set(e.id, e.self, e.keywords);
  return w.commit(meta);
}

/** Decoding options for indexing: greedy, or sampled at the decode temperature and top-p with a per-entity seed. */
export function decodeOptions(
  config: Pick<RunConfig, 'decode' | 'decodeTemperature' | 'topP'>,
  seed: number,
): { temperature?: number; topP?: number; rng?: () => number; greedy?: boolean } {
  return config.decode === 'greedy' ? { greedy: true } : { temperature: config.decodeTemperature, topP: config.topP, rng: createRng(seed) };
}

/**
 * An item generation: every item's keywords decoded by the policy; under the shared
 * vocabulary, only those at least `minCarriers` items carry (vocabulary.ts carriedOnly).
 */
export function decodeItems(
  ctx: Ctx,
  policy: EmbeddedPolicy,
  step: string,
  opts: { raw?: boolean } = {},
): { id: string; self: string; keywords: string[] }[] {
  ctx.progress.start(`${step}: indexing items`, ctx.corpus.items.length);
  const out = ctx.corpus.items.map((it) => {
    const e = decodeItem(ctx, policy, step, it);
    ctx.progress.tick();
    return e;
  });
  ctx.progress.end();
  return opts.raw ? out : carriedVocabulary(ctx, out);
}

/** One item's keywords as `decodeItems` decodes them (its own seed), before the vocabulary's carrier rule. */
export function decodeItem(ctx: Ctx, policy: EmbeddedPolicy, step: string, it: Item): { id: string; self: string; keywords: string[] } {
  const r = policy.decode(itemInput(it), decodeOptions(ctx.config, deriveSeed(ctx.config.seed, step, 'index', it.id)));
  return { id: it.id, self: it.title, keywords: r.keywords };
}

/** With the shared vocabulary, an item generation's keywords that at least `minCarriers` items carry (vocabulary.ts carriedOnly); else as they are. */
export function carriedVocabulary(
  ctx: Ctx,
  entries: { id: string; self: string; keywords: string[] }[],
  key: (k: string) => string | null = makeKeywordNormalizer({ analyzer: ctx.config.analyzer }).key,
): { id: string; self: string; keywords: string[] }[] {
  if (ctx.config.vocabulary !== 'shared') return entries;
  return carriedOnly(entries, ctx.config.minCarriers, key);
}

/** The query generation: the planner's keywords of every core training query, planned as held out. */
export function planQueries(ctx: Ctx, planner: KeywordPlanner): { id: string; self: string; keywords: string[] }[] {
  return ctx.coreQueries.map((q) => ({ id: q.id, self: q.text, keywords: planner.plan(queryInput(q), { asHeldOut: true }).keywords }));
}

/** A query's relevant item ordinals in `itemView` (an empty set for a query without judgements). */
export function relevantOrdinalsOf(
  itemView: KeywordView,
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
): (id: string) => ReadonlySet<number> {
  const rel = relevantOrdinals(itemView, relevant);
  const none = new Set<number>();
  return (id) => rel.get(id) ?? none;
}

/** Distinct generated keywords of a generation (self keywords excluded). */
export function vocabularySize(view: KeywordView): number {
  const seen = new Set<number>();
  const { fwd } = view.data;
  for (let j = 0; j < fwd.length; j++) seen.add(fwd[j]);
  return seen.size;
}

/** The step record of the adopted step a half-round builds on (the last adopted one). */
export function baseStep(done: readonly StepRecord[]): StepRecord {
  const b = bestStep(done);
  if (!b) throw cogrError('INTERNAL', 'a half-round needs an adopted SFT step');
  return b;
}
