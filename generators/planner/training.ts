/**
 * Training of the planner beyond the relevance model's supervised fit: α tuned on
 * training queries planned as held out (`tuneAlpha`), and GRPO's clipped surrogate
 * (`grpoUpdate`) with Adagrad steps on the parameters the config lets it move (params.ts).
 */
import type { GenerateInput } from '../types.ts';
import { PlannerGrad } from './gradients.ts';
import { runPlan, type PlanParts } from './plan.ts';

/** α values tried when tuning: log-spaced from 1/8 to 4. */
export const ALPHA_GRID: readonly number[] = [0.125, 0.177, 0.25, 0.354, 0.5, 0.707, 1, 1.41, 2, 2.83, 4];

/** F1 of a matched set against relevant ordinals. */
export function setF1(matched: ArrayLike<number>, relevant: ReadonlySet<number>): number {
  let tp = 0;
  for (let i = 0; i < matched.length; i++) if (relevant.has(matched[i])) tp++;
  return tp === 0 ? 0 : (2 * tp) / (matched.length + relevant.size);
}

export interface PlannerGrpoSample {
  input: GenerateInput;
  keywords: string[];
  oldLogProb: number;
  advantage: number;
  asHeldOut?: boolean;
}

/**
 * Tune α on training queries planned as held out: the value of `grid` with the highest
 * mean F1 of the matched sets (ties: the earlier value).
 */
export function tuneAlpha(
  planner: PlanParts,
  queries: readonly GenerateInput[],
  relevantOf: (id: string) => ReadonlySet<number>,
  grid: readonly number[] = ALPHA_GRID,
): { alpha: number; f1: number; curve: [number, number][] } {
  const rows = alphaCurves(planner, queries, relevantOf, grid);
  // Each α's sum adds the queries in the same order, so the curve is that of α by α.
  const sums = new Float64Array(grid.length);
  for (const row of rows) for (let g = 0; g < grid.length; g++) sums[g] += row[g];
  const curve: [number, number][] = [];
  let best = { alpha: planner.params.alpha, f1: -1 };
  grid.forEach((a, g) => {
    const f1 = queries.length ? sums[g] / queries.length : 0;
    curve.push([a, f1]);
    if (f1 > best.f1 + 1e-12) best = { alpha: a, f1 };
  });
  planner.params.alpha = best.alpha;
  return { ...best, curve };
}

/**
 * Each query's F1 at every α of `grid`, planned as held out (one row per query, one column
 * per α); the planner's α is left as it was. Query by query, every α of the grid: a
 * query's features, p and candidates are built once, not once per α when the caches
 * cannot hold every query.
 */
export function alphaCurves(
  planner: PlanParts,
  queries: readonly GenerateInput[],
  relevantOf: (id: string) => ReadonlySet<number>,
  grid: readonly number[] = ALPHA_GRID,
): Float64Array[] {
  const { params } = planner;
  const before = params.alpha;
  planner.contexts.prefetchKeywordVectors(queries);
  const rows = queries.map((q) => {
    const rel = relevantOf(q.id);
    const row = new Float64Array(grid.length);
    for (let g = 0; g < grid.length; g++) {
      params.alpha = grid[g];
      row[g] = setF1(runPlan(planner, q, { asHeldOut: true }).matched, rel);
    }
    return row;
  });
  params.alpha = before;
  return rows;
}

/**
 * One GRPO step: ascent on mean_i min(ρ_i·A_i, clip(ρ_i, 1 − ε, 1 + ε)·A_i), ρ_i =
 * exp(log π_new − oldLogProb), with Adagrad on θ (per keyword) and, with grpoParams
 * 'all', θ_stop, ln α and the relevance weights w.
 */
export function grpoUpdate(
  planner: PlanParts,
  batch: readonly PlannerGrpoSample[],
  opts: { clip?: number; lr?: number; temperature?: number } = {},
): { objective: number; clipFraction: number; skipped: number } {
  const eps = opts.clip ?? 0.2;
  const lr = opts.lr ?? 0.05;
  const T = opts.temperature ?? 1;
  const dim = planner.relevance.dim;
  const g = new PlannerGrad(dim);
  let obj = 0;
  let clipped = 0;
  let skipped = 0;
  const B = Math.max(1, batch.length);
  for (const s of batch) {
    if (!Number.isFinite(s.oldLogProb)) {
      skipped++;
      continue;
    }
    // One replay gives both log π_new and its gradient (with coefficient 1), scaled below.
    const one = new PlannerGrad(dim);
    const l = runPlan(planner, s.input, {
      forced: s.keywords,
      temperature: T,
      asHeldOut: s.asHeldOut ?? false,
      grad: one,
      coef: 1,
    }).logProb;
    if (!Number.isFinite(l)) {
      skipped++;
      continue;
    }
    const ratio = Math.exp(l - s.oldLogProb);
    const A = s.advantage;
    const cr = Math.min(Math.max(ratio, 1 - eps), 1 + eps);
    obj += Math.min(ratio * A, cr * A);
    if (A * cr < A * ratio) {
      clipped++;
      continue;
    }
    if (A === 0) continue;
    g.add(one, (A * ratio) / B);
  }
  planner.params.apply(g, lr, planner.relevance);
  return { objective: obj / B, clipFraction: clipped / B, skipped };
}
