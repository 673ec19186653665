/**
 * One plan of one query: U starts with the items of {q} and the label (unless planned as
 * held out), then keyword by keyword the step's choice (step.ts) — greedy, sampled at a
 * temperature, or a given sequence replayed — adds a candidate's postings to U, until STOP
 * or K keywords. A sampled or replayed plan has its exact log-probability; a replay may
 * also add coef·∇ log π to a gradient (gradients.ts).
 */
import { normalizeKeyword } from '../../index/text/normalize.ts';
import type { Rng } from '../../index/core/random.ts';
import type { GenerateInput } from '../types.ts';
import type { PlannerConfig, RelevanceSource } from './config.ts';
import { addStepGradient, WeightSums, type PlannerGrad } from './gradients.ts';
import type { PlannerParams } from './params.ts';
import type { PlannerContexts } from './queryContext.ts';
import { choiceDistribution, greedyChoice, sampledChoice, type StepState } from './step.ts';

export interface PlanResult {
  /** Surface keywords in the order chosen (the label first for long queries). */
  keywords: string[];
  /** log π of the sequence at the temperature used; NaN for greedy decoding (use logProb() to score it). */
  logProb: number;
  /** The matched set the planner built (item ordinals of the attached view), ascending. */
  matched: Int32Array;
  /** G(U) at the end. */
  expectedF1: number;
  /** E = Σ p over all items. */
  expectedRelevant: number;
}

export interface PlanOptions {
  /** 0 or absent decodes greedily; > 0 samples at that temperature (needs rng). */
  temperature?: number;
  rng?: Rng;
  /** Plan a training query as if it were held out (its own {q} and label removed from the postings). */
  asHeldOut?: boolean;
}

/** A replay: the keyword sequence to score and, with `grad`, where to add coef·∇ log π. */
export interface ReplayOptions {
  forced?: readonly string[];
  grad?: PlannerGrad;
  coef?: number;
}

/** What a plan reads of a planner. */
export interface PlanParts {
  readonly config: PlannerConfig;
  readonly relevance: RelevanceSource;
  readonly params: PlannerParams;
  readonly contexts: PlannerContexts;
}

/**
 * One plan. With `forced` it replays a keyword sequence (its log-probability, −∞ when a
 * keyword is not a valid choice at its step) and, with `grad`, adds coef·∇ log π.
 */
export function runPlan(planner: PlanParts, input: GenerateInput, opts: PlanOptions & ReplayOptions): PlanResult {
  const { config, params, contexts } = planner;
  const view = contexts.requireView();
  const d = view.data;
  const ctx = contexts.get(input);
  const p = ctx.p!;
  const E = ctx.E;
  const n = view.size;
  const alpha = params.alpha;
  const aE = alpha * E;
  const sampling = (opts.temperature ?? 0) > 0 && opts.rng !== undefined && !opts.forced;
  const scoring = sampling || opts.forced !== undefined;
  const T = sampling || opts.forced ? (opts.temperature ?? 1) : 1;
  const asHeldOut = opts.asHeldOut ?? false;
  const label = ctx.label;
  const fail = (): PlanResult => ({ keywords: [], logProb: -Infinity, matched: new Int32Array(0), expectedF1: 0, expectedRelevant: E });

  // U starts with the items of {q} and the label (unless planned as held out).
  const start = contexts.startState(ctx, asHeldOut);
  const inU = contexts.inU;
  const touchedU: number[] = Array.from(start.U0);
  for (const e of touchedU) inU[e] = 1;
  try {
    const cand = ctx.cands!;
    const C = cand.length;
    const stamp = ++contexts.stampEpoch;
    const { slot, slotStamp } = contexts;
    for (let c = 0; c < C; c++) {
      slot[cand[c]] = c;
      slotStamp[cand[c]] = stamp;
    }
    const slotOf = (k: number) => (slotStamp[k] === stamp ? slot[k] : -1);
    const s: StepState = {
      S: start.S0,
      nU: touchedU.length,
      aE,
      eps: config.epsilon,
      lambda: config.lambda,
      stopBias: params.stopBias,
      alive: new Uint8Array(C),
      dS: Float64Array.from(start.dS),
      dN: Int32Array.from(start.dN),
      theta: new Float64Array(C),
    };
    const { alive, dS, dN, theta } = s;
    for (let c = 0; c < C; c++) {
      alive[c] = dN[c] > 0 ? 1 : 0;
      if (params.terms.size > 0) theta[c] = params.terms.get(view.keyword(cand[c])) ?? 0;
    }
    // w-gradient bookkeeping: Σ p(1−p)x over U, over all items, and per candidate over its items outside U
    const sums =
      opts.grad !== undefined && config.grpoParams === 'all'
        ? new WeightSums(planner.relevance.dim, C, contexts.viewToModel!, p, planner.relevance.features(input))
        : null;
    if (sums) {
      for (let e = 0; e < n; e++) sums.add(e, sums.gE, 0, 1);
      for (const e of touchedU) sums.matched(e);
      for (let c = 0; c < C; c++) {
        const k = cand[c];
        for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++)
          if (!inU[d.post[j]]) sums.add(d.post[j], sums.gC, c * planner.relevance.dim, 1);
      }
    }
    const termKey = config.grpoParams !== 'global' ? (c: number) => view.keyword(cand[c]) : null;
    const weights = sums ? { sums, alpha } : null;
    // The plan starts with the query's label (labels) and the items' titles its text holds (names).
    const prefix = label ? [label, ...ctx.names] : [...ctx.names];
    const forced = opts.forced ? opts.forced.filter((k) => !prefix.includes(normalizeKeyword(k) ?? '')) : null;
    const chosen: string[] = [...prefix];
    const K = Math.max(0, config.maxKeywords - prefix.length);
    let logProb = scoring ? 0 : Number.NaN;
    const score = new Float64Array(C);
    const ex = new Float64Array(C);
    for (let t = 0; ; t++) {
      let pick = -1;
      let any = false;
      for (let c = 0; c < C && !any; c++) any = alive[c] === 1;
      const decide = t < K && any;
      if (!scoring) {
        // greedy: maximise G directly (no logs)
        if (decide) pick = greedyChoice(s);
      } else if (decide) {
        const dist = choiceDistribution(s, T, score, ex);
        if (forced) {
          if (t < forced.length) {
            const o = contexts.ordinalOf(forced[t]);
            const c = o >= 0 ? slotOf(o) : -1;
            if (c < 0 || !alive[c]) return fail();
            pick = c;
          }
        } else pick = sampledChoice(alive, dist, opts.rng!());
        logProb += Math.log((pick < 0 ? dist.eStop : ex[pick]) / dist.Z);
        if (opts.grad) addStepGradient(opts.grad, s, dist, pick, (opts.coef ?? 0) / T, termKey, weights);
      } else if (forced && t < forced.length) {
        return fail();
      }
      if (pick < 0) break;
      // apply the pick: its postings join U, and every candidate that shared an item loses it
      const k = cand[pick];
      chosen.push(view.surface(k));
      alive[pick] = 0;
      for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) {
        const e = d.post[j];
        if (inU[e]) continue;
        inU[e] = 1;
        touchedU.push(e);
        s.S += p[e];
        s.nU++;
        if (sums) sums.matched(e);
        const lose = (o: number) => {
          const c = slotOf(o);
          if (c < 0 || dN[c] === 0) return;
          dS[c] -= p[e];
          dN[c]--;
          if (dN[c] === 0) alive[c] = 0;
          if (sums) sums.lose(c, e);
        };
        const self = d.self[e];
        let selfInFwd = self < 0;
        for (let jj = d.fwdOff[e]; jj < d.fwdOff[e + 1]; jj++) {
          lose(d.fwd[jj]);
          if (d.fwd[jj] === self) selfInFwd = true;
        }
        if (!selfInFwd) lose(self);
      }
    }
    const matched = Int32Array.from(touchedU).sort();
    return { keywords: chosen, logProb, matched, expectedF1: (2 * s.S) / Math.max(1e-12, s.nU + aE), expectedRelevant: E };
  } finally {
    for (const e of touchedU) inU[e] = 0;
  }
}
