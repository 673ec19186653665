/**
 * The co-evolution loop (the paper's Algorithm 2) with the embedded policies.
 *
 *   sft        SFT of both policies (Algorithm 1); item generation 0 = the SFT item
 *              policy's keywords; query generation 0 = the SFT query policy's keywords of
 *              the training queries.
 *   rR-query   GRPO on the query policy against the frozen item generation R−1
 *              (reward: F1 of the matched set); query generation R.
 *   rR-item    GRPO on the item policy against the frozen query generation R, with the
 *              incremental counterfactual reward relative to item generation R−1;
 *              item generation R.
 * After every step the held-out queries are evaluated (query policy of the step against
 * the item generation of the step) and the metrics stored with the step record.
 *
 * Leakage: held-out queries and their judgements reach nothing but the evaluation. SFT
 * sees only training queries (their text, for word statistics, and their judgements,
 * for targets); query generations hold training queries only, so the item reward, the
 * query-side opposite vocabulary and the query reward all see training data only.
 *
 * Determinism and resume: every step starts from the policies saved by the previous
 * step (reloaded from the database even in an uninterrupted run) and draws its random
 * numbers from a stream derived from (seed, step, ...). Re-running a step after a crash
 * therefore reproduces exactly what it would have produced.
 */
import { availableParallelism } from 'node:os';
import type { CogrDb } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import { silentLogger, type Logger } from '../../index/log.ts';
import { createRng, deriveSeed, shuffle } from '../../index/random.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { Corpus, Item, Query, Side } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import { EmbeddedPolicy, type GrpoSample } from '../../generators/policy/model.ts';
import { loadPolicy, policyStore, savePolicy } from '../run/policies.ts';
import { itemInput, queryInput, runSft } from '../../generators/sft.ts';
import type { GenerateInput, KeyValueStore } from '../../generators/types.ts';
import { batchGroups, groupsByKey, grpoGroups } from '../../rewards/grouping.ts';
import { pooledAdvantages } from '../../rewards/grpo.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { itemScorerData, queryScorerData } from '../../rewards/scorer.ts';
import { RewardPool } from '../../workers/pool.ts';
import { judgedQueryIds, kFolds, trainEvalSplit } from '../splits.ts';
import { silentProgress, type ProgressSink } from '../progress.ts';
import { configDifferences, parseRunConfig, scorerOptions, type RunConfig, type RunConfigInput } from '../run/config.ts';
import { evaluateHeldOut, policyKeywords } from './evaluate.ts';
import { RunState, stepNames, type HeldOutMetrics, type RunSplit, type StepRecord, type TrainStats } from '../run/state.ts';

export interface RunOptions {
  logger?: Logger;
  progress?: ProgressSink;
  signal?: AbortSignal;
  /** Stop after this many steps in this call (tests simulate interruptions). */
  maxSteps?: number;
  /** Called after each committed step. */
  onStep?: (rec: StepRecord) => void;
}

export interface RunResult {
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
  /** True when every step of the configured rounds is committed. */
  complete: boolean;
}

/** Minibatch sizes of the GRPO phases (inputs per policy update). */
const QUERY_BATCH = 16;
const ITEM_BATCH = 64;

interface Ctx {
  db: CogrDb;
  store: KeywordIndexStore;
  policies: KeyValueStore;
  state: RunState;
  corpus: Corpus;
  config: RunConfig;
  split: RunSplit;
  trainQueries: Query[];
  evalQueries: Query[];
  /** Judgements of the training queries only. */
  trainRelevant: Map<string, Set<string>>;
  pool: () => RewardPool;
  logger: Logger;
  progress: ProgressSink;
  signal?: AbortSignal;
}

export function computeSplit(corpus: Corpus, config: RunConfig): RunSplit {
  const ids = judgedQueryIds(corpus);
  if (ids.length < 2) throw cogrError('INVALID_ARGUMENT', `dataset ${corpus.name} has ${ids.length} judged queries; a run needs at least 2`);
  if (config.fold >= 0) {
    if (config.fold >= config.folds) throw cogrError('INVALID_ARGUMENT', `fold ${config.fold} is out of range for ${config.folds} folds (0-based)`);
    const s = kFolds(ids, config.folds, config.seed)[config.fold];
    return { train: [...s.train], eval: [...s.eval] };
  }
  const s = trainEvalSplit(ids, { evalFraction: config.evalFraction, seed: config.seed });
  return { train: [...s.train], eval: [...s.eval] };
}

function checkAbort(signal?: AbortSignal): void {
  if (signal?.aborted) throw cogrError('ABORTED', 'the run was cancelled');
}

/** Run (or resume) a co-evolution run stored in `db`. */
export async function runCoevolution(db: CogrDb, corpus: Corpus, configInput: RunConfigInput, opts: RunOptions = {}): Promise<RunResult> {
  const config = parseRunConfig(configInput);
  const logger = opts.logger ?? silentLogger;
  const state = new RunState(db);
  const stored = await state.config();
  if (stored) {
    const diffs = configDifferences(stored, config);
    if (diffs.length > 0) {
      throw cogrError('INVALID_ARGUMENT', `the database ${db.path} holds a run with another configuration (${diffs.join('; ')}); start over with --fresh, use another --db, or give the same options`);
    }
  } else {
    const store = new KeywordIndexStore(db);
    for (const side of ['item', 'query'] as const) {
      if ((await store.latest(side)) !== null) {
        throw cogrError('INVALID_ARGUMENT', `the database ${db.path} already holds ${side} generations that no co-evolution run made; start over with --fresh or use another --db`);
      }
    }
  }
  await state.setConfig(config);
  let split = await state.split();
  if (!split) {
    split = computeSplit(corpus, config);
    await state.setSplit(split);
  }
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  const trainQueries = split.train.map((id) => byId.get(id)).filter((q): q is Query => q !== undefined);
  const evalQueries = split.eval.map((id) => byId.get(id)).filter((q): q is Query => q !== undefined);
  if (trainQueries.length !== split.train.length || evalQueries.length !== split.eval.length) {
    throw cogrError('DB_CORRUPT', `the stored split of ${db.path} names queries that dataset ${corpus.name} does not have`);
  }
  const trainRelevant = new Map<string, Set<string>>();
  for (const id of split.train) trainRelevant.set(id, new Set(corpus.relevant.get(id) ?? []));

  let pool: RewardPool | null = null;
  const ctx: Ctx = {
    db,
    store: new KeywordIndexStore(db, { logger }),
    policies: policyStore(db),
    state,
    corpus,
    config,
    split,
    trainQueries,
    evalQueries,
    trainRelevant,
    pool: () => (pool ??= RewardPool.create({ size: config.workers ?? availableParallelism(), logger })),
    logger,
    progress: opts.progress ?? silentProgress,
    signal: opts.signal,
  };
  try {
    const names = stepNames(config.rounds);
    let done = await state.steps();
    await rollBackUncommitted(ctx, done);
    let ran = 0;
    for (const name of names.slice(done.length)) {
      if (opts.maxSteps !== undefined && ran >= opts.maxSteps) break;
      checkAbort(opts.signal);
      const rec = await runStep(ctx, name, done);
      await state.appendStep(rec);
      done = [...done, rec];
      ran++;
      opts.onStep?.(rec);
    }
    return { config, split, steps: done, complete: done.length >= names.length };
  } finally {
    if (pool) await (pool as RewardPool).destroy();
  }
}

/** Delete generations that a killed step committed after the last step record. */
async function rollBackUncommitted(ctx: Ctx, done: StepRecord[]): Promise<void> {
  const last = done.at(-1);
  const keep: Record<Side, number> = { item: last ? last.itemGeneration : -1, query: last ? last.queryGeneration : -1 };
  for (const side of ['item', 'query'] as const) {
    const gens = await ctx.store.listGenerations(side);
    for (const g of [...gens].reverse()) {
      // Only generations made by run steps; imported ones (step 'import') stay.
      if (g.generation > keep[side] && typeof g.meta.step === 'string' && g.meta.step !== 'import') {
        ctx.logger.info(`resume: deleting ${side} generation ${g.generation} left by an interrupted step`);
        await ctx.store.deleteGeneration(side, g.generation);
      }
    }
  }
}

function parseStep(name: string): { round: number; phase: 'sft' | Side } {
  if (name === 'sft') return { round: 0, phase: 'sft' };
  const m = /^r(\d+)-(query|item)$/.exec(name);
  if (!m) throw cogrError('INTERNAL', `unknown step ${name}`);
  return { round: Number(m[1]), phase: m[2] as Side };
}

async function runStep(ctx: Ctx, name: string, done: StepRecord[]): Promise<StepRecord> {
  const { round, phase } = parseStep(name);
  const t0 = Date.now();
  ctx.logger.info(`step ${name}: start`);
  let rec: Omit<StepRecord, 'finishedAt'>;
  if (phase === 'sft') rec = await sftStep(ctx);
  else if (phase === 'query') rec = await queryStep(ctx, round, done.at(-1)!);
  else rec = await itemStep(ctx, round, done.at(-1)!);
  const m = rec.metrics;
  ctx.logger.info(
    `step ${name}: done in ${((Date.now() - t0) / 1000).toFixed(1)}s  held-out P=${m.precision.toFixed(4)} R=${m.recall.toFixed(4)} F1=${m.f1.toFixed(4)}  vocab item=${rec.vocabulary.item} query=${rec.vocabulary.query}`,
  );
  return { ...rec, finishedAt: new Date().toISOString() };
}

// ---------------------------------------------------------------------------------------

async function commitGeneration(
  ctx: Ctx,
  side: Side,
  entries: { id: string; self: string; keywords: string[] }[],
  meta: Record<string, unknown>,
  base: number | null,
): Promise<number> {
  const w = ctx.store.writer(side, { base, mode: 'replace' });
  for (const e of entries) w.set(e.id, e.self, e.keywords);
  return w.commit(meta);
}

/** Decoding options for indexing: greedy, or sampled at the decode temperature and top-p with a per-entity seed. */
export function decodeOptions(config: Pick<RunConfig, 'decode' | 'decodeTemperature' | 'topP'>, seed: number): { temperature?: number; topP?: number; rng?: () => number; greedy?: boolean } {
  return config.decode === 'greedy' ? { greedy: true } : { temperature: config.decodeTemperature, topP: config.topP, rng: createRng(seed) };
}

function decodeItems(ctx: Ctx, policy: EmbeddedPolicy, step: string): { id: string; self: string; keywords: string[] }[] {
  const { seed } = ctx.config;
  ctx.progress.start(`${step}: indexing items`, ctx.corpus.items.length);
  const out = ctx.corpus.items.map((it) => {
    const r = policy.decode(itemInput(it), decodeOptions(ctx.config, deriveSeed(seed, step, 'index', it.id)));
    ctx.progress.tick();
    return { id: it.id, self: it.title, keywords: r.keywords };
  });
  ctx.progress.end();
  return out;
}

function decodeQueries(ctx: Ctx, policy: EmbeddedPolicy, step: string): { id: string; self: string; keywords: string[] }[] {
  const { seed } = ctx.config;
  return ctx.trainQueries.map((q) => ({
    id: q.id,
    self: q.text,
    keywords: policy.decode(queryInput(q), decodeOptions(ctx.config, deriveSeed(seed, step, 'index', q.id))).keywords,
  }));
}

function evaluate(ctx: Ctx, queryPolicy: EmbeddedPolicy, itemView: KeywordView, step: string): HeldOutMetrics {
  queryPolicy.attachOpposite(itemView);
  const kw = policyKeywords(queryPolicy, deriveSeed(ctx.config.seed, step), ctx.config);
  return evaluateHeldOut(itemView, ctx.evalQueries, kw, ctx.corpus, ctx.config.beta);
}

async function sftStep(ctx: Ctx): Promise<Omit<StepRecord, 'finishedAt'>> {
  const { config } = ctx;
  // Only training queries (text and judgements) enter SFT.
  const sft = runSft({
    corpus: { items: ctx.corpus.items, queries: ctx.trainQueries, relevant: ctx.trainRelevant },
    trainQueryIds: ctx.split.train,
    M: config.sftItemKeywords,
    N: config.sftQueryKeywords,
    epochs: config.sftEpochs,
    lr: config.lr * 2,
    seed: deriveSeed(config.seed, 'sft'),
    kMax: config.kMax,
    logger: ctx.logger,
  });
  const itemEntries = decodeItems(ctx, sft.itemPolicy, 'sft');
  const itemGen = await commitGeneration(ctx, 'item', itemEntries, { step: 'sft', round: 0 }, null);
  const itemView = await ctx.store.openView('item', itemGen);
  sft.queryPolicy.attachOpposite(itemView);
  const queryGen = await commitGeneration(ctx, 'query', decodeQueries(ctx, sft.queryPolicy, 'sft'), { step: 'sft', round: 0 }, null);
  const queryView = await ctx.store.openView('query', queryGen);
  await savePolicy(ctx.policies, 0, sft.itemPolicy);
  await savePolicy(ctx.policies, 0, sft.queryPolicy);
  // Evaluate with the policy as saved (reloaded), as every later step does.
  const queryPolicy = await loadPolicy(ctx.policies, 'query', 0);
  const metrics = evaluate(ctx, queryPolicy, itemView, 'sft');
  return {
    step: 'sft',
    round: 0,
    phase: 'sft',
    itemGeneration: itemGen,
    queryGeneration: queryGen,
    metrics,
    vocabulary: { item: vocabularySize(itemView), query: vocabularySize(queryView) },
    train: null,
    sft: {
      epochs: config.sftEpochs,
      itemExamples: ctx.corpus.items.length,
      queryExamples: sft.queryTargets.size,
      itemLoss: sft.itemReport.epochLoss,
      queryLoss: sft.queryReport.epochLoss,
      itemCoverage: sft.itemReport.coverage,
      queryCoverage: sft.queryReport.coverage,
    },
  };
}

/** Distinct generated keywords of a generation (self keywords excluded). */
function vocabularySize(view: KeywordView): number {
  const seen = new Set<number>();
  const { fwd } = view.data;
  for (let j = 0; j < fwd.length; j++) seen.add(fwd[j]);
  return seen.size;
}

function emptyStats(epochs: number): TrainStats {
  return { epochs, samples: 0, meanReward: 0, lastEpochReward: 0, degenerateGroups: 0, reasons: { ok: 0, over_budget: 0, invalid_format: 0 }, seconds: 0 };
}

interface PhaseSpec<T extends { id: string }> {
  side: Side;
  step: string;
  epochs: number;
  batchSize: number;
  policy: EmbeddedPolicy;
  reference: EmbeddedPolicy | undefined;
  inputOf: (e: T) => GenerateInput;
  /** The text semantic grouping compares (query text, item title). */
  groupText: (e: T) => string;
  /** The entities trained on (all of them; an epoch may sample a part). */
  entities: readonly T[];
  entitiesForEpoch: (rng: () => number) => T[];
  /** The registered scorer on the worker pool (rewards/scorer.ts). */
  contextId: number;
  rewardLabel: (meanReward: number) => string;
}

/** The semantic GRPO group of every entity (an index; the entities of one group share it). */
function semanticGroups<T extends { id: string }>(entities: readonly T[], text: (e: T) => string, config: RunConfig): Map<string, number> {
  const groupOf = new Map<string, number>();
  grpoGroups(entities.map(text), 'semantic', { delta: config.groupingDelta, kMin: config.groupingMinSize }).forEach((g, k) => {
    for (const i of g) groupOf.set(entities[i].id, k);
  });
  return groupOf;
}

/**
 * The minibatches of an epoch's (shuffled) entities: `batchSize` entities at a time, each
 * entity its own GRPO group; with semantic groups, whole groups (members brought together
 * where the first of them falls), the GRPO groups given as indices into the batch.
 */
function epochBatches<T extends { id: string }>(entities: readonly T[], batchSize: number, groupOf: Map<string, number> | null): { batch: T[]; groups: number[][] }[] {
  const groups = groupOf ? groupsByKey(entities.map((e) => groupOf.get(e.id)!)) : entities.map((_, i) => [i]);
  return batchGroups(groups, batchSize).map((gs) => {
    const batch: T[] = [];
    const local: number[][] = [];
    for (const g of gs) {
      local.push(g.map((_, j) => batch.length + j));
      for (const i of g) batch.push(entities[i]);
    }
    return { batch, groups: local };
  });
}

/**
 * GRPO epochs of one half-round: per minibatch, G samples per entity at the rollout
 * temperature (seeded per epoch, entity and sample), layered rewards (format → budget →
 * result), group-normalised advantages (degenerate groups dropped or zeroed; with
 * semantic grouping, over all samples of a group's entities), one clipped-surrogate update.
 */
async function trainPhase<T extends { id: string }>(ctx: Ctx, p: PhaseSpec<T>): Promise<TrainStats> {
  const { config } = ctx;
  const stats = emptyStats(p.epochs);
  const groupOf = config.grouping === 'semantic' ? semanticGroups(p.entities, p.groupText, config) : null;
  let rewardSum = 0;
  for (let epoch = 0; epoch < p.epochs; epoch++) {
    const entities = p.entitiesForEpoch(createRng(deriveSeed(config.seed, p.step, 'epoch', epoch)));
    ctx.progress.start(`${p.step} epoch ${epoch + 1}/${p.epochs}`, entities.length);
    let epochSum = 0;
    let epochN = 0;
    for (const { batch, groups: groupIdx } of epochBatches(entities, p.batchSize, groupOf)) {
      checkAbort(ctx.signal);
      const samples = batch.map((e) =>
        Array.from({ length: config.groupSize }, (_, s) =>
          p.policy.sample(p.inputOf(e), { temperature: config.rolloutTemperature, rng: createRng(deriveSeed(config.seed, p.step, epoch, e.id, s)) }),
        ),
      );
      // Layered rewards (format → budget → result) of every sample, scored on the pool.
      const scored = await ctx.pool().rewards(
        batch.flatMap((e, i) => samples[i].map((x) => ({ id: e.id, keywords: x.keywords }))),
        { contextId: p.contextId, signal: ctx.signal },
      );
      const groups = samples.map((g, i) =>
        g.map((_, s) => {
          const k = i * config.groupSize + s;
          const reason = scored.reasons[k];
          const reward = scored.rewards[k];
          if (reason === null || reward === null) throw cogrError('INTERNAL', `${p.side} ${batch[i].id}: the scorer does not know this entity`);
          stats.reasons[reason]++;
          return reward;
        }),
      );
      const adv = pooledAdvantages(groups, groupIdx, { dropDegenerate: config.dropDegenerateGroups });
      stats.degenerateGroups += adv.degenerate;
      const grpo: GrpoSample[] = [];
      batch.forEach((e, i) => {
        for (const r of groups[i]) {
          epochSum += r;
          epochN++;
        }
        const a = adv.advantages[i];
        if (a) samples[i].forEach((x, s) => grpo.push({ input: p.inputOf(e), keywords: x.keywords, oldLogProb: x.logProb, advantage: a[s] }));
      });
      if (grpo.length > 0) {
        p.policy.grpoUpdate(grpo, { clip: config.clip, klCoef: config.klCoef, reference: p.reference, lr: config.lr, temperature: config.rolloutTemperature });
      }
      ctx.progress.tick(batch.length);
    }
    stats.samples += epochN;
    rewardSum += epochSum;
    stats.lastEpochReward = epochN ? epochSum / epochN : 0;
    ctx.progress.end(p.rewardLabel(stats.lastEpochReward));
  }
  stats.meanReward = stats.samples ? rewardSum / stats.samples : 0;
  return stats;
}

/**
 * The policy a round trains (the one saved by round − 1, reloaded so that a resumed run
 * starts from exactly the same state) and, with a KL term, the SFT reference; both see
 * the frozen opposite generation.
 */
async function policiesForRound(
  ctx: Ctx,
  side: Side,
  round: number,
  opposite: KeywordView,
): Promise<{ policy: EmbeddedPolicy; reference: EmbeddedPolicy | undefined }> {
  const policy = await loadPolicy(ctx.policies, side, round - 1);
  const reference = ctx.config.klCoef > 0 ? await loadPolicy(ctx.policies, side, 0) : undefined;
  policy.attachOpposite(opposite);
  reference?.attachOpposite(opposite);
  return { policy, reference };
}

async function queryStep(ctx: Ctx, round: number, prev: StepRecord): Promise<Omit<StepRecord, 'finishedAt'>> {
  const { config } = ctx;
  const step = `r${round}-query`;
  const t0 = Date.now();
  const itemView = await ctx.store.openView('item', prev.itemGeneration, { shared: true });
  const { policy, reference } = await policiesForRound(ctx, 'query', round, itemView);
  const pool = ctx.pool();
  const contextId = pool.setContext(
    queryScorerData(itemView, { relevant: ctx.trainRelevant, queryText: new Map(ctx.trainQueries.map((q) => [q.id, q.text])) }, scorerOptions(config), { shared: true }),
  );
  const stats = await trainPhase(ctx, {
    side: 'query',
    step,
    epochs: config.queryEpochs,
    batchSize: QUERY_BATCH,
    policy,
    reference,
    inputOf: queryInput,
    groupText: (q) => q.text,
    entities: ctx.trainQueries,
    entitiesForEpoch: (rng) => shuffle(ctx.trainQueries, rng),
    contextId,
    rewardLabel: (m) => `mean F1 reward ${m.toFixed(4)}`,
  });
  pool.dropContext(contextId);
  // The trained policy decodes directly: its saved JSON holds exactly these weights
  // (doubles round-trip through JSON), so reloading would only redo candidate extraction.
  await savePolicy(ctx.policies, round, policy);
  const queryGen = await commitGeneration(ctx, 'query', decodeQueries(ctx, policy, step), { step, round }, prev.queryGeneration);
  const queryView = await ctx.store.openView('query', queryGen);
  const metrics = evaluate(ctx, policy, itemView, step);
  stats.seconds = (Date.now() - t0) / 1000;
  return {
    step,
    round,
    phase: 'query',
    itemGeneration: prev.itemGeneration,
    queryGeneration: queryGen,
    metrics,
    vocabulary: { item: prev.vocabulary.item, query: vocabularySize(queryView) },
    train: stats,
  };
}

function itemsForEpoch(items: readonly Item[], perEpoch: number, rng: () => number): Item[] {
  const order = shuffle(items, rng);
  return perEpoch > 0 && perEpoch < order.length ? order.slice(0, perEpoch) : order;
}

async function itemStep(ctx: Ctx, round: number, prev: StepRecord): Promise<Omit<StepRecord, 'finishedAt'>> {
  const { config } = ctx;
  const step = `r${round}-item`;
  const t0 = Date.now();
  const itemView = await ctx.store.openView('item', prev.itemGeneration, { shared: true });
  const queryView = await ctx.store.openView('query', prev.queryGeneration, { shared: true });
  const { policy, reference } = await policiesForRound(ctx, 'item', round, queryView);
  const judgements = { relevant: ctx.trainRelevant, counted: new Set(ctx.split.train) };
  const relevance = buildRelevance(queryView, itemView, judgements.relevant, judgements.counted, { shared: true });
  const pool = ctx.pool();
  const cache = await pool.buildItemCache({ itemView, queryView, relevance }, { signal: ctx.signal });
  const contextId = pool.setContext(itemScorerData(itemView, queryView, judgements, scorerOptions(config), { shared: true, relevance, cache }));
  const stats = await trainPhase(ctx, {
    side: 'item',
    step,
    epochs: config.itemEpochs,
    batchSize: ITEM_BATCH,
    policy,
    reference,
    inputOf: itemInput,
    groupText: (it) => it.title,
    entities: ctx.corpus.items,
    entitiesForEpoch: (rng) => itemsForEpoch(ctx.corpus.items, config.itemsPerEpoch, rng),
    contextId,
    rewardLabel: (m) => `mean ΔΣF1 reward ${m.toExponential(3)}`,
  });
  pool.dropContext(contextId);
  await savePolicy(ctx.policies, round, policy);
  const itemGen = await commitGeneration(ctx, 'item', decodeItems(ctx, policy, step), { step, round }, prev.itemGeneration);
  const newItemView = await ctx.store.openView('item', itemGen);
  const queryPolicy = await loadPolicy(ctx.policies, 'query', round);
  const metrics = evaluate(ctx, queryPolicy, newItemView, step);
  stats.seconds = (Date.now() - t0) / 1000;
  return {
    step,
    round,
    phase: 'item',
    itemGeneration: itemGen,
    queryGeneration: prev.queryGeneration,
    metrics,
    vocabulary: { item: vocabularySize(newItemView), query: prev.vocabulary.query },
    train: stats,
  };
}
