/**
 * Cross-fitting over the training queries (run.ts, refit.ts): the inner folds
 * (`alphaFolds`), the relevance models fitted without each fold (cached per run context),
 * the out-of-fold α curves they give, α tuning in sample or cross-fitted, and the rule the
 * cross-fitted tests share (`passesZ`).
 */
import { DEFAULTS } from '../../index/core/defaults.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import type { Query } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';
import { ALPHA_GRID } from '../../generators/planner/training.ts';
import { queryInput, tuningQueries } from '../../generators/sft.ts';
import { type Ctx, relevantOf, refitRelevance, relevantOrdinalsOf } from './loopContext.ts';

/**
 * Relevance models fitted without some training queries, and their fitted weights, per run
 * context, keyed by the queries left out: the inner folds of the cross-fitted adoption
 * test and of the cross-fitted α. The same for every step (a shadow's GRPO with
 * `--planner-params all` moves the weights; each use starts again from the fit).
 */
const INNER_RELEVANCE = new WeakMap<Ctx, Map<string, { model: RelevanceModel; fitted: Float64Array }>>();

/** The relevance model of `base` refitted on `train`, cached under `key` (the queries left out). */
export function innerModel(ctx: Ctx, base: KeywordPlanner, train: readonly Query[], key: string): RelevanceModel {
  let models = INNER_RELEVANCE.get(ctx);
  if (!models) INNER_RELEVANCE.set(ctx, (models = new Map()));
  let inner = models.get(key);
  if (!inner) {
    ctx.logger.debug(`inner relevance model on ${train.length} training queries`);
    const model = refitRelevance(ctx, base, train, relevantOf(ctx, train));
    inner = { model, fitted: model.getWeights() };
    models.set(key, inner);
  } else inner.model.setWeights(inner.fitted);
  return inner.model;
}

/** A key naming a set of queries (their ids, sorted). */
export function queriesKey(queries: readonly Query[]): string {
  return queries
    .map((q) => q.id)
    .sort()
    .join('\u0000');
}

/** α tuned on the core training queries (planned as held out; a seeded sample above sft.ts TUNING_QUERIES) against the attached item generation. */
export function tuneAlpha(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  queries: readonly Query[] = ctx.coreQueries,
  relevant: ReadonlyMap<string, ReadonlySet<string>> = ctx.coreRelevant,
  how: 'insample' | 'crossfit' = ctx.config.alphaTuning,
): void {
  const ordinalsOf = relevantOrdinalsOf(itemView, relevant);
  const tuning = tuningQueries(queries, ctx.config.seed);
  if (how === 'insample' || tuning.length < ALPHA_FOLDS) {
    planner.tuneAlpha(tuning.map(queryInput), ordinalsOf);
    return;
  }
  planner.alpha = crossfitAlpha(ctx, planner, itemView, queries, tuning, ordinalsOf);
}

/** Inner folds of the cross-fitted α (`--alpha-tuning crossfit`). */
export const ALPHA_FOLDS = DEFAULTS.run.alphaFolds;

/** The inner folds of the cross-fitted α: `queries` shuffled by the run's seed, dealt round-robin into ALPHA_FOLDS folds. */
export function alphaFolds<Q>(queries: readonly Q[], seed: number): Q[][] {
  const order = shuffle(queries, createRng(deriveSeed(seed, 'alpha-folds')));
  const folds: Q[][] = Array.from({ length: ALPHA_FOLDS }, () => []);
  order.forEach((q, i) => folds[i % ALPHA_FOLDS].push(q));
  return folds;
}

/**
 * α cross-fitted (`--alpha-tuning crossfit`): `queries` fall in ALPHA_FOLDS inner folds
 * (alphaFolds); each fold's tuning queries are planned as held out by a copy of `planner`
 * whose relevance model was refitted without that fold (its configuration, parameters
 * and item index kept), and the grid's α with the highest mean F1 over every tuning query
 * wins (ties: the smaller). The in-sample tuning plans queries with a model fitted on their
 * own judgements; on a few dozen queries that can carry α, and the sets, far from what
 * serves unseen queries. Costs ALPHA_FOLDS model fits per set of queries (cached per run).
 */
function crossfitAlpha(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  queries: readonly Query[],
  tuning: readonly Query[],
  ordinalsOf: (id: string) => ReadonlySet<number>,
): number {
  const rows = crossfitCurves(ctx, planner, itemView, queries, ordinalsOf, {
    scoring: new Set(tuning.map((q) => q.id)),
    label: 'α cross-fitted',
  });
  const best = bestColumn(rows);
  ctx.logger.debug(`α cross-fitted over ${rows.length} queries in ${ALPHA_FOLDS} folds: ${ALPHA_GRID[best]}`);
  return ALPHA_GRID[best];
}

/**
 * Out-of-fold α curves: for every inner fold of `queries` (alphaFolds), the F1 at every α
 * of the grid of its queries (those in `scoring`, default all), planned as held out by
 * `planner` over a relevance model fitted without the fold — and without `less(fold)` too,
 * when given (a smaller fit, for the refit test). `curves`: what a fold's queries score
 * under that inner planner (default: their keyword plans' α curves). Rows in fold order.
 * `release`: drop each inner model from the run's cache once its fold is scored (so one is
 * alive at a time; a later use fits it again). `label`: log a line per fold under it (the
 * fit's and the scoring's counts and times: at a large size each fold takes minutes).
 */
export function crossfitCurves(
  ctx: Ctx,
  planner: KeywordPlanner,
  itemView: KeywordView,
  queries: readonly Query[],
  ordinalsOf: (id: string) => ReadonlySet<number>,
  opts: {
    scoring?: ReadonlySet<string>;
    less?: (fold: readonly Query[], rest: readonly Query[]) => readonly Query[];
    curves?: (inner: KeywordPlanner, scored: readonly Query[]) => Float64Array[];
    release?: boolean;
    label?: string;
  } = {},
): Float64Array[] {
  const rows: Float64Array[] = [];
  const folds = alphaFolds(queries, ctx.config.seed);
  for (const [i, fold] of folds.entries()) {
    const scored = opts.scoring ? fold.filter((q) => opts.scoring!.has(q.id)) : fold;
    if (scored.length === 0) continue;
    const inFold = new Set(fold.map((q) => q.id));
    let train = queries.filter((q) => !inFold.has(q.id));
    let left: readonly Query[] = fold;
    if (opts.less) {
      const drop = new Set(opts.less(fold, train).map((q) => q.id));
      train = train.filter((q) => !drop.has(q.id));
      left = [...fold, ...queries.filter((q) => drop.has(q.id))];
    }
    const key = queriesKey(left);
    const t0 = Date.now();
    const inner = planner.withRelevance(innerModel(ctx, planner, train, key));
    inner.attachOpposite(itemView);
    const t1 = Date.now();
    rows.push(...(opts.curves ? opts.curves(inner, scored) : inner.alphaCurves(scored.map(queryInput), ordinalsOf, ALPHA_GRID)));
    if (opts.release) INNER_RELEVANCE.get(ctx)?.delete(key);
    if (opts.label) {
      const t2 = Date.now();
      ctx.logger.info(
        `${opts.label}: inner fold ${i + 1}/${folds.length}: relevance model on ${train.length} queries ready in ${seconds(t1 - t0)}, ` +
          `${scored.length} queries scored in ${seconds(t2 - t1)} (${((1000 * scored.length) / Math.max(1, t2 - t1)).toFixed(1)}/s)`,
      );
    }
  }
  return rows;
}

/**
 * The cross-fitted tests' rule (the refit test, the set guard): a mean paired gain passes
 * when it is ≥ z standard errors and, for z ≥ 0, not below 0; a gain of 0 up to rounding
 * (1e-12) is a tie, which passes or fails as asked. (The half-rounds' adoptionTest keeps its
 * own exact comparison.)
 */
export function passesZ(mean: number, se: number, z: number, tie: 'pass' | 'fail'): boolean {
  const sign = tie === 'pass' ? mean >= -1e-12 : mean > 1e-12;
  return (z < 0 || sign) && mean >= z * se - 1e-12;
}

/** The column of `rows` with the highest sum (ties: the earlier). */
export function bestColumn(rows: readonly Float64Array[]): number {
  const sums = new Float64Array(ALPHA_GRID.length);
  for (const row of rows) for (let g = 0; g < sums.length; g++) sums[g] += row[g];
  let best = 0;
  for (let g = 1; g < sums.length; g++) if (sums[g] > sums[best] + 1e-12 * rows.length) best = g;
  return best;
}

/** A duration in ms as seconds, one decimal. */
function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
