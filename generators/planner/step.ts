/**
 * One step of a plan: the choice among the candidates still open and STOP, shared by the
 * greedy, the sampled and the replayed plan (plan.ts). A candidate c adds dS[c] = Σp and
 * dN[c] items outside the matched set U (Σp = S, |U| = nU); its gain is
 *   gain_c = ln G(U ∪ P_c) − ln G(U),  G = (2·Σp + ε) / (|U| + α·E),
 * its score λ·gain_c + θ_c, STOP's θ_stop.
 */

/** The matched set and the open candidates at a step (plan.ts updates it as keywords are chosen). */
export interface StepState {
  /** Σp over U. */
  S: number;
  /** |U|. */
  nU: number;
  /** α·E. */
  aE: number;
  eps: number;
  lambda: number;
  /** θ_stop. */
  stopBias: number;
  /** 1 while the candidate still adds an item and has not been chosen. */
  alive: Uint8Array;
  dS: Float64Array;
  dN: Int32Array;
  /** θ of each candidate. */
  theta: Float64Array;
}

/** The greedy choice: the candidate with the best score when it beats STOP by more than 1e-12, else STOP (−1); G compared without logs. */
export function greedyChoice(s: StepState): number {
  const { S, nU, aE, eps, lambda, alive, dS, dN, theta } = s;
  const G = (2 * S + eps) / (nU + aE);
  let best = s.stopBias;
  let pick = -1;
  for (let c = 0; c < alive.length; c++) {
    if (!alive[c]) continue;
    const Gc = (2 * (S + dS[c]) + eps) / (nU + dN[c] + aE);
    const sc = lambda * Math.log(Gc / G) + theta[c];
    if (sc > best + 1e-12) {
      best = sc;
      pick = c;
    }
  }
  return pick;
}

/**
 * The softmax over the open candidates and STOP at temperature T: each open candidate's
 * exp((score − max)/T) in `ex` (`score` is scratch), STOP's in `eStop`, their sum Z.
 */
export function choiceDistribution(
  s: StepState,
  T: number,
  score: Float64Array,
  ex: Float64Array,
): { eStop: number; Z: number; ex: Float64Array } {
  const { S, nU, aE, eps, lambda, alive, dS, dN, theta } = s;
  const C = alive.length;
  const lnG = Math.log(2 * S + eps) - Math.log(nU + aE);
  let mx = s.stopBias;
  for (let c = 0; c < C; c++) {
    if (!alive[c]) continue;
    score[c] = lambda * (Math.log(2 * (S + dS[c]) + eps) - Math.log(nU + dN[c] + aE) - lnG) + theta[c];
    if (score[c] > mx) mx = score[c];
  }
  const eStop = Math.exp((s.stopBias - mx) / T);
  let Z = eStop;
  for (let c = 0; c < C; c++) if (alive[c]) Z += ex[c] = Math.exp((score[c] - mx) / T);
  return { eStop, Z, ex };
}

/** A draw from the distribution with the uniform number u ∈ [0, 1): STOP (−1) first, then the open candidates in order. */
export function sampledChoice(alive: Uint8Array, dist: { eStop: number; Z: number; ex: Float64Array }, u: number): number {
  const { ex } = dist;
  let pick = -1;
  let r = u * dist.Z - dist.eStop;
  if (r >= 0) {
    for (let c = 0; c < alive.length; c++) {
      if (!alive[c]) continue;
      pick = c;
      r -= ex[c];
      if (r < 0) break;
    }
  }
  return pick;
}
