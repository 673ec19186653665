/**
 * The co-evolution loop (the paper's Algorithm 2) with the embedded generators: the query
 * planner (generators/planner/) and the item policy (generators/policy/).
 *
 *   sft        SFT (generators/sft.ts): the planner's relevance model is fitted on the
 *              training queries, the item policy learns the base generator's M keywords
 *              per item (M chosen on training F1), item generation 0 = its keywords, α is
 *              tuned on that index; query generation 0 = the planner's keywords of the
 *              training queries (planned as held out).
 *   rR-query   the planner against the frozen item generation: α re-tuned on the training
 *              queries, then GRPO (reward: F1 of the matched set, each training query
 *              scored as held out) on its per-keyword terms, stop term, α and relevance
 *              weights; query generation R.
 *   rR-item    GRPO on the item policy against the frozen query generation, with the
 *              incremental counterfactual reward; the query side offers each item the
 *              keywords (by default: the names) of the training queries that judge it
 *              relevant or rank it high, and the reward decides which it keeps; item
 *              generation R.
 * Model selection: a dev split is carved (seeded) from the training queries and never
 * trained on. After every step the dev queries are planned against the step's item
 * generation; a half-round whose dev F1 falls below the best adopted so far is not
 * adopted — its generations and generators stay stored, but the next half-round starts
 * from the last adopted step. The run's result (`best`) is the last adopted step. The
 * held-out queries are evaluated after every step and reach nothing else.
 *
 * Leakage: held-out and dev queries and their judgements reach nothing but their
 * evaluation. Query generations hold the training queries outside the dev split; a
 * training query is always planned and rewarded as if held out (its own {q} and label
 * removed from the postings, its own judgements out of its features).
 *
 * Determinism and resume: every step starts from the generators saved by the adopted step
 * it builds on (reloaded from the database even in an uninterrupted run) and draws its
 * random numbers from a stream derived from (seed, step, ...). Re-running a step after a
 * crash therefore reproduces exactly what it would have produced.
 */
import { availableParallelism } from 'node:os';
import type { CogrDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Corpus, Item, Query, Side } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import { EmbeddedPolicy, type GrpoSample } from '../../generators/policy/model.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { topByP } from '../../generators/planner/queryContext.ts';
import type { PlannerGrpoSample } from '../../generators/planner/training.ts';
import { itemInput, queryInput, runSft } from '../../generators/sft.ts';
import { batchGroups, groupsByKey, grpoGroups } from '../../rewards/grouping.ts';
import { pooledAdvantages } from '../../rewards/grpo.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { scorerFromData, type RewardSample, type ScoredBatch } from '../../rewards/scorer.ts';
import { RewardPool } from '../../workers/pool.ts';
import { trainingShortfalls } from '../datasets/requirements.ts';
import { judgedQueryIds, kFolds, trainEvalSplit } from '../splits.ts';
import { silentProgress, type ProgressSink } from '../progress.ts';
import {
  configDifferences,
  parseRunConfig,
  plannerVocabulary,
  sftItemKeywordGrid,
  type RunConfig,
  type RunConfigInput,
} from '../run/config.ts';
import {
  halfRoundScorerData,
  offerSource,
  ownNames,
  queryOfferings,
  querySideOf,
  runContext,
  runPlanner,
  type QueryOffering,
} from '../run/context.ts';
import { loadPolicy, savePlanner, savePolicy } from '../run/policies.ts';
import { checkRunData, dataFingerprint } from '../run/fingerprint.ts';
import {
  adoptionTest,
  meanSe,
  bestStep,
  generatorRound,
  isHalfRound,
  RunState,
  stepNames,
  REFIT_STEP,
  type DevMetrics,
  type HeldOutMetrics,
  type QuerySetF,
  type RankChoice,
  type RunSplit,
  type SetFloor,
  type StepRecord,
  type TrainStats,
} from '../run/state.ts';
import { chooseRanker, evaluateQueries, plannerKeywords, pooledRankings } from './evaluate.ts';
import { NO_FLOOR, type Floor } from '../../generators/planner/ranking.ts';
import { tuneCutoff } from '../baseline/bm25.ts';
import { setF1Curve } from '../metrics.ts';
import { makeKeywordNormalizer } from '../../index/text/normalize.ts';
import {
  type Ctx,
  memoryView,
  commitGeneration,
  carriedVocabulary,
  decodeItem,
  decodeItems,
  planQueries,
  vocabularySize,
  baseStep,
} from './loopContext.ts';
import { innerModel, queriesKey, tuneAlpha } from './crossfit.ts';
import { refitStep } from './refit.ts';
import { auditItems } from '../drift/keywordAudit.ts';

export interface RunOptions {
  logger?: Logger;
  progress?: ProgressSink;
  signal?: AbortSignal;
  /** Stop after this many steps in this call (tests simulate interruptions). */
  maxSteps?: number;
  /** Called after each committed step. */
  onStep?: (rec: StepRecord) => void;
  /** The collection the split is drawn from when it is not `corpus` (`--new-items`: the whole collection, so the folds are its folds). */
  splitCorpus?: Corpus;
}

export interface RunResult {
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
  /** The adopted step with the best dev F1 (the run's result); null before SFT. */
  best: StepRecord | null;
  /** True when every step of the configured rounds is committed. */
  complete: boolean;
}

/** Minibatch sizes of the GRPO phases (inputs per policy update). */
const QUERY_BATCH = 16;
const ITEM_BATCH = 64;

/** The run's split: held-out queries (a fold or a fraction), and a dev split carved from the training queries. */
export function computeSplit(corpus: Corpus, config: RunConfig): RunSplit {
  const short = trainingShortfalls(corpus);
  if (short.length > 0) throw cogrError('INVALID_ARGUMENT', short.join('; '));
  const ids = judgedQueryIds(corpus);
  let s: { train: string[]; eval: string[] };
  if (config.fold >= 0) {
    if (config.fold >= config.folds)
      throw cogrError('INVALID_ARGUMENT', `fold ${config.fold} is out of range for ${config.folds} folds (0-based)`);
    s = kFolds(ids, config.folds, config.seed)[config.fold];
  } else s = trainEvalSplit(ids, { evalFraction: config.evalFraction, seed: config.seed });
  // A dev split needs a few training queries on both sides of it.
  const dev =
    config.devFraction > 0 && s.train.length >= 4
      ? trainEvalSplit(s.train, { evalFraction: config.devFraction, seed: deriveSeed(config.seed, 'dev') }).eval
      : [];
  return { train: [...s.train], dev: [...dev], eval: [...s.eval] };
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
      throw cogrError(
        'INVALID_ARGUMENT',
        `the database ${db.path} holds a run with another configuration (${diffs.join('; ')}); start over with --fresh, use another --db, or give the same options`,
      );
    }
  } else {
    const store = new KeywordIndexStore(db);
    for (const side of ['item', 'query'] as const) {
      if ((await store.latest(side)) !== null) {
        throw cogrError(
          'INVALID_ARGUMENT',
          `the database ${db.path} already holds ${side} generations that no co-evolution run made; start over with --fresh or use another --db`,
        );
      }
    }
  }
  // The data: a resume on other items, queries, judgements (or the split they give) is
  // refused before anything is written; a run stored before fingerprints gets one now.
  const storedSplit = stored ? await state.split() : undefined;
  const splitFrom = opts.splitCorpus ?? corpus;
  const now = dataFingerprint(corpus, computeSplit(splitFrom, config));
  const storedData = stored ? await state.data() : undefined;
  if (storedData) checkRunData(db.path, config.dataset, storedData, now);
  await state.setConfig(config);
  let split = storedSplit;
  if (!split) {
    split = computeSplit(splitFrom, config);
    await state.setSplit(split);
  }
  if (!storedData) await state.setData(storedSplit ? dataFingerprint(corpus, storedSplit) : now);
  let pool: RewardPool | null = null;
  const ctx: Ctx = {
    ...runContext(db, corpus, config, split, { state, logger }),
    pool: () => (pool ??= RewardPool.create({ size: config.workers ?? availableParallelism(), logger })),
    floor: NO_FLOOR,
    logger,
    progress: opts.progress ?? silentProgress,
    signal: opts.signal,
  };
  try {
    // A writer killed between a commit and its files left a generation unpublished: publish it
    // now (a finished run's resume commits nothing, so its first write would never come).
    await ctx.store.recover();
    // The final refit needs dev queries to add (without them it would refit on the same judgements).
    const names = stepNames(config.rounds, config.refit && ctx.devQueries.length > 0);
    let done = await state.steps();
    // A run extended by more rounds, or asked without the refit, drops its final refit first
    // (its generation is rolled back below). A finished run asked for fewer rounds than it
    // has keeps every step, its refit included: nothing is left to run.
    if (done.length > 0 && done[done.length - 1].phase === 'refit') {
      const roundsLeft = names.filter((n) => n !== REFIT_STEP).length > done.length - 1;
      if (!names.includes(REFIT_STEP) || roundsLeft) {
        logger.info('resume: dropping the final refit (the run goes on past it, or is asked without it)');
        await state.dropLastStep();
        done = done.slice(0, -1);
      }
    }
    const doneRounds = done.filter((s) => isHalfRound(s.phase)).length / 2;
    if (doneRounds > config.rounds) {
      logger.info(`resume: the run already has ${doneRounds} rounds (asked ${config.rounds}); the run is left as it is`);
    }
    await rollBackUncommitted(ctx, done);
    ctx.floor = done.find((s) => s.phase === 'sft')?.floor ?? NO_FLOOR;
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
    return { config, split, steps: done, best: bestStep(done), complete: done.length >= names.length };
  } finally {
    if (pool) await (pool as RewardPool).destroy();
  }
}

/** Delete generations that a killed step committed after the last step record. */
async function rollBackUncommitted(ctx: Ctx, done: StepRecord[]): Promise<void> {
  const keep: Record<Side, number> = { item: -1, query: -1 };
  for (const s of done) {
    keep.item = Math.max(keep.item, s.itemGeneration);
    keep.query = Math.max(keep.query, s.queryGeneration);
  }
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

function parseStep(name: string, rounds: number): { round: number; phase: 'sft' | Side | 'refit' } {
  if (name === 'sft') return { round: 0, phase: 'sft' };
  // The refit's planner is saved one round past the last.
  if (name === REFIT_STEP) return { round: rounds + 1, phase: 'refit' };
  const m = /^r(\d+)-(query|item)$/.exec(name);
  if (!m) throw cogrError('INTERNAL', `unknown step ${name}`);
  return { round: Number(m[1]), phase: m[2] as Side };
}

async function runStep(ctx: Ctx, name: string, done: StepRecord[]): Promise<StepRecord> {
  const { round, phase } = parseStep(name, ctx.config.rounds);
  const t0 = Date.now();
  ctx.logger.info(`step ${name}: start`);
  let rec: Omit<StepRecord, 'finishedAt' | 'adopted'>;
  let leaveOut: PairedScores | undefined;
  if (phase === 'sft') rec = await sftStep(ctx);
  else if (phase === 'query') rec = await queryStep(ctx, round, done);
  else if (phase === 'item') ({ leaveOutPair: leaveOut, ...rec } = await itemStep(ctx, round, done));
  else rec = await refitStep(ctx, round, done);
  const best = bestStep(done);
  // A half-round is adopted when its dev gain over the best adopted step is not negative
  // and not within the noise of the dev queries (adoptionTest).
  let pooled: { candidate: QuerySetF | undefined; best: QuerySetF | undefined } | undefined =
    ctx.config.adoptOn === 'pooled' ? { candidate: rec.trainEval, best: best?.trainEval } : undefined;
  // Cross-fitted: the dev queries beside every core training query scored by a shadow of the
  // half-round that never saw it, one test over all of them.
  const half = isHalfRound(phase) ? phase : null;
  const crossfit = ctx.config.adoptOn === 'crossfit' && half !== null && rec.dev !== null && best?.dev != null;
  if (crossfit && half) {
    const cf = await crossfitScores(ctx, name, half, done);
    pooled = cf;
    const { mean, se } = meanSe(cf.candidate.perQuery.map((f, i) => f - cf.best.perQuery[i]));
    rec.crossfit = { gain: mean, se, queries: cf.candidate.queries, folds: CROSSFIT_FOLDS };
  }
  // Leave out: the dev queries beside every core training query scored as held out, the item
  // half-round's items decoded without the offers of the scored query's group (leaveOutScores).
  if (leaveOut && rec.dev !== null && best?.dev != null) {
    pooled = leaveOut;
    const { mean, se } = meanSe(leaveOut.candidate.perQuery.map((f, i) => f - leaveOut.best.perQuery[i]));
    rec.leaveOut = {
      gain: mean,
      se,
      queries: leaveOut.candidate.queries,
      groups: Math.min(ctx.coreQueries.length, DEFAULTS.run.leaveOutGroups),
    };
  }
  // The cross-fitted and leave-out tests decide on all the queries they pair; pooled also asks that the dev gain alone not fall.
  const onAllPaired = crossfit || rec.leaveOut !== undefined;
  const test = half ? adoptionTest(rec.dev, best?.dev ?? null, ctx.config.adoptZ, pooled, { devAlone: !onAllPaired }) : null;
  const adopted = test === null || test.adopted;
  if (test && rec.dev) rec.devGain = { gain: test.gain, se: test.se, ...(test.queries !== undefined ? { queries: test.queries } : {}) };
  const m = rec.metrics;
  ctx.logger.info(
    `step ${name}: done in ${((Date.now() - t0) / 1000).toFixed(1)}s  dev F1=${rec.dev ? rec.dev.f1.toFixed(4) : '—'}${!half ? '' : adopted ? ' (adopted)' : ' (not adopted)'}  held-out P=${m.precision.toFixed(4)} R=${m.recall.toFixed(4)} F1=${m.f1.toFixed(4)}  vocab item=${rec.vocabulary.item} query=${rec.vocabulary.query}`,
  );
  return { ...rec, adopted, finishedAt: new Date().toISOString() };
}

/** The core training queries' scores of a half-round and of the step it builds on, paired per query (`--adopt-on crossfit` and `leaveout`). */
interface PairedScores {
  candidate: QuerySetF;
  best: QuerySetF;
}

function querySetF(perQuery: number[]): QuerySetF {
  return { queries: perQuery.length, f1: perQuery.reduce((a, b) => a + b, 0) / Math.max(1, perQuery.length), perQuery };
}

/** An item generation made by an item half-round, as `leaveOutScores` decodes it again: the half-round's policy, step name, offerings and frozen query generation. */
interface OfferedItems {
  policy: EmbeddedPolicy;
  step: string;
  offerings: readonly QueryOffering[];
  queryView: KeywordView;
  /** The items' keywords as the step decoded them, before the carrier rule (decoded here when absent). */
  raw?: { id: string; self: string; keywords: string[] }[];
}

/** Groups of the core training queries that `--adopt-on leaveout` leaves out together (seeded by the run's seed, the same for every step; one query each when there are fewer). */
function leaveOutGroups(ctx: Ctx): number[][] {
  const indices = ctx.coreQueries.map((_, i) => i);
  return seededGroups(indices, Math.min(indices.length, DEFAULTS.run.leaveOutGroups), ctx.config.seed, 'leaveout');
}

/** `list` shuffled by a stream of the run's seed named `stream`, dealt round-robin into `k` groups (inner folds, leave-out groups). */
function seededGroups<T>(list: readonly T[], k: number, seed: number, stream: string): T[][] {
  const groups: T[][] = Array.from({ length: k }, () => []);
  shuffle(list, createRng(deriveSeed(seed, stream))).forEach((x, i) => groups[i % k].push(x));
  return groups;
}

/**
 * `--adopt-on leaveout`: every core training query planned and searched as held out (own {q},
 * names and judgements left out) against the item generation decoded as the half-round
 * decoded it, but with the offers of the query's group taken out of what the query side
 * offers the items (querySideOf `without`): the items the group's queries judge relevant or
 * rank high are decoded again by the same policy with the same seeds, the carrier rule
 * applied to the whole generation again. What a query gains is then what the keywords of
 * training queries outside its group brought its items, as for a held-out query (which gets
 * them all: a group is a tenth of the queries), at the cost of decoding a group's items again
 * instead of training a shadow half-round (`--adopt-on crossfit`). The policy's weights still
 * saw the query's rewards: it approximates leaving the query out. With `stored` (the
 * generation the step stored), warns when decoding again does not give it back.
 */
function leaveOutScores(ctx: Ctx, planner: KeywordPlanner, made: OfferedItems, stored?: KeywordView): number[] {
  const { policy, step, offerings, queryView } = made;
  const itemsById = new Map(ctx.corpus.items.map((it) => [it.id, it]));
  const full = querySideOf(offerings, queryView);
  policy.attachQuerySide(full);
  const raw = made.raw ?? ctx.corpus.items.map((it) => decodeItem(ctx, policy, step, it));
  const at = new Map(raw.map((e, i) => [e.id, i]));
  // One memo for the near-equal generations built here (a fresh one per call normalises every keyword again).
  const key = makeKeywordNormalizer({ analyzer: ctx.config.analyzer }).key;
  const norm = makeKeywordNormalizer();
  const whole = memoryView(ctx, carriedVocabulary(ctx, raw, key), norm);
  if (stored) {
    const sig = (v: KeywordView, o: number) => [...v.keywordsOf(o)].sort().join('\u0000');
    let differ = 0;
    for (let o = 0; o < whole.size; o++) {
      const so = stored.ordinalOf(whole.id(o));
      if (so < 0 || sig(stored, so) !== sig(whole, o)) differ++;
    }
    if (differ > 0)
      ctx.logger.warn(`${step}: decoded again for the leave-out test, ${differ} of ${whole.size} items decode otherwise than stored`);
    else ctx.logger.debug(`${step}: decoded again for the leave-out test, all ${whole.size} items as stored`);
  }
  const byQuery = new Map(offerings.map((o) => [o.queryId, o]));
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((k, i) => k === b[i]);
  const out: number[] = new Array<number>(ctx.coreQueries.length).fill(0);
  const unchanged: number[] = [];
  const groups = leaveOutGroups(ctx);
  let redone = 0;
  ctx.progress.start(`${step}: leave-out scores`, ctx.coreQueries.length);
  try {
    for (const group of groups) {
      const members = group.map((qi) => ctx.coreQueries[qi]);
      const touched = new Set<string>();
      for (const q of members) {
        const mine = byQuery.get(q.id);
        if (mine && mine.keywords.length > 0) for (const id of [...mine.judged, ...mine.ranked]) touched.add(id);
      }
      let entries: typeof raw | null = null;
      if (touched.size > 0) {
        policy.attachQuerySide(querySideOf(offerings, queryView, { without: new Set(members.map((q) => q.id)) }));
        for (const id of touched) {
          const i = at.get(id);
          const it = itemsById.get(id);
          if (i === undefined || !it) continue;
          const e = decodeItem(ctx, policy, step, it);
          if (same(e.keywords, raw[i].keywords)) continue;
          entries ??= raw.slice();
          entries[i] = e;
        }
      }
      if (entries === null) unchanged.push(...group);
      else {
        redone++;
        const view = memoryView(ctx, carriedVocabulary(ctx, entries, key), norm);
        const f = trainingAsHeldOut(ctx, planner, view, { queries: members }).perQuery;
        group.forEach((qi, j) => (out[qi] = f[j] ?? 0));
      }
      for (let j = 0; j < group.length; j++) ctx.progress.tick();
    }
    if (unchanged.length > 0) {
      // Groups whose offers change no item's keywords: scored against the whole generation, at once.
      const f = trainingAsHeldOut(ctx, planner, whole, { queries: unchanged.map((qi) => ctx.coreQueries[qi]) }).perQuery;
      unchanged.forEach((qi, j) => (out[qi] = f[j] ?? 0));
    }
    ctx.logger.debug(`${step}: leave-out: ${redone} of ${groups.length} groups' offers changed their items' keywords`);
  } finally {
    policy.attachQuerySide(full);
    ctx.progress.end();
  }
  return out;
}

/** The base step's leave-out scores, per run and step that made its items and query planner round (a later item half-round on the same base scores it again otherwise). */
const baseScoresCache = new WeakMap<Ctx, Map<string, QuerySetF>>();

/**
 * `--adopt-on leaveout`: the base step's scores of the core training queries under `planner`
 * (the query planner of round `plannerRound`): over the base's items as stored when no item
 * half-round made them (SFT, the refit), else left out group by group as `leaveOutScores`
 * scores a candidate, the item half-round that made them rebuilt from the run (its saved
 * policy, and the offerings of the steps before it, as trainItemHalf built them).
 */
async function baseLeaveOutScores(
  ctx: Ctx,
  done: readonly StepRecord[],
  planner: KeywordPlanner,
  plannerRound: number,
): Promise<QuerySetF> {
  const base = baseStep(done);
  const maker = done.findIndex((s) => s.phase === 'item' && s.adopted && s.itemGeneration === base.itemGeneration);
  if (maker < 0) {
    const view = await ctx.store.openView('item', base.itemGeneration, { shared: true });
    return querySetF(trainingAsHeldOut(ctx, planner, view).perQuery);
  }
  const made = done[maker];
  let cache = baseScoresCache.get(ctx);
  if (!cache) baseScoresCache.set(ctx, (cache = new Map()));
  const cacheKey = `${made.step}|${plannerRound}`;
  const hit = cache.get(cacheKey);
  if (hit) return hit;
  const before = done.slice(0, maker);
  const prior = baseStep(before);
  const priorItems = await ctx.store.openView('item', prior.itemGeneration, { shared: true });
  const queryView = await ctx.store.openView('query', made.queryGeneration, { shared: true });
  const offerPlanner = await runPlanner(ctx, generatorRound(before, 'query'));
  offerPlanner.attachOpposite(priorItems);
  const offerings = queryOfferings(offerSource(ctx), offerPlanner, queryView);
  const policy = await loadPolicy(ctx.policies, 'item', made.round);
  policy.attachOpposite(queryView);
  const storedItems = await ctx.store.openView('item', made.itemGeneration, { shared: true });
  const scores = querySetF(leaveOutScores(ctx, planner, { policy, step: made.step, offerings, queryView }, storedItems));
  cache.set(cacheKey, scores);
  return scores;
}

/** Inner folds of the cross-fitted adoption test (`--adopt-on crossfit`). */
const CROSSFIT_FOLDS = DEFAULTS.run.crossfitFolds;

/** The core training queries in `CROSSFIT_FOLDS` inner folds (seeded by the run's seed, the same for every step). */
function innerFolds(ctx: Ctx): Query[][] {
  return seededGroups(ctx.coreQueries, CROSSFIT_FOLDS, ctx.config.seed, 'crossfit');
}

/**
 * The cross-fitted scores of a half-round (`--adopt-on crossfit`): for every inner fold h of
 * the core training queries, the queries of fold h are scored as held-out queries are, by
 * a run that never saw them. The relevance model is refitted on the other folds' queries
 * (their texts and judgements) and its planner takes the base step's parameters with α
 * tuned on those queries (`innerPlanner`); then a shadow of the half-round is trained from
 * the base step on the other folds' queries only (their judgements, their offers, their
 * rewards), and the queries of fold h are planned and searched as held out with the
 * shadow's generators (`candidate`) and with the base step's generations under the inner
 * planner (`best`), paired per query. So neither the relevance fit nor the half-round has
 * seen a scored query, as neither has seen a held-out one. (Scoring them with the run's own
 * planner, fitted on them, favours the base step: their p is already good, and the item
 * rounds' gain on held-out queries did not show.) A shadow's generators and generation
 * stay in memory: nothing of it is stored. Held-out and dev queries play no part.
 */
async function crossfitScores(ctx: Ctx, step: string, phase: Side, done: readonly StepRecord[]): Promise<PairedScores> {
  const base = baseStep(done);
  const folds = innerFolds(ctx);
  const baseItems = await ctx.store.openView('item', base.itemGeneration, { shared: true });
  const queryView = phase === 'item' ? await ctx.store.openView('query', base.queryGeneration, { shared: true }) : null;
  const basePlanner = await runPlanner(ctx, generatorRound(done, 'query'));
  const cand: number[] = [];
  const prev: number[] = [];
  for (let h = 0; h < folds.length; h++) {
    const scored = folds[h];
    if (scored.length === 0) continue;
    const train = folds.flatMap((f, j) => (j === h ? [] : f));
    const shadowStep = `${step}~cf${h}`;
    const inner = innerPlanner(ctx, basePlanner, baseItems, train, scored);
    prev.push(...trainingAsHeldOut(ctx, inner, baseItems, { queries: scored }).perQuery);
    if (queryView === null) {
      // The shadow trains a copy of the inner planner (its α already tuned on `train`).
      const { planner } = await trainQueryHalf(ctx, shadowStep, done, baseItems, train, inner.withRelevance(inner.relevance));
      cand.push(...trainingAsHeldOut(ctx, planner, baseItems, { queries: scored }).perQuery);
    } else {
      const { policy } = await trainItemHalf(ctx, shadowStep, done, baseItems, queryView, train, inner);
      const shadowItems = memoryView(ctx, decodeItems(ctx, policy, shadowStep));
      cand.push(...trainingAsHeldOut(ctx, inner, shadowItems, { queries: scored }).perQuery);
    }
  }
  return { candidate: querySetF(cand), best: querySetF(prev) };
}

/**
 * The planner of inner fold h: the relevance model refitted on `train` (the other folds'
 * core queries) with the run's options, the base planner's configuration and parameters,
 * and α tuned on `train` against `itemView` (in sample, whatever `--alpha-tuning` says: a
 * shadow's pair is compared under one planner).
 */
function innerPlanner(
  ctx: Ctx,
  base: KeywordPlanner,
  itemView: KeywordView,
  train: readonly Query[],
  scored: readonly Query[],
): KeywordPlanner {
  const planner = base.withRelevance(innerModel(ctx, base, train, queriesKey(scored)));
  planner.attachOpposite(itemView);
  tuneAlpha(ctx, planner, itemView, train, ctx.coreRelevant, 'insample');
  return planner;
}

/**
 * Held-out and dev metrics of the planner against an item generation, every ranker's
 * figures included; with `--adopt-on pooled`, the core training queries planned and
 * searched as held out too (`trainEval`, for the adoption test only).
 */
function evaluate(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  step: string,
): { metrics: HeldOutMetrics; dev: DevMetrics | null; trainEval?: QuerySetF } {
  planner.attachOpposite(itemView);
  const kw = plannerKeywords(planner, deriveSeed(ctx.config.seed, step), ctx.config);
  const metrics = evaluateQueries(itemView, ctx.evalQueries, kw, ctx.corpus, ctx.config.beta, {
    planner,
    floor: ctx.floor,
    cosines: true,
  }).metrics;
  if (ctx.devQueries.length === 0) return { metrics, dev: null };
  const { metrics: d, perQuery } = evaluateQueries(itemView, ctx.devQueries, kw, ctx.corpus, ctx.config.beta, {
    planner,
    floor: ctx.floor,
  });
  const dev: DevMetrics = {
    queries: d.queries,
    f1: d.f1,
    precision: d.precision,
    recall: d.recall,
    meanMatched: d.meanMatched,
    meanKeywords: d.meanKeywords,
    perQuery,
    ...(d.rankings ? { rankings: d.rankings } : {}),
  };
  if (ctx.config.adoptOn !== 'pooled') return { metrics, dev };
  const t = trainingAsHeldOut(ctx, planner, itemView);
  return { metrics, dev, trainEval: { queries: t.metrics.queries, f1: t.metrics.f1, perQuery: t.perQuery } };
}

/** The core training queries planned and searched as held out: no {q}, their own names out of their keywords, their own judgements out of their features. */
function trainingAsHeldOut(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  opts: {
    /** Also rank by every ranker (the ranker choice); off: the served sets alone. */
    rankings?: boolean;
    floor?: Floor;
    /** The queries' keywords when already planned (default: planned here, as held out). */
    keywordsOf?: (q: Query) => string[];
    queries?: readonly Query[];
  } = {},
): { metrics: HeldOutMetrics; perQuery: number[] } {
  const { rankings = false, floor = ctx.floor, keywordsOf, queries = ctx.coreQueries } = opts;
  planner.attachOpposite(itemView);
  return evaluateQueries(
    itemView,
    queries,
    keywordsOf ?? ((q) => planner.plan(queryInput(q), { asHeldOut: true }).keywords),
    ctx.corpus,
    ctx.config.beta,
    {
      planner,
      ownNames: (q) => ownNames(planner, q.text),
      floor,
      ...(rankings ? {} : { noRankings: true }),
    },
  );
}

/**
 * The served set's floor (run/state.ts SetFloor), chosen on the core training queries
 * planned and searched as held out: the fallback c with the best mean F1 of their top c by
 * p (ties: the smaller c), then the floor m of the grid with the best mean F1 of their
 * served sets, kept only when its paired gain over no floor passes the adoption test
 * (≥ 0 and ≥ z standard errors; else m = 0).
 */
function chooseFloor(ctx: Ctx, planner: KeywordPlanner, itemView: KeywordView, planned: ReadonlyMap<string, string[]>): SetFloor {
  const backfill = ctx.config.backfill > 0 ? { backfill: ctx.config.backfill } : {};
  if (ctx.coreQueries.length === 0) return { floor: 0, fallback: 0, ...backfill, ...(ctx.config.cut === 'yes' ? { cut: true } : {}) };
  planner.attachOpposite(itemView);
  const heldOutWith = (floor: Floor) => trainingAsHeldOut(ctx, planner, itemView, { floor, keywordsOf: (q) => planned.get(q.id)! });
  const asDev = (x: ReturnType<typeof heldOutWith>): DevMetrics => ({
    queries: x.metrics.queries,
    f1: x.metrics.f1,
    precision: x.metrics.precision,
    recall: x.metrics.recall,
    meanMatched: x.metrics.meanMatched,
    meanKeywords: x.metrics.meanKeywords,
    perQuery: x.perQuery,
  });
  let fallback = 0;
  let fallbackF1 = 0;
  if (ctx.config.floor !== 'none') {
    const maxC = Math.min(DEFAULTS.run.fallbackMaxCutoff, itemView.size);
    const curves = ctx.coreQueries.map((q) => {
      const top = topByP(planner.probabilities(queryInput(q)), maxC).map((e) => itemView.id(e));
      return setF1Curve(top, ctx.coreRelevant.get(q.id) ?? new Set(), maxC, ctx.config.beta);
    });
    ({ cutoff: fallback, f1: fallbackF1 } = tuneCutoff(curves, maxC));
  }
  // --cut: every step's matched sets cut where their expected F1 peaks (ranking.ts matchedCut);
  // 'auto' cuts when the cut sets beat the whole ones by the adoption test (a tie keeps them whole).
  let cut = ctx.config.cut === 'yes';
  let cutTest: SetFloor['cutTest'];
  if (ctx.config.cut === 'auto') {
    const whole = heldOutWith({ floor: 0, fallback });
    const cutSets = heldOutWith({ floor: 0, fallback, cut: true });
    const t = adoptionTest(asDev(cutSets), asDev(whole), ctx.config.adoptZ);
    cut = t.adopted && t.gain > 1e-12;
    cutTest = {
      gain: t.gain,
      se: t.se,
      queries: whole.perQuery.length,
      z: ctx.config.adoptZ,
      f1: { whole: whole.metrics.f1, cut: cutSets.metrics.f1 },
    };
    ctx.logger.info(
      `cut: the matched sets cut where their expected F1 peaks ${t.gain >= 0 ? '+' : ''}${t.gain.toFixed(4)} ± ${t.se.toFixed(4)} F1 over the whole sets on ${whole.perQuery.length} core training queries planned as held out: ${cut ? 'cut' : 'kept whole'}`,
    );
  }
  const cutFields = { ...(cut ? { cut: true } : {}), ...(cutTest ? { cutTest } : {}) };
  if (ctx.config.floor === 'none') return { floor: 0, fallback: 0, ...backfill, ...cutFields };
  // 'fallback' tries no floor; 'auto' the grid.
  const grid = ctx.config.floor === 'auto' ? DEFAULTS.run.floorGrid : [0];
  const tried = grid.map((m) => ({ m, ...heldOutWith({ floor: m, fallback, ...(cut ? { cut: true } : {}) }) }));
  let best = tried[0];
  for (const x of tried) if (x.metrics.f1 > best.metrics.f1 + 1e-12) best = x;
  // As a half-round's adoption: a floor is kept only when its paired gain over none is ≥ 0 and ≥ z standard errors.
  const none = tried.find((x) => x.m === 0) ?? tried[0];
  const floor = ctx.config.floor === 'auto' && best.m > 0 && adoptionTest(asDev(best), asDev(none), ctx.config.adoptZ).adopted ? best.m : 0;
  return { floor, fallback, ...backfill, ...cutFields, trainF1: { floors: tried.map((x) => [x.m, x.metrics.f1]), fallback: fallbackF1 } };
}

/**
 * The served ranker, chosen once at SFT (run/state.ts RankChoice): the run's `rank`, or
 * with 'auto' the ranker with the best nDCG@10 over the dev queries and the core training
 * queries planned and searched as held out (their own judgements out of their features,
 * no {q}, their own names out of their keywords). Held-out queries play no part.
 */
function chooseRank(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  dev: DevMetrics | null,
  planned: ReadonlyMap<string, string[]>,
): RankChoice {
  const asked = ctx.config.rank;
  if (asked !== 'auto') return { served: asked, asked, on: null };
  const train = trainingAsHeldOut(ctx, planner, itemView, { rankings: true, keywordsOf: (q) => planned.get(q.id)! }).metrics;
  const on = pooledRankings([train, ...(dev ? [dev] : [])]);
  return { served: chooseRanker('auto', on), asked, on };
}

async function sftStep(ctx: Ctx): Promise<Omit<StepRecord, 'finishedAt' | 'adopted'>> {
  const { config } = ctx;
  // Only the core training queries (text and judgements) enter SFT.
  const sft = runSft({
    items: ctx.corpus.items,
    trainQueries: ctx.coreQueries,
    relevant: ctx.coreRelevant,
    M: sftItemKeywordGrid(config),
    epochs: config.sftEpochs,
    lr: DEFAULTS.sft.lr,
    seed: deriveSeed(config.seed, 'sft'),
    kMax: config.kMax,
    analyzer: config.analyzer,
    relevance: {
      neighbours: config.relevanceNeighbours,
      judgements: config.relevanceJudgements,
      queryTf: config.relevanceQueryTf,
      rm3: config.relevanceRm3,
      textAnalysis: config.relevanceAnalysis,
      embeddings: config.embeddingsFeatures ? config.embeddingsModel : null,
    },
    planner: {
      topItems: config.plannerTopItems,
      lambda: config.plannerLambda,
      grpoParams: config.plannerParams,
      ...plannerVocabulary(config),
    },
    vocabulary: config.vocabulary === 'shared' ? { minCarriers: config.minCarriers } : null,
    logger: ctx.logger,
    progress: (label) => ctx.logger.info(`sft: ${label}`),
  });
  ctx.relevance = sft.relevance;
  const itemEntries = decodeItems(ctx, sft.itemPolicy, 'sft');
  const itemGen = await commitGeneration(ctx, 'item', itemEntries, { step: 'sft', round: 0 }, null);
  const itemView = await ctx.store.openView('item', itemGen);
  sft.planner.attachOpposite(itemView);
  ctx.logger.debug('phase sft: α tuning (item index)');
  tuneAlpha(ctx, sft.planner, itemView);
  ctx.logger.debug('phase sft: query generation');
  const queryEntries = planQueries(ctx, sft.planner);
  const queryGen = await commitGeneration(ctx, 'query', queryEntries, { step: 'sft', round: 0 }, null);
  const queryView = await ctx.store.openView('query', queryGen);
  await savePolicy(ctx.policies, 0, sft.itemPolicy);
  await savePlanner(ctx.policies, 0, sft.planner, { dataset: config.dataset, ...(config.format ? { format: config.format } : {}) });
  // The query generation's keywords are the core training queries planned as held out: the floor and the ranker choices reuse them.
  const planned = new Map(queryEntries.map((e) => [e.id, e.keywords]));
  ctx.logger.debug('phase sft: floor choice');
  const floor = chooseFloor(ctx, sft.planner, itemView, planned);
  ctx.floor = { floor: floor.floor, fallback: floor.fallback, backfill: floor.backfill ?? 0, ...(floor.cut ? { cut: true } : {}) };
  ctx.logger.debug('phase sft: dev + held-out evaluation');
  const { metrics, dev, trainEval } = evaluate(ctx, sft.planner, itemView, 'sft');
  ctx.logger.debug('phase sft: ranker choice');
  const rank = chooseRank(ctx, sft.planner, itemView, dev, planned);
  return {
    step: 'sft',
    rank,
    floor,
    round: 0,
    phase: 'sft',
    itemGeneration: itemGen,
    queryGeneration: queryGen,
    base: null,
    dev,
    ...(trainEval ? { trainEval } : {}),
    alpha: sft.planner.alpha,
    metrics,
    vocabulary: { item: vocabularySize(itemView), query: vocabularySize(queryView) },
    itemKeywords: auditItems(itemView),
    train: null,
    sft: {
      epochs: config.sftEpochs,
      itemExamples: ctx.corpus.items.length,
      itemLoss: sft.itemReport.epochLoss,
      itemCoverage: sft.itemReport.coverage,
      itemKeywords: sft.M,
      itemKeywordsCurve: sft.mCurve,
      relevance: sft.relevanceFit,
      queryExamples: ctx.coreQueries.length,
    },
  };
}

function emptyStats(epochs: number): TrainStats {
  return {
    epochs,
    samples: 0,
    meanReward: 0,
    lastEpochReward: 0,
    degenerateGroups: 0,
    reasons: { ok: 0, over_budget: 0, invalid_format: 0 },
    seconds: 0,
  };
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
function epochBatches<T extends { id: string }>(
  entities: readonly T[],
  batchSize: number,
  groupOf: Map<string, number> | null,
): { batch: T[]; groups: number[][] }[] {
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

/** One sampled keyword set of a rollout. */
interface Rollout {
  keywords: string[];
  logProb: number;
}

interface PhaseSpec<T extends { id: string }> {
  side: Side;
  step: string;
  epochs: number;
  batchSize: number;
  /** The text semantic grouping compares (query text, item title). */
  groupText: (e: T) => string;
  /** The entities trained on (all of them; an epoch may sample a part). */
  entities: readonly T[];
  entitiesForEpoch: (rng: () => number) => T[];
  /** G samples of one entity at the rollout temperature. */
  sample: (e: T, rng: (s: number) => () => number) => Rollout[];
  /** Layered rewards and reasons of a batch of samples (one reward scorer: rewards/scorer.ts). */
  score: (samples: { id: string; keywords: string[] }[]) => Promise<{ rewards: (number | null)[]; reasons: (string | null)[] }>;
  /** One clipped-surrogate update on the batch's samples with their advantages. */
  update: (samples: { entity: T; rollout: Rollout; advantage: number }[]) => void;
  rewardLabel: (meanReward: number) => string;
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
      const samples = batch.map((e) => p.sample(e, (s) => createRng(deriveSeed(config.seed, p.step, epoch, e.id, s))));
      const scored = await p.score(batch.flatMap((e, i) => samples[i].map((x) => ({ id: e.id, keywords: x.keywords }))));
      const groups = samples.map((g, i) =>
        g.map((_, s) => {
          const k = i * config.groupSize + s;
          const reason = scored.reasons[k];
          const reward = scored.rewards[k];
          if (reason === null || reward === null)
            throw cogrError('INTERNAL', `${p.side} ${batch[i].id}: the scorer does not know this entity`);
          stats.reasons[reason as keyof TrainStats['reasons']]++;
          return reward;
        }),
      );
      const adv = pooledAdvantages(groups, groupIdx, { dropDegenerate: config.dropDegenerateGroups });
      stats.degenerateGroups += adv.degenerate;
      const update: { entity: T; rollout: Rollout; advantage: number }[] = [];
      batch.forEach((e, i) => {
        for (const r of groups[i]) {
          epochSum += r;
          epochN++;
        }
        const a = adv.advantages[i];
        if (a) samples[i].forEach((x, s) => update.push({ entity: e, rollout: x, advantage: a[s] }));
      });
      if (update.length > 0) p.update(update);
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
 * A query half-round's training: the planner of the step it builds on fits α to the frozen
 * item generation, then GRPO fine-tunes it; rewards are the F1 of the matched set, every
 * query scored as held out (no {q}; its own names left out too). `queries` are the
 * queries trained on (the core training queries; a part of them for a cross-fitted shadow),
 * `step` names the random streams.
 */
async function trainQueryHalf(
  ctx: Ctx,
  step: string,
  done: readonly StepRecord[],
  itemView: KeywordView,
  queries: readonly Query[],
  start?: KeywordPlanner,
): Promise<{ planner: KeywordPlanner; stats: TrainStats }> {
  const { config } = ctx;
  const planner = start ?? (await runPlanner(ctx, generatorRound(done, 'query')));
  planner.attachOpposite(itemView);
  ctx.logger.debug(`phase ${step}: α tuning`);
  // A cross-fitted shadow (`start` given) keeps its inner planner's in-sample α tuning.
  tuneAlpha(ctx, planner, itemView, queries, ctx.coreRelevant, start ? 'insample' : ctx.config.alphaTuning);
  const rewards = await halfRoundRewards(ctx, 'query', { itemView, queryView: null }, queries, planner);
  const stats = await trainPhase(ctx, {
    side: 'query',
    step,
    epochs: config.queryEpochs,
    batchSize: QUERY_BATCH,
    groupText: (q) => q.text,
    entities: queries,
    entitiesForEpoch: (rng) => shuffle(queries, rng),
    sample: (q, rng) =>
      Array.from({ length: config.groupSize }, (_, s) => {
        const r = planner.plan(queryInput(q), { temperature: config.rolloutTemperature, rng: rng(s), asHeldOut: true });
        return { keywords: r.keywords, logProb: r.logProb };
      }),
    score: (samples) => rewards.score(samples),
    update: (samples) => {
      const batch: PlannerGrpoSample[] = samples.map((x) => ({
        input: queryInput(x.entity),
        keywords: x.rollout.keywords,
        oldLogProb: x.rollout.logProb,
        advantage: x.advantage,
        asHeldOut: true,
      }));
      planner.grpoUpdate(batch, { clip: config.clip, lr: config.plannerLr, temperature: config.rolloutTemperature });
    },
    rewardLabel: (m) => `mean F1 reward ${m.toFixed(4)}`,
  });
  return { planner, stats };
}

async function queryStep(ctx: Ctx, round: number, done: StepRecord[]): Promise<Omit<StepRecord, 'finishedAt' | 'adopted'>> {
  const step = `r${round}-query`;
  const t0 = Date.now();
  const base = baseStep(done);
  const itemView = await ctx.store.openView('item', base.itemGeneration);
  const { planner, stats } = await trainQueryHalf(ctx, step, done, itemView, ctx.coreQueries);
  ctx.logger.debug(`phase ${step}: query generation`);
  await savePlanner(ctx.policies, round, planner);
  const queryGen = await commitGeneration(ctx, 'query', planQueries(ctx, planner), { step, round }, base.queryGeneration);
  const queryView = await ctx.store.openView('query', queryGen);
  ctx.logger.debug(`phase ${step}: dev + held-out evaluation`);
  const { metrics, dev, trainEval } = evaluate(ctx, planner, itemView, step);
  stats.seconds = (Date.now() - t0) / 1000;
  return {
    step,
    round,
    phase: 'query',
    itemGeneration: base.itemGeneration,
    queryGeneration: queryGen,
    base: base.step,
    dev,
    ...(trainEval ? { trainEval } : {}),
    alpha: planner.alpha,
    metrics,
    vocabulary: { item: base.vocabulary.item, query: vocabularySize(queryView) },
    itemKeywords: auditItems(itemView),
    train: stats,
  };
}

function itemsForEpoch(items: readonly Item[], perEpoch: number, rng: () => number): Item[] {
  const order = shuffle(items, rng);
  return perEpoch > 0 && perEpoch < order.length ? order.slice(0, perEpoch) : order;
}

/**
 * An item half-round's training: GRPO on the item policy of the step it builds on against
 * the frozen query generation, with the incremental counterfactual reward over `queries`
 * (their judgements count, and only they offer items keywords: the core training queries;
 * a part of them for a cross-fitted shadow). `step` names the random streams.
 */
async function trainItemHalf(
  ctx: Ctx,
  step: string,
  done: readonly StepRecord[],
  itemView: KeywordView,
  queryView: KeywordView,
  queries: readonly Query[],
  offerPlanner?: KeywordPlanner,
): Promise<{ policy: EmbeddedPolicy; stats: TrainStats; offerings: QueryOffering[] }> {
  const { config } = ctx;
  const policy = await loadPolicy(ctx.policies, 'item', generatorRound(done, 'item'));
  const reference = config.klCoef > 0 ? await loadPolicy(ctx.policies, 'item', 0) : undefined;
  const planner = offerPlanner ?? (await runPlanner(ctx, generatorRound(done, 'query')));
  planner.attachOpposite(itemView);
  ctx.logger.debug(`phase ${step}: query offers + reward cache`);
  const offerings = queryOfferings(offerSource(ctx, queries), planner, queryView);
  const offers = querySideOf(offerings, queryView);
  for (const p of [policy, reference]) {
    p?.attachOpposite(queryView);
    p?.attachQuerySide(offers);
  }
  const rewards = await halfRoundRewards(ctx, 'item', { itemView, queryView }, queries, planner);
  try {
    const stats = await trainPhase(ctx, {
      side: 'item',
      step,
      epochs: config.itemEpochs,
      batchSize: ITEM_BATCH,
      groupText: (it) => it.title,
      entities: ctx.corpus.items,
      entitiesForEpoch: (rng) => itemsForEpoch(ctx.corpus.items, config.itemsPerEpoch, rng),
      sample: (it, rng) =>
        Array.from({ length: config.groupSize }, (_, s) =>
          policy.sample(itemInput(it), { temperature: config.rolloutTemperature, rng: rng(s) }),
        ),
      score: (samples) => rewards.score(samples),
      update: (samples) => {
        const batch: GrpoSample[] = samples.map((x) => ({
          input: itemInput(x.entity),
          keywords: x.rollout.keywords,
          oldLogProb: x.rollout.logProb,
          advantage: x.advantage,
        }));
        policy.grpoUpdate(batch, {
          clip: config.clip,
          klCoef: config.klCoef,
          reference,
          lr: config.lr,
          temperature: config.rolloutTemperature,
        });
      },
      rewardLabel: (m) => `mean ΔΣF1 reward ${m.toExponential(3)}`,
    });
    return { policy, stats, offerings };
  } finally {
    rewards.close();
  }
}

/**
 * The rewards a half-round trains with: its one scorer (run/context.ts halfRoundScorerData,
 * as `cogr rollouts` and `cogr reward-server --half` build it) over the frozen `views`, with
 * `queries` the queries trained on and `planner` the one whose labels are the queries' own
 * names. The query side scores in this thread; the item side on the worker pool, its data on
 * shared memory with the per-round cache the pool builds in parallel. `close` drops the
 * pool's copy.
 */
export async function halfRoundRewards(
  ctx: Ctx,
  side: Side,
  views: { itemView: KeywordView; queryView: KeywordView | null },
  queries: readonly Query[],
  planner: KeywordPlanner,
): Promise<{ score(samples: readonly RewardSample[]): Promise<ScoredBatch<unknown>>; close(): void }> {
  const train = { queries, relevant: ctx.coreRelevant };
  if (side === 'query') {
    const scorer = scorerFromData(halfRoundScorerData('query', views, train, planner, ctx.config));
    return { score: async (samples) => scorer.score(samples), close: () => {} };
  }
  const { itemView, queryView } = views;
  if (!queryView) throw cogrError('INTERNAL', 'an item half-round is scored against a query generation');
  const relevance = buildRelevance(queryView, itemView, train.relevant, new Set(queries.map((q) => q.id)), { shared: true });
  const pool = ctx.pool();
  const cache = await pool.buildItemCache({ itemView, queryView, relevance }, { signal: ctx.signal });
  const contextId = pool.setContext(halfRoundScorerData('item', views, train, planner, ctx.config, { shared: true, relevance, cache }));
  return { score: (samples) => pool.rewards(samples, { contextId, signal: ctx.signal }), close: () => pool.dropContext(contextId) };
}

async function itemStep(
  ctx: Ctx,
  round: number,
  done: StepRecord[],
): Promise<Omit<StepRecord, 'finishedAt' | 'adopted'> & { leaveOutPair?: PairedScores }> {
  const step = `r${round}-item`;
  const t0 = Date.now();
  const base = baseStep(done);
  const itemView = await ctx.store.openView('item', base.itemGeneration, { shared: true });
  const queryView = await ctx.store.openView('query', base.queryGeneration, { shared: true });
  const { policy, stats, offerings } = await trainItemHalf(ctx, step, done, itemView, queryView, ctx.coreQueries);
  await savePolicy(ctx.policies, round, policy);
  const raw = decodeItems(ctx, policy, step, { raw: true });
  const itemGen = await commitGeneration(ctx, 'item', carriedVocabulary(ctx, raw), { step, round }, base.itemGeneration);
  const newItemView = await ctx.store.openView('item', itemGen);
  const planner = await runPlanner(ctx, generatorRound(done, 'query'));
  ctx.logger.debug(`phase ${step}: dev + held-out evaluation`);
  const { metrics, dev, trainEval } = evaluate(ctx, planner, newItemView, step);
  let leaveOut: PairedScores | undefined;
  if (ctx.config.adoptOn === 'leaveout' && dev !== null && ctx.coreQueries.length > 0) {
    const candidate = leaveOutScores(ctx, planner, { policy, step, offerings, queryView, raw }, newItemView);
    leaveOut = { candidate: querySetF(candidate), best: await baseLeaveOutScores(ctx, done, planner, generatorRound(done, 'query')) };
  }
  stats.seconds = (Date.now() - t0) / 1000;
  return {
    ...(leaveOut ? { leaveOutPair: leaveOut } : {}),
    step,
    round,
    phase: 'item',
    itemGeneration: itemGen,
    queryGeneration: base.queryGeneration,
    base: base.step,
    dev,
    ...(trainEval ? { trainEval } : {}),
    metrics,
    vocabulary: { item: vocabularySize(newItemView), query: base.vocabulary.query },
    itemKeywords: auditItems(newItemView),
    train: stats,
  };
}
