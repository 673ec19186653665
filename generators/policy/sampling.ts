/**
 * Sampling and decoding of the embedded policy: Plackett–Luce without replacement with a
 * stop choice. At step t (t keywords chosen so far) the policy picks among the remaining
 * candidates and STOP with
 *   P(c) ∝ exp(s(c)/T),  P(STOP) ∝ exp((b_stop + a_stop·t/10)/T);
 * after K_max keywords it stops with probability 1. The log-probability of a sampled
 * (ordered) keyword sequence is the exact sum of the step log-probabilities.
 *
 * Nucleus sampling (topP < 1) draws each step from the smallest set of the step's
 * choices (remaining candidates and STOP, most probable first) whose probability mass
 * reaches topP, renormalised; the reported log-probability stays that of the untruncated
 * policy at temperature T (what a GRPO ratio compares against).
 */
import type { Rng } from '../../index/core/random.ts';
import { STOP_A, STOP_B, type CandidateSet, type PolicyParams } from './params.ts';

/**
 * The unnormalised weights exp((s(c) − M)/T) of every candidate, their sum, and the
 * shift M (the largest score, stop scores included) that keeps exp() in range.
 */
function choiceWeights(params: PolicyParams, cs: CandidateSet, T: number, kMax: number): { u: Float64Array; rem: number; M: number } {
  const s = params.scores(cs);
  const n = s.length;
  let M = Math.max(params.stopScore(0), params.stopScore(kMax));
  for (let c = 0; c < n; c++) if (s[c] > M) M = s[c];
  const u = new Float64Array(n);
  let rem = 0;
  for (let c = 0; c < n; c++) rem += u[c] = Math.exp((s[c] - M) / T);
  return { u, rem, M };
}

/**
 * log p(seq) at temperature T; when `grad` is set, adds coef · ∇ log p into the gradient
 * buffer. ∇ log p = (1/T) Σ_t [φ(chosen_t) − Σ_j p_t(j) φ(j)], STOP's features being
 * (1, t/10) on the stop weights.
 */
export function sequenceLogProb(
  params: PolicyParams,
  cs: CandidateSet,
  seq: readonly number[],
  T: number,
  kMax: number,
  grad = false,
  coef = 0,
): number {
  const w = choiceWeights(params, cs, T, kMax);
  const { u, M } = w;
  const n = u.length;
  let rem = w.rem;
  const expect = grad ? new Float64Array(n) : null;
  let eStopB = 0;
  let eStopA = 0;
  let logp = 0;
  const steps = Math.min(seq.length + 1, kMax);
  for (let t = 0; t < steps; t++) {
    const us = Math.exp((params.stopScore(t) - M) / T);
    const total = rem + us;
    const isStop = t === seq.length;
    const c = isStop ? -1 : seq[t];
    logp += Math.log((isStop ? us : u[c]) / total);
    if (expect) {
      for (let j = 0; j < n; j++) if (u[j] > 0) expect[j] += u[j] / total;
      eStopB += us / total;
      eStopA += ((us / total) * t) / 10;
      if (isStop) {
        params.addGrad(STOP_B, coef / T);
        params.addGrad(STOP_A, (coef / T) * (t / 10));
      } else params.addCandGrad(cs, c, coef / T);
    }
    if (!isStop) {
      rem -= u[c];
      u[c] = 0;
      rem = 0;
      for (let j = 0; j < n; j++) rem += u[j];
    }
  }
  if (expect) {
    for (let j = 0; j < n; j++) if (expect[j] > 0) params.addCandGrad(cs, j, (-coef / T) * expect[j]);
    params.addGrad(STOP_B, (-coef / T) * eStopB);
    params.addGrad(STOP_A, (-coef / T) * eStopA);
  }
  return logp;
}

/**
 * Greedy decoding of the two decisions each step makes: continue while P(continue) =
 * Σ_remaining P(c) is at least P(STOP) ('mass'), or only while the single best candidate
 * beats STOP ('argmax', the plain argmax over the step's choices, which stops early when
 * the mass is spread over many candidates); then take the best remaining candidate.
 */
export function greedySequence(params: PolicyParams, s: Float64Array, kMax: number, stop: 'mass' | 'argmax'): number[] {
  const order = Array.from(s.keys()).sort((a, b) => s[b] - s[a] || a - b);
  const out: number[] = [];
  const mass = stop === 'mass';
  // Log-sum-exp of the remaining scores, from the tail of the sorted order.
  const lse = new Float64Array(order.length + 1).fill(-Infinity);
  if (mass) {
    for (let t = order.length - 1; t >= 0; t--) {
      const a = s[order[t]];
      const b = lse[t + 1];
      const m = Math.max(a, b);
      lse[t] = m === -Infinity ? -Infinity : m + Math.log(Math.exp(a - m) + Math.exp(b - m));
    }
  }
  for (let t = 0; t < kMax && t < order.length; t++) {
    const cont = mass ? lse[t] : s[order[t]];
    if (cont < params.stopScore(t)) break;
    out.push(order[t]);
  }
  return out;
}

/** The nucleus of one step: the most probable choices (u, with STOP as index n) until their mass reaches topP · total. */
function nucleus(u: Float64Array, us: number, total: number, topP: number): { keep: Uint8Array; mass: number } {
  const n = u.length;
  const order: number[] = [];
  for (let c = 0; c < n; c++) if (u[c] > 0) order.push(c);
  order.push(n);
  const p = (c: number): number => (c === n ? us : u[c]);
  order.sort((a, b) => p(b) - p(a) || a - b);
  const keep = new Uint8Array(n + 1);
  let mass = 0;
  for (const c of order) {
    keep[c] = 1;
    mass += p(c);
    if (mass >= topP * total) break;
  }
  return { keep, mass };
}

/**
 * Sample an ordered keyword sequence (candidate indices) at temperature T > 0 (nucleus
 * `topP`, default 1: none) and its log-probability under the untruncated policy.
 */
export function sampleSequence(
  params: PolicyParams,
  cs: CandidateSet,
  T: number,
  kMax: number,
  rng: Rng,
  topP = 1,
): { seq: number[]; logProb: number } {
  const w = choiceWeights(params, cs, T, kMax);
  const { u, M } = w;
  const n = u.length;
  let rem = w.rem;
  const chosen: number[] = [];
  let logProb = 0;
  for (let t = 0; t < kMax; t++) {
    const us = Math.exp((params.stopScore(t) - M) / T);
    const total = rem + us;
    let pick = -1;
    if (topP < 1) {
      const { keep, mass } = nucleus(u, us, total, topP);
      let r = rng() * mass;
      for (let c = 0; c < n; c++) {
        if (u[c] === 0 || !keep[c]) continue;
        r -= u[c];
        if (r < 0) {
          pick = c;
          break;
        }
      }
      // Rounding left r ≥ 0 with STOP outside the nucleus: the last kept candidate.
      for (let c = n - 1; pick < 0 && !keep[n] && c >= 0; c--) if (u[c] > 0 && keep[c]) pick = c;
    } else {
      let r = rng() * total;
      for (let c = 0; c < n; c++) {
        if (u[c] === 0) continue;
        r -= u[c];
        if (r < 0) {
          pick = c;
          break;
        }
      }
    }
    if (pick < 0) {
      logProb += Math.log(us / total);
      break;
    }
    logProb += Math.log(u[pick] / total);
    chosen.push(pick);
    rem = 0;
    u[pick] = 0;
    for (let c = 0; c < n; c++) rem += u[c];
  }
  return { seq: chosen, logProb };
}
