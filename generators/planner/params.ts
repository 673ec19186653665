/**
 * The planner's own parameters — α, θ_stop and θ per keyword (by match key; absent = 0) —
 * and their Adagrad steps with L2 shrinkage (towards 0; towards the supervised fit for the
 * relevance weights w, which live in the relevance model). Which of them a step moves is
 * the config's `grpoParams`.
 */
import type { PlannerConfig, RelevanceSource } from './config.ts';
import type { PlannerGrad } from './gradients.ts';

export class PlannerParams {
  alpha = 1;
  stopBias = 0;
  /** θ per keyword match key (0 when absent). */
  readonly terms = new Map<string, number>();
  /** Adagrad's sums of squared gradients, per parameter. */
  private readonly g2 = new Map<string, number>();

  constructor(private readonly config: PlannerConfig) {}

  private adagrad(key: string, value: number, grad: number, lr: number): number {
    const gg = grad - this.config.l2 * value;
    const acc = (this.g2.get(key) ?? 0) + gg * gg;
    this.g2.set(key, acc);
    return acc > 0 ? value + (lr * gg) / (Math.sqrt(acc) + 1e-8) : value;
  }

  /** One ascent step along `g`: θ per keyword unless 'global', θ_stop and ln α unless 'terms', and w with 'all'. */
  apply(g: PlannerGrad, lr: number, relevance: RelevanceSource): void {
    const { grpoParams } = this.config;
    if (grpoParams !== 'global') {
      for (const [k, v] of g.terms) {
        const nv = this.adagrad('t\u0001' + k, this.terms.get(k) ?? 0, v, lr);
        if (nv === 0) this.terms.delete(k);
        else this.terms.set(k, nv);
      }
    }
    if (grpoParams !== 'terms') {
      this.stopBias = this.adagrad('stop', this.stopBias, g.stop, lr);
      this.alpha = Math.exp(this.adagrad('lnAlpha', Math.log(this.alpha), g.lnAlpha, lr));
    }
    if (grpoParams === 'all') {
      const w = relevance.getWeights();
      let changed = false;
      for (let j = 0; j < w.length; j++) {
        if (g.w[j] === 0) continue;
        const nv = this.adagrad('w' + j, w[j], g.w[j], lr);
        if (nv !== w[j]) changed = true;
        w[j] = nv;
      }
      if (changed) relevance.setWeights(w);
    }
  }
}
