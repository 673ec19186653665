/**
 * The planner's gradients: ∇ log π of a keyword sequence with respect to θ (per keyword),
 * θ_stop, ln α and the relevance weights w, step by step. At a decided step with choice
 * probabilities π(c) = ex[c]/Z and π(STOP) = eStop/Z, the chosen choice's log-probability
 * has ∂/∂score(c) = [c chosen] − π(c), each score λ·gain_c + θ_c; gain_c depends on ln α
 * through α·E and on w through p (∂p_i/∂w = p_i(1 − p_i)·x_i), whose sums over the matched
 * set, over all items and over each candidate's items outside the set `WeightSums` keeps.
 */
import type { StepState } from './step.ts';

/** Gradient accumulator of the planner's parameters. */
export class PlannerGrad {
  stop = 0;
  lnAlpha = 0;
  readonly terms = new Map<string, number>();
  readonly w: Float64Array;
  constructor(dim: number) {
    this.w = new Float64Array(dim);
  }
  /** this += c · other */
  add(other: PlannerGrad, c: number): void {
    this.stop += c * other.stop;
    this.lnAlpha += c * other.lnAlpha;
    for (const [k, v] of other.terms) this.terms.set(k, (this.terms.get(k) ?? 0) + c * v);
    for (let j = 0; j < this.w.length; j++) this.w[j] += c * other.w[j];
  }
}

/**
 * Σ p(1−p)x over the matched set (`gS`), over all items (`gE`) and, per candidate, over its
 * items outside the matched set (`gC`, candidate-major): what the w-gradient of each gain needs.
 */
export class WeightSums {
  readonly gS: Float64Array;
  readonly gE: Float64Array;
  readonly gC: Float64Array;
  constructor(
    private readonly dim: number,
    candidates: number,
    /** View ordinal → relevance-model ordinal (−1: unknown to the model). */
    private readonly map: Int32Array,
    private readonly p: Float64Array,
    /** The query's features, row-major over the model's items. */
    private readonly x: Float64Array,
  ) {
    this.gS = new Float64Array(dim);
    this.gE = new Float64Array(dim);
    this.gC = new Float64Array(candidates * dim);
  }

  /** out[off ..] += sign · p_e(1 − p_e) · x_e */
  add(e: number, out: Float64Array, off: number, sign: number): void {
    const m = this.map[e];
    if (m < 0) return;
    const p = this.p;
    const f = sign * p[e] * (1 - p[e]);
    if (f === 0) return;
    const dim = this.dim;
    const xo = m * dim;
    const x = this.x;
    for (let j = 0; j < dim; j++) out[off + j] += f * x[xo + j];
  }
  /** Item e joined the matched set. */
  matched(e: number): void {
    this.add(e, this.gS, 0, 1);
  }
  /** Candidate c no longer adds item e (it joined the matched set). */
  lose(c: number, e: number): void {
    this.add(e, this.gC, c * this.dim, -1);
  }
}

/**
 * Add coef/T · ∇ log π(pick) of one decided step to `g`: θ_stop, ln α, and (when given)
 * θ of each candidate by its match key (`termKey`) and w (`weights`, with α).
 */
export function addStepGradient(
  g: PlannerGrad,
  s: StepState,
  dist: { eStop: number; Z: number; ex: Float64Array },
  pick: number,
  f: number,
  termKey: ((c: number) => string) | null,
  weights: { sums: WeightSums; alpha: number } | null,
): void {
  const { eStop, Z, ex } = dist;
  const { S, nU, aE, eps, lambda, alive, dS, dN } = s;
  g.stop += f * ((pick < 0 ? 1 : 0) - eStop / Z);
  const dLnG0 = -aE / (nU + aE);
  const C = alive.length;
  for (let c = 0; c < C; c++) {
    if (!alive[c]) continue;
    const wgt = f * ((c === pick ? 1 : 0) - ex[c] / Z);
    if (wgt === 0) continue;
    if (termKey) {
      const key = termKey(c);
      g.terms.set(key, (g.terms.get(key) ?? 0) + wgt);
    }
    g.lnAlpha += wgt * lambda * (-aE / (nU + dN[c] + aE) - dLnG0);
    if (weights && Math.abs(wgt) > 1e-12) {
      const { gS, gE, gC } = weights.sums;
      const alpha = weights.alpha;
      const dim = g.w.length;
      const num = 2 * (S + dS[c]) + eps;
      const den = nU + dN[c] + aE;
      const num0 = 2 * S + eps;
      const den0 = nU + aE;
      const o = c * dim;
      for (let j = 0; j < dim; j++) {
        const dgain = (2 * (gS[j] + gC[o + j])) / num - (alpha * gE[j]) / den - ((2 * gS[j]) / num0 - (alpha * gE[j]) / den0);
        g.w[j] += wgt * lambda * dgain;
      }
    }
  }
}
