/**
 * The final refit (run.ts: the step after the rounds): the chosen step made again with every
 * training query, with its two cross-fitted checks on the training queries alone — the refit
 * test (`--refit-test`) and the set guard (`--served-set`).
 */
import { auditItems, type ItemKeywordAudit } from '../drift/keywordAudit.ts';
import { cogrError } from '../../index/core/errors.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import type { Query } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { ALPHA_GRID, setF1 } from '../../generators/planner/training.ts';
import { expectedF1Cut, sortByP } from '../../generators/planner/expectedCut.ts';
import type { Floor } from '../../generators/planner/ranking.ts';
import { queryInput, tuningQueries } from '../../generators/sft.ts';
import { queryOffers, runPlanner } from '../run/context.ts';
import { loadPolicy, savePlanner } from '../run/policies.ts';
import { meanSe, generatorRound, REFIT_STEP, type HeldOutMetrics, type RefitStats, type StepRecord } from '../run/state.ts';
import { evaluateQueries, plannerKeywords } from './evaluate.ts';
import {
  type Ctx,
  relevantOf,
  refitRelevance,
  memoryView,
  commitGeneration,
  decodeItems,
  relevantOrdinalsOf,
  vocabularySize,
  baseStep,
} from './loopContext.ts';
import { queriesKey, tuneAlpha, ALPHA_FOLDS, crossfitCurves, passesZ, bestColumn } from './crossfit.ts';

/**
 * The refit's test (`--refit-test yes`), on the training queries alone: does fitting the
 * relevance model on |dev| more queries help? A cross-fitted learning curve stands in for
 * "core + dev against core", which no query is left to judge: in every inner fold of all
 * training queries, the fold is planned (as held out, against the chosen step's item
 * generation and with its planner parameters) by a model fitted without it and by one
 * fitted without it and without |dev| more queries (a seeded draw); each at its own
 * best α over all folds. The paired per-query gain passes when it is ≥ refitZ standard errors
 * (and ≥ 0 for refitZ ≥ 0). Every training query is judged once, by models that never saw it.
 */
function refitTest(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  training: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
): NonNullable<RefitStats['test']> {
  const ordinalsOf = relevantOrdinalsOf(itemView, relevant);
  const extra = ctx.devQueries.length;
  const more = crossfitCurves(ctx, planner, itemView, training, ordinalsOf, { label: 'refit test (all training queries)' });
  const fewer = crossfitCurves(ctx, planner, itemView, training, ordinalsOf, {
    label: `refit test (${extra} fewer)`,
    less: (fold, rest) => shuffle(rest, createRng(deriveSeed(ctx.config.seed, 'refit-test', queriesKey(fold)))).slice(0, extra),
  });
  const a = bestColumn(more);
  const b = bestColumn(fewer);
  const { mean, se } = meanSe(more.map((row, i) => row[a] - fewer[i][b]));
  // A gain of 0 up to rounding (per-query gains that cancel) is a tie, and a tie passes as a half-round's does.
  const z = ctx.config.refitZ;
  const passed = passesZ(mean, se, z, 'pass');
  ctx.logger.info(
    `refit test: ${extra} more queries in the fit, gain ${mean.toFixed(4)} ± ${se.toFixed(4)} over ${more.length} training queries: ${passed ? 'refit' : 'the chosen step is served as it is'}`,
  );
  return { gain: mean, se, queries: more.length, z, passed };
}

/**
 * The set guard (`--served-set model|auto`), on the training queries alone: for every inner
 * fold of them (alphaFolds; a seeded sample above sft.ts TUNING_QUERIES is scored), each
 * scored query's F1 under an inner relevance model fitted without the fold — planned with
 * the chosen step's keywords as held out (the curve over α of crossfitCurves), and as the
 * model's own expected-F1 cut by p — each at its best α over all folds. Returns the paired
 * mean gain of the model's sets, its standard error, and the model's α (what the run
 * serves when the model's sets are chosen). Every training query is judged by models that
 * never saw it; no held-out judgement is read.
 */
function setGuard(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  training: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
): { gain: number; se: number; queries: number; alpha: number } {
  const ordinalsOf = relevantOrdinalsOf(itemView, relevant);
  const scoring = new Set(tuningQueries(training, ctx.config.seed).map((q) => q.id));
  const G = ALPHA_GRID.length;
  // One pass over the inner folds: each scored query's keyword plans' α curve and, under the
  // same inner model, its own expected-F1 cut's at every α, side by side in one row. The
  // inner models are dropped fold by fold unless the refit reuses them (its cross-fitted α
  // or its test, over the same folds): at a large size each holds up to ~1.25 GB of memos.
  const rows = crossfitCurves(ctx, planner, itemView, training, ordinalsOf, {
    label: 'set guard',
    scoring,
    release: ctx.config.alphaTuning !== 'crossfit' && !ctx.config.refitTest,
    curves: (inner, scored) => {
      const kw = inner.alphaCurves(scored.map(queryInput), ordinalsOf, ALPHA_GRID);
      return scored.map((q, i) => {
        const sorted = sortByP(inner.probabilities(queryInput(q)));
        const rel = ordinalsOf(q.id);
        const row = new Float64Array(2 * G);
        row.set(kw[i]);
        ALPHA_GRID.forEach((a, g) => (row[G + g] = setF1(sorted.order.subarray(0, expectedF1Cut(sorted, a)), rel)));
        return row;
      });
    },
  });
  const keywords = rows.map((r) => r.subarray(0, G));
  const model = rows.map((r) => r.subarray(G));
  const a = bestColumn(keywords);
  const b = bestColumn(model);
  const { mean, se } = meanSe(model.map((row, i) => row[b] - keywords[i][a]));
  return { gain: mean, se, queries: model.length, alpha: ALPHA_GRID[b] };
}

/**
 * The final refit: the step the dev split chose (the last adopted one) made again with
 * every training query, dev ones included — the dev split has done its work once the
 * rounds are decided, and its judgements are training data a search engineer would not
 * leave out of what is served. The relevance model is refitted on all of them with the
 * run's options (the chosen step's planner parameters kept); the items are re-indexed by
 * the chosen step's item policy, its GRPO-trained adoption weights unchanged, with every
 * training query offering its name (so a held-out query can reach a dev query's relevant
 * items with one keyword, as it reaches a core query's); α is tuned on all of them against
 * that index. Nothing is trained and nothing is chosen on held-out queries; the step is
 * not tested (no dev queries remain to test it on) and is what the run serves. The same
 * refit made from the SFT step is measured beside it (`refit.fromSft`): what the run would
 * serve with no round adopted.
 */
export async function refitStep(ctx: Ctx, round: number, done: StepRecord[]): Promise<Omit<StepRecord, 'finishedAt' | 'adopted'>> {
  const t0 = Date.now();
  const base = baseStep(done);
  const sft = done.find((s) => s.phase === 'sft');
  if (!sft) throw cogrError('INTERNAL', 'the refit needs an SFT step');
  const training = [...ctx.coreQueries, ...ctx.devQueries];
  const relevant = relevantOf(ctx, training);
  let model: RelevanceModel | null = null;
  const refitFrom = async (from: StepRecord) => {
    const upTo = done.slice(0, done.indexOf(from) + 1);
    const plannerRound = generatorRound(upTo, 'query');
    const itemPolicyRound = generatorRound(upTo, 'item');
    const chosen = await runPlanner(ctx, plannerRound);
    if (!model) {
      ctx.logger.debug('phase refit: relevance fit');
      ctx.logger.info(`refit: fitting the relevance model on ${training.length} training queries (${ctx.devQueries.length} of them dev)`);
      model = refitRelevance(ctx, chosen, training, relevant);
    }
    const planner = chosen.withRelevance(model);
    const oldItems = await ctx.store.openView('item', from.itemGeneration);
    const queryView = await ctx.store.openView('query', from.queryGeneration);
    planner.attachOpposite(oldItems);
    const policy = await loadPolicy(ctx.policies, 'item', itemPolicyRound);
    policy.attachOpposite(queryView);
    ctx.logger.debug(`phase ${from === base ? REFIT_STEP : `${REFIT_STEP}-from-sft`}: item policy`);
    policy.attachQuerySide(queryOffers({ items: ctx.corpus.items, queries: training, relevant, config: ctx.config }, planner, queryView));
    const entries = decodeItems(ctx, policy, from === base ? REFIT_STEP : `${REFIT_STEP}-from-sft`);
    return { planner, entries, plannerRound, itemPolicyRound };
  };
  const tuned = (planner: KeywordPlanner, itemView: KeywordView) => {
    planner.attachOpposite(itemView);
    // With --refit-alpha keep the planner keeps the α of the step it was made from.
    if (ctx.config.refitAlpha === 'tune') tuneAlpha(ctx, planner, itemView, training, relevant);
    return planner;
  };
  // The set guard's choice (`--served-set`): the relevance model's expected-F1 sets at this α instead of the keyword plans.
  let modelAlpha: number | undefined;
  let guard: NonNullable<RefitStats['served']>['guard'];
  const heldOutAs = (planner: KeywordPlanner, itemView: KeywordView, alpha: number | undefined, floor: Floor = ctx.floor) =>
    evaluateQueries(
      itemView,
      ctx.evalQueries,
      plannerKeywords(planner, deriveSeed(ctx.config.seed, REFIT_STEP), ctx.config),
      ctx.corpus,
      ctx.config.beta,
      {
        planner,
        floor: alpha === undefined ? floor : { ...floor, modelAlpha: alpha },
        cosines: true,
      },
    ).metrics;
  // What is served, and beside it (with --served-set model|auto) the keyword plans' own held-out figures.
  let keywordMetrics: HeldOutMetrics | null = null;
  // `served`: the step's own figures (kept for the record), not the refit-from-SFT counterpart's.
  const heldOut = (planner: KeywordPlanner, itemView: KeywordView, served = true) => {
    // The keyword plans' figures: what is served without the model's sets, and kept beside them for the step's record.
    const kw = modelAlpha === undefined || served ? heldOutAs(planner, itemView, undefined) : null;
    // --cut: beside the cut sets, the keyword plans' whole matched sets.
    if (served && ctx.floor.cut) keywordMetrics = heldOutAs(planner, itemView, undefined, { ...ctx.floor, cut: false });
    else if (served && ctx.config.servedSet !== 'keywords') keywordMetrics = kw;
    return modelAlpha === undefined ? kw! : heldOutAs(planner, itemView, modelAlpha);
  };
  // The record's `served` field (none with --served-set keywords).
  const servedField = (): { served?: RefitStats['served'] } =>
    keywordMetrics === null
      ? {}
      : {
          served: {
            set: modelAlpha !== undefined ? 'model' : ctx.floor.cut ? 'cut' : 'keywords',
            ...(modelAlpha === undefined ? {} : { alpha: modelAlpha }),
            ...(guard ? { guard } : {}),
            keywords: { f1: keywordMetrics.f1, precision: keywordMetrics.precision, recall: keywordMetrics.recall },
          },
        };
  // The chosen step as it is (its planner over its item generation), loaded once for the set guard and the refit test.
  let chosenStep: { planner: KeywordPlanner; view: KeywordView } | null = null;
  const loadChosen = async () =>
    (chosenStep ??= {
      planner: await runPlanner(ctx, generatorRound(done, 'query')),
      view: await ctx.store.openView('item', base.itemGeneration),
    });
  if (ctx.config.servedSet === 'model' || ctx.config.servedSet === 'auto') {
    ctx.logger.debug('phase refit: set guard');
    ctx.logger.info(`set guard: ${training.length} training queries, ${ALPHA_FOLDS} inner folds`);
    const { planner: chosen, view } = await loadChosen();
    const g = setGuard(ctx, chosen, view, training, relevant);
    const z = ctx.config.adoptZ;
    // The model's sets must beat the keyword plans (a tie keeps the keywords, the method's rule) by z standard errors.
    const passes = passesZ(g.gain, g.se, z, 'fail');
    if (ctx.config.servedSet === 'auto') guard = { gain: g.gain, se: g.se, queries: g.queries, z };
    if (ctx.config.servedSet === 'model' || passes) modelAlpha = g.alpha;
    ctx.logger.info(
      `set guard: the model's own sets ${g.gain >= 0 ? '+' : ''}${g.gain.toFixed(4)} ± ${g.se.toFixed(4)} F1 over the keyword plans on ${g.queries} training queries (cross-fitted): ${modelAlpha === undefined ? 'the keyword plans are served' : `the model's expected-F1 sets are served (α ${g.alpha})`}`,
    );
  }
  let test: RefitStats['test'];
  // The step record of what the refit serves, and the no-round counterpart beside it.
  const record = (
    served: {
      itemGeneration: number;
      planner: KeywordPlanner;
      metrics: HeldOutMetrics;
      itemVocabulary: number;
      itemKeywords: ItemKeywordAudit;
    },
    rounds: { itemPolicyRound: number; plannerRound: number },
    fromSft: HeldOutMetrics,
  ): Omit<StepRecord, 'finishedAt' | 'adopted'> => ({
    step: REFIT_STEP,
    round,
    phase: 'refit',
    itemGeneration: served.itemGeneration,
    queryGeneration: base.queryGeneration,
    base: base.step,
    dev: null,
    alpha: served.planner.alpha,
    metrics: served.metrics,
    vocabulary: { item: served.itemVocabulary, query: base.vocabulary.query },
    itemKeywords: served.itemKeywords,
    train: null,
    refit: {
      queries: training.length,
      ...rounds,
      fromSft: { f1: fromSft.f1, precision: fromSft.precision, recall: fromSft.recall },
      ...(test ? { test } : {}),
      ...servedField(),
      seconds: (Date.now() - t0) / 1000,
    },
  });
  if (ctx.config.refitTest) {
    ctx.logger.debug('phase refit: refit test');
    ctx.logger.info(`refit test: ${training.length} training queries, ${ALPHA_FOLDS} inner folds`);
    const { planner: chosen, view } = await loadChosen();
    test = refitTest(ctx, chosen, view, training, relevant);
    if (!test.passed) {
      // The chosen step served as it is: its item generation, its planner (saved at the refit's round).
      chosen.attachOpposite(view);
      await savePlanner(ctx.policies, round, chosen);
      return record(
        {
          itemGeneration: base.itemGeneration,
          planner: chosen,
          metrics: heldOut(chosen, view),
          itemVocabulary: base.vocabulary.item,
          itemKeywords: auditItems(view),
        },
        { itemPolicyRound: generatorRound(done, 'item'), plannerRound: generatorRound(done, 'query') },
        sft.metrics,
      );
    }
  }
  const made = await refitFrom(base);
  const itemGen = await commitGeneration(ctx, 'item', made.entries, { step: REFIT_STEP, round }, base.itemGeneration);
  const itemView = await ctx.store.openView('item', itemGen);
  const planner = tuned(made.planner, itemView);
  await savePlanner(ctx.policies, round, planner);
  ctx.logger.debug('phase refit: held-out evaluation');
  const metrics = heldOut(planner, itemView);
  let fromSft: HeldOutMetrics = metrics;
  if (base !== sft) {
    ctx.logger.debug('phase refit: the same refit from the SFT step');
    const s = await refitFrom(sft);
    const view = memoryView(ctx, s.entries);
    fromSft = heldOut(tuned(s.planner, view), view, false);
  }
  return record(
    { itemGeneration: itemGen, planner, metrics, itemVocabulary: vocabularySize(itemView), itemKeywords: auditItems(itemView) },
    { itemPolicyRound: made.itemPolicyRound, plannerRound: made.plannerRound },
    fromSft,
  );
}
