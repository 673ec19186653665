/**
 * The query side as an expected-F1 keyword planner.
 *
 * Given p_i = p(item i relevant | query) from the relevance model for every item of the
 * frozen item index, E = Σ_i p_i estimates how many items are relevant. The planner
 * grows the matched set U keyword by keyword (a keyword adds its whole postings, as the
 * CoGR matching rule does) to maximise
 *   G(U) = 2·Σ_{i∈U} p_i / (|U| + α·E),
 * the expected F1 of U when α = 1 (F1 = 2·tp/(n_ret + n_rel)); α is learned on training
 * queries. It starts from U = the items matched by the query's own string {q}.
 * Candidates: every keyword (and title) of the top-T items by p, plus the query's own
 * 1–3-grams that the item index knows.
 *
 * As a policy: at step t the choices are the remaining candidates that would add at
 * least one item, and STOP. With gain_c = ln G(U ∪ P_c) − ln G(U) (ln G floored by ε),
 *   score(c) = λ·gain_c + θ_c,  score(STOP) = θ_stop,  π(c) ∝ exp(score/τ);
 * after K keywords it stops. Greedy decoding (argmax, STOP included) with θ = 0 is the
 * deterministic planner: add the best keyword while it raises G. Log-probabilities of a
 * keyword sequence are exact sums of the step log-probabilities, and their gradients
 * with respect to θ (per keyword), θ_stop, ln α and the relevance weights w are exact
 * (∂p_i/∂w = p_i(1 − p_i)·x_i), so GRPO updates all of them.
 *
 * Long queries: a query string over the keyword limits cannot be an item keyword, so the
 * planner's keyword list starts with the query's label — its (at most) 8 highest-idf
 * content words in their original order — the query side's own name for itself, which
 * items can adopt in the item half-round. A query within the limits needs none: {q} is
 * already a keyword.
 *
 * Leave-one-out for training queries (`asHeldOut`): the query's own {q} and label are
 * removed from the item postings — once items adopt them they match exactly its relevant
 * items, and training F1 would be 1 — and the relevance features always leave a training
 * query's own judgements out (relevance.ts).
 */
import type { Analyzer } from '../../index/text/analyzer.ts';
import { textTokens } from '../../index/text/analyzer.ts';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { KEYWORD_MAX_CHARS, KEYWORD_MAX_WORDS, normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import type { Rng } from '../../index/core/random.ts';
import type { Side } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { STOP_WORDS } from '../policy/stopwords.ts';
import type { GenerateInput, GenerateOptions, KeywordGenerator, KeywordSample } from '../types.ts';
import { drawSamples } from '../samples.ts';
import { RelevanceModel, TEXT_SCORE_COLUMN, type RelevanceItem } from './relevance.ts';

/** What the planner needs of a relevance model (relevance.ts; tests inject fixed probabilities). */
export interface RelevanceSource {
  readonly analyzer: Analyzer;
  /** Number of features (the length of the weights). */
  readonly dim: number;
  /** Changes whenever the weights change. */
  readonly weightsVersion: number;
  itemOrdinal(id: string): number;
  /** Row-major features (items × dim) of a query over the source's items (a training query's own judgements left out). */
  features(query: { id: string; text: string }): Float64Array;
  /** σ(w·x) per item for the given features. */
  probabilities(query: { id: string; text: string }, features: Float64Array): Float64Array;
  getWeights(): Float64Array;
  setWeights(w: ArrayLike<number>): void;
  /** idf of an analysed word over the items' text. */
  wordIdf(word: string): number;
  /** The analysed words of a text as wordIdf knows them (default: index/text/analyzer.ts textTokens with `analyzer`). */
  textWords?(text: string): string[];
  /** The feature column of the normalised text BM25 the text ranking reads (default TEXT_SCORE_COLUMN). */
  readonly textScoreColumn?: number;
  /** The source as JSON (relevance.ts RelevanceJSON). */
  toJSON(): unknown;
}

export interface PlannerConfig {
  /** Items (by p) whose keywords are candidates. */
  topItems: number;
  /** Most keywords per query (the budget K_max). */
  maxKeywords: number;
  /** Scale of the log-gain in the policy's scores. */
  lambda: number;
  /** ε floor of 2·Σp in ln G (keeps ln G finite when U is empty). */
  epsilon: number;
  /**
   * What a GRPO update may change: 'all' (θ per keyword, θ_stop, ln α and the relevance
   * weights w), 'terms' (θ per keyword only: the global parameters stay as the supervised
   * fit and α tuning left them) or 'global' (θ_stop and ln α: two parameters shared by
   * every query, the relevance weights staying as the supervised fit left them).
   */
  grpoParams: 'all' | 'terms' | 'global';
  /** L2 shrinkage of every parameter a GRPO step touches (towards its SFT value for w, 0 for the rest). */
  l2: number;
  /** Bytes of per-query feature caches kept (features cost N × dim × 8 bytes per query). */
  cacheBytes: number;
  /**
   * Most candidates per query (0: all): the keywords with the highest mean p over their
   * postings (Σp / (|postings| + 1)) are kept. Part of the policy's definition, so
   * log-probabilities stay exact.
   */
  maxCandidates: number;
}
export const PLANNER_FORMAT = 'cogr-query-planner';
export const PLANNER_VERSION = 1;

/** A saved planner: its configuration, parameters and its relevance model (weights and training judgements). */
export interface PlannerJSON {
  format: typeof PLANNER_FORMAT;
  version: number;
  config: PlannerConfig;
  params: PlannerJSONParams;
  relevance: unknown;
}

/** The planner's defaults, from index/core/defaults.ts (`DEFAULTS.planner`, K_max). */
export const DEFAULT_PLANNER: PlannerConfig = (({ topItems, lambda, epsilon, grpoParams, l2, cacheBytes, maxCandidates }) => ({
  topItems,
  maxKeywords: K_MAX,
  lambda,
  epsilon,
  grpoParams,
  l2,
  cacheBytes,
  maxCandidates,
}))(DEFAULTS.planner);

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

export interface PlannerGrpoSample {
  input: GenerateInput;
  keywords: string[];
  oldLogProb: number;
  advantage: number;
  asHeldOut?: boolean;
}

export interface PlannerJSONParams {
  alpha: number;
  stopBias: number;
  terms: [string, number][];
}

/** Per-query cache: features, probabilities over view ordinals, candidates. */
interface QueryContext {
  text: string;
  x: Float64Array;
  p: Float64Array | null;
  pVersion: number;
  E: number;
  /** Candidate keyword ordinals (sorted) for this p and view; own keys excluded. */
  cands: Int32Array | null;
  selfO: number;
  labelO: number;
  label: string | null;
  /** The starting state per mode (0: planned as held out, 1: with its own {q} and label): U₀ and every candidate's (Σp, count) outside it. */
  start: [StartState | null, StartState | null];
}

interface StartState {
  U0: Int32Array;
  S0: number;
  dS: Float64Array;
  dN: Int32Array;
}

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

/** α values tried when tuning: log-spaced from 1/8 to 4. */
export const ALPHA_GRID: readonly number[] = [0.125, 0.177, 0.25, 0.354, 0.5, 0.707, 1, 1.41, 2, 2.83, 4];

/** F1 of a matched set against relevant ordinals. */
export function setF1(matched: ArrayLike<number>, relevant: ReadonlySet<number>): number {
  let tp = 0;
  for (let i = 0; i < matched.length; i++) if (relevant.has(matched[i])) tp++;
  return tp === 0 ? 0 : (2 * tp) / (matched.length + relevant.size);
}

function words(text: string): string[] {
  const s = normalizeSelf(text);
  return s.length === 0 ? [] : s.split(' ');
}

const NONE = -1;

export class KeywordPlanner implements KeywordGenerator {
  readonly kind = 'planner';
  readonly side: Side = 'query';
  readonly config: PlannerConfig;
  readonly relevance: RelevanceSource;
  alpha = 1;
  stopBias = 0;
  /** Plan every query of `generate()` as held out (rollouts of training queries for external trainers). */
  leaveOneOut = false;
  private readonly terms = new Map<string, number>();
  private view: KeywordView | null = null;
  private viewToModel: Int32Array | null = null;
  private viewEpoch = 0;
  private readonly contexts = new Map<string, QueryContext>();
  private cacheBytes = 0;
  private readonly g2 = new Map<string, number>();
  // scratch
  private inU = new Uint8Array(0);
  private slot = new Int32Array(0);
  private slotStamp = new Int32Array(0);
  private stampEpoch = 0;

  constructor(relevance: RelevanceSource, config: Partial<PlannerConfig> = {}) {
    this.relevance = relevance;
    this.config = { ...DEFAULT_PLANNER, ...config };
  }

  /** Attach the frozen item index the planner plans against (clears per-query candidates). */
  attachOpposite(view: KeywordView | null): void {
    this.view = view;
    this.viewToModel = null;
    this.viewEpoch++;
    for (const c of this.contexts.values()) {
      c.p = null;
      c.cands = null;
      c.start = [null, null];
    }
    if (!view) return;
    const map = new Int32Array(view.size);
    for (let e = 0; e < view.size; e++) map[e] = this.relevance.itemOrdinal(view.id(e));
    this.viewToModel = map;
    this.inU = new Uint8Array(view.size);
    this.slot = new Int32Array(view.numKeywords);
    this.slotStamp = new Int32Array(view.numKeywords);
  }
  get attached(): KeywordView | null {
    return this.view;
  }

  private requireView(): KeywordView {
    if (!this.view) throw cogrError('INVALID_ARGUMENT', 'the query planner has no item index attached');
    return this.view;
  }

  /** Per-query features, probabilities (over view ordinals) and candidates, cached. */
  private context(q: { id: string; text: string }): QueryContext {
    const key = `${q.id}\u0001${q.text}`;
    let c = this.contexts.get(key);
    if (!c) {
      const x = this.relevance.features(q);
      const bytes = x.byteLength;
      if (this.cacheBytes + bytes > this.config.cacheBytes) {
        this.contexts.clear();
        this.cacheBytes = 0;
      }
      const label = this.label(q.text);
      c = { text: q.text, x, p: null, pVersion: -1, E: 0, cands: null, selfO: NONE, labelO: NONE, label, start: [null, null] };
      this.contexts.set(key, c);
      this.cacheBytes += bytes;
    }
    const view = this.requireView();
    const version = this.relevance.weightsVersion;
    if (!c.p || c.pVersion !== version) {
      const pm = this.relevance.probabilities(q, c.x);
      const map = this.viewToModel!;
      const p = new Float64Array(view.size);
      let E = 0;
      for (let e = 0; e < view.size; e++) {
        p[e] = map[e] >= 0 ? pm[map[e]] : 0;
        E += p[e];
      }
      c.p = p;
      c.E = E;
      c.pVersion = version;
      c.cands = null;
      c.start = [null, null];
      c.selfO = this.selfOrdinal(q.text);
      c.labelO = c.label ? this.ordinalOf(c.label) : NONE;
    }
    if (!c.cands) c.cands = this.candidates(q.text, c.p, c.selfO, c.labelO);
    return c;
  }

  /** p(item relevant | query) over the attached view's ordinals (a training query's own judgements left out). */
  probabilities(input: GenerateInput): Float64Array {
    return this.context(input).p!;
  }

  /**
   * The query's text BM25 over each item's title and description, normalised by the best
   * item (the relevance model's `sTfNorm` feature, query words weighted by their counts, or
   * `sNorm` for models without it; 0 when the item shares no word with the query), over
   * the attached view's ordinals.
   */
  textScores(input: GenerateInput): Float64Array {
    const c = this.context(input);
    const map = this.viewToModel!;
    const d = this.relevance.dim;
    const out = new Float64Array(map.length);
    const col = this.relevance.textScoreColumn ?? TEXT_SCORE_COLUMN;
    for (let e = 0; e < map.length; e++) out[e] = map[e] >= 0 ? c.x[map[e] * d + col] : 0;
    return out;
  }

  /** Drop cached per-query features, probabilities and candidates. */
  clearCache(): void {
    this.contexts.clear();
    this.cacheBytes = 0;
  }

  /** The query's label: null when its own string is within the keyword limits, else its 8 highest-idf content words in order. */
  label(text: string): string | null {
    const ws = words(text);
    if (ws.length === 0) return null;
    if (ws.length <= KEYWORD_MAX_WORDS && ws.join(' ').length <= KEYWORD_MAX_CHARS) return null;
    const an = this.relevance.analyzer;
    const content: { w: string; i: number; idf: number }[] = [];
    ws.forEach((w, i) => {
      if (STOP_WORDS.has(w)) return;
      const t = this.relevance.textWords ? this.relevance.textWords(w) : textTokens(w, an);
      if (t.length === 0) return;
      content.push({ w, i, idf: this.relevance.wordIdf(t[0]) });
    });
    const keep = new Set(
      [...content]
        .sort((a, b) => b.idf - a.idf || a.i - b.i)
        .slice(0, KEYWORD_MAX_WORDS)
        .map((x) => x.i),
    );
    let out = content.filter((x) => keep.has(x.i)).map((x) => x.w);
    while (out.length > 0 && out.join(' ').length > KEYWORD_MAX_CHARS) out = out.slice(0, -1);
    return out.length ? normalizeKeyword(out.join(' ')) : null;
  }

  /** View keyword ordinal of a raw keyword (−1 when the index does not know it). */
  private ordinalOf(raw: string): number {
    return this.requireView().ordinalOfKeyword(raw);
  }
  private selfOrdinal(text: string): number {
    const o = this.requireView().probeKeywordOrdinals({ self: text, keywords: [] });
    return o.length ? o[0] : NONE;
  }

  /** Candidate keyword ordinals: keywords and titles of the top-T items by p, and the query's own 1–3-grams; own {q} and label excluded. */
  private candidates(text: string, p: Float64Array, selfO: number, labelO: number): Int32Array {
    const view = this.requireView();
    const d = view.data;
    const n = view.size;
    const out = new Set<number>();
    for (const e of topByP(p, Math.min(this.config.topItems, n))) {
      for (let j = d.fwdOff[e]; j < d.fwdOff[e + 1]; j++) out.add(d.fwd[j]);
      if (d.self[e] >= 0) out.add(d.self[e]);
    }
    const ws = words(text);
    for (let i = 0; i < ws.length; i++) {
      if (STOP_WORDS.has(ws[i])) continue;
      for (let m = 1; m <= 3 && i + m <= ws.length; m++) {
        if (STOP_WORDS.has(ws[i + m - 1])) continue;
        const o = this.ordinalOf(ws.slice(i, i + m).join(' '));
        if (o >= 0) out.add(o);
      }
    }
    out.delete(selfO);
    out.delete(labelO);
    let list = [...out];
    const cap = this.config.maxCandidates;
    if (cap > 0 && list.length > cap) {
      const mean = (k: number) => {
        let s = 0;
        for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) s += p[d.post[j]];
        return s / (d.postOff[k + 1] - d.postOff[k] + 1);
      };
      const m = new Map(list.map((k) => [k, mean(k)]));
      list = list.sort((a, b) => m.get(b)! - m.get(a)! || a - b).slice(0, cap);
    }
    return Int32Array.from(list).sort();
  }

  /** U₀ and the candidates' (Σp, count) outside it, per mode (cached with the candidates). */
  private startState(ctx: QueryContext, asHeldOut: boolean): StartState {
    const mode = asHeldOut ? 0 : 1;
    const cached = ctx.start[mode];
    if (cached) return cached;
    const d = this.requireView().data;
    const p = ctx.p!;
    const inU = this.inU;
    const U: number[] = [];
    let S0 = 0;
    if (!asHeldOut) {
      for (const o of [ctx.selfO, ctx.labelO]) {
        if (o < 0) continue;
        for (let j = d.postOff[o]; j < d.postOff[o + 1]; j++) {
          const e = d.post[j];
          if (inU[e]) continue;
          inU[e] = 1;
          U.push(e);
          S0 += p[e];
        }
      }
    }
    const cand = ctx.cands!;
    const dS = new Float64Array(cand.length);
    const dN = new Int32Array(cand.length);
    for (let c = 0; c < cand.length; c++) {
      const k = cand[c];
      let ds = 0;
      let dn = 0;
      for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) {
        const e = d.post[j];
        if (!inU[e]) {
          ds += p[e];
          dn++;
        }
      }
      dS[c] = ds;
      dN[c] = dn;
    }
    for (const e of U) inU[e] = 0;
    const st: StartState = { U0: Int32Array.from(U), S0, dS, dN };
    ctx.start[mode] = st;
    return st;
  }

  /**
   * One plan. With `forced` it replays a keyword sequence (its log-probability, −∞ when a
   * keyword is not a valid choice at its step) and, with `grad`, adds coef·∇ log π.
   */
  private run(input: GenerateInput, opts: PlanOptions & { forced?: readonly string[]; grad?: PlannerGrad; coef?: number }): PlanResult {
    const view = this.requireView();
    const d = view.data;
    const ctx = this.context(input);
    const p = ctx.p!;
    const E = ctx.E;
    const n = view.size;
    const alpha = this.alpha;
    const aE = alpha * E;
    const eps = this.config.epsilon;
    const lambda = this.config.lambda;
    const sampling = (opts.temperature ?? 0) > 0 && opts.rng !== undefined && !opts.forced;
    const scoring = sampling || opts.forced !== undefined;
    const T = sampling || opts.forced ? (opts.temperature ?? 1) : 1;
    const asHeldOut = opts.asHeldOut ?? false;
    const label = ctx.label;
    const fail = (): PlanResult => ({ keywords: [], logProb: -Infinity, matched: new Int32Array(0), expectedF1: 0, expectedRelevant: E });

    // U starts with the items of {q} and the label (unless planned as held out).
    const start = this.startState(ctx, asHeldOut);
    const inU = this.inU;
    const touchedU: number[] = Array.from(start.U0);
    let S = start.S0;
    let nU = touchedU.length;
    for (const e of touchedU) inU[e] = 1;
    const addItem = (e: number) => {
      inU[e] = 1;
      touchedU.push(e);
      S += p[e];
      nU++;
    };
    try {
      const cand = ctx.cands!;
      const C = cand.length;
      const stamp = ++this.stampEpoch;
      for (let c = 0; c < C; c++) {
        this.slot[cand[c]] = c;
        this.slotStamp[cand[c]] = stamp;
      }
      const slotOf = (k: number) => (this.slotStamp[k] === stamp ? this.slot[k] : -1);
      const dS = Float64Array.from(start.dS);
      const dN = Int32Array.from(start.dN);
      const alive = new Uint8Array(C);
      const theta = new Float64Array(C);
      for (let c = 0; c < C; c++) {
        alive[c] = dN[c] > 0 ? 1 : 0;
        if (this.terms.size > 0) theta[c] = this.terms.get(view.keyword(cand[c])) ?? 0;
      }
      // w-gradient bookkeeping: Σ p(1−p)x over U, over all items, and per candidate over its items outside U
      const wantW = opts.grad !== undefined && this.config.grpoParams === 'all';
      const wantTerms = this.config.grpoParams !== 'global';
      const dim = this.relevance.dim;
      const map = this.viewToModel!;
      const x = ctx.x;
      let gS: Float64Array | null = null;
      let gE: Float64Array | null = null;
      let gC: Float64Array | null = null;
      const px = (e: number, out: Float64Array, off: number, sign: number) => {
        const m = map[e];
        if (m < 0) return;
        const f = sign * p[e] * (1 - p[e]);
        if (f === 0) return;
        const xo = m * dim;
        for (let j = 0; j < dim; j++) out[off + j] += f * x[xo + j];
      };
      if (wantW) {
        gS = new Float64Array(dim);
        gE = new Float64Array(dim);
        gC = new Float64Array(C * dim);
        for (let e = 0; e < n; e++) px(e, gE, 0, 1);
        for (const e of touchedU) px(e, gS, 0, 1);
        for (let c = 0; c < C; c++) {
          const k = cand[c];
          for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) if (!inU[d.post[j]]) px(d.post[j], gC, c * dim, 1);
        }
      }
      const forced = opts.forced ? opts.forced.filter((k) => normalizeKeyword(k) !== label) : null;
      const chosen: string[] = label ? [label] : [];
      const K = Math.max(0, this.config.maxKeywords - (label ? 1 : 0));
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
          if (decide) {
            const G = (2 * S + eps) / (nU + aE);
            let best = this.stopBias;
            for (let c = 0; c < C; c++) {
              if (!alive[c]) continue;
              const Gc = (2 * (S + dS[c]) + eps) / (nU + dN[c] + aE);
              const sc = lambda * Math.log(Gc / G) + theta[c];
              if (sc > best + 1e-12) {
                best = sc;
                pick = c;
              }
            }
          }
        } else if (decide) {
          const lnG = Math.log(2 * S + eps) - Math.log(nU + aE);
          let mx = this.stopBias;
          for (let c = 0; c < C; c++) {
            if (!alive[c]) continue;
            score[c] = lambda * (Math.log(2 * (S + dS[c]) + eps) - Math.log(nU + dN[c] + aE) - lnG) + theta[c];
            if (score[c] > mx) mx = score[c];
          }
          const eStop = Math.exp((this.stopBias - mx) / T);
          let Z = eStop;
          for (let c = 0; c < C; c++) if (alive[c]) Z += ex[c] = Math.exp((score[c] - mx) / T);
          if (forced) {
            if (t < forced.length) {
              const o = this.ordinalOf(forced[t]);
              const c = o >= 0 ? slotOf(o) : -1;
              if (c < 0 || !alive[c]) return fail();
              pick = c;
            }
          } else {
            let r = opts.rng!() * Z - eStop;
            if (r >= 0) {
              for (let c = 0; c < C; c++) {
                if (!alive[c]) continue;
                pick = c;
                r -= ex[c];
                if (r < 0) break;
              }
            }
          }
          logProb += Math.log((pick < 0 ? eStop : ex[pick]) / Z);
          if (opts.grad) {
            const g = opts.grad;
            const f = (opts.coef ?? 0) / T;
            g.stop += f * ((pick < 0 ? 1 : 0) - eStop / Z);
            const dLnG0 = -aE / (nU + aE);
            for (let c = 0; c < C; c++) {
              if (!alive[c]) continue;
              const wgt = f * ((c === pick ? 1 : 0) - ex[c] / Z);
              if (wgt === 0) continue;
              if (wantTerms) {
                const key = view.keyword(cand[c]);
                g.terms.set(key, (g.terms.get(key) ?? 0) + wgt);
              }
              g.lnAlpha += wgt * lambda * (-aE / (nU + dN[c] + aE) - dLnG0);
              if (wantW && Math.abs(wgt) > 1e-12) {
                const num = 2 * (S + dS[c]) + eps;
                const den = nU + dN[c] + aE;
                const num0 = 2 * S + eps;
                const den0 = nU + aE;
                const o = c * dim;
                for (let j = 0; j < dim; j++) {
                  const dgain =
                    (2 * (gS![j] + gC![o + j])) / num - (alpha * gE![j]) / den - ((2 * gS![j]) / num0 - (alpha * gE![j]) / den0);
                  g.w[j] += wgt * lambda * dgain;
                }
              }
            }
          }
        } else if (forced && t < forced.length) {
          return fail();
        }
        if (pick < 0) break;
        // apply the pick
        const k = cand[pick];
        chosen.push(view.surface(k));
        alive[pick] = 0;
        for (let j = d.postOff[k]; j < d.postOff[k + 1]; j++) {
          const e = d.post[j];
          if (inU[e]) continue;
          addItem(e);
          if (wantW) px(e, gS!, 0, 1);
          const lose = (o: number) => {
            const c = slotOf(o);
            if (c < 0 || dN[c] === 0) return;
            dS[c] -= p[e];
            dN[c]--;
            if (dN[c] === 0) alive[c] = 0;
            if (wantW) px(e, gC!, c * dim, -1);
          };
          const s = d.self[e];
          let selfInFwd = s < 0;
          for (let jj = d.fwdOff[e]; jj < d.fwdOff[e + 1]; jj++) {
            lose(d.fwd[jj]);
            if (d.fwd[jj] === s) selfInFwd = true;
          }
          if (!selfInFwd) lose(s);
        }
      }
      const matched = Int32Array.from(touchedU).sort();
      return { keywords: chosen, logProb, matched, expectedF1: (2 * S) / Math.max(1e-12, nU + aE), expectedRelevant: E };
    } finally {
      for (const e of touchedU) inU[e] = 0;
    }
  }

  /**
   * The "+ search results" context of an LLM query prompt: the ids of the `items` most
   * probable items for the query (p descending, ties by ordinal) and the keywords of its
   * greedy plan (the index keywords that retrieve them).
   */
  searchContext(input: GenerateInput, items: number): { itemIds: string[]; keywords: string[] } {
    const view = this.requireView();
    const order = topByP(this.probabilities(input), items);
    return { itemIds: order.map((o) => view.id(o)), keywords: this.plan(input).keywords };
  }

  /** Plan one query (greedy unless a temperature and rng are given). */
  plan(input: GenerateInput, opts: PlanOptions = {}): PlanResult {
    return this.run(input, opts);
  }

  /** Exact log π(keywords | query) at temperature τ (−∞ when the sequence cannot be produced). */
  logProb(input: GenerateInput, keywords: readonly string[], temperature = 1, asHeldOut = false): number {
    return this.run(input, { forced: keywords, temperature, asHeldOut }).logProb;
  }

  /** ∇ log π(keywords | query) (tests: finite differences). */
  gradLogProb(input: GenerateInput, keywords: readonly string[], temperature = 1, asHeldOut = false): PlannerGrad {
    const g = new PlannerGrad(this.relevance.dim);
    this.run(input, { forced: keywords, temperature, asHeldOut, grad: g, coef: 1 });
    return g;
  }

  /** θ of a keyword (by its match key). */
  term(keyword: string): number {
    const view = this.requireView();
    const o = this.ordinalOf(keyword);
    return o < 0 ? 0 : (this.terms.get(view.keyword(o)) ?? 0);
  }
  setTerm(keyword: string, value: number): void {
    const view = this.requireView();
    const o = this.ordinalOf(keyword);
    if (o < 0) throw cogrError('NOT_FOUND', `keyword ${JSON.stringify(keyword)} is not in the attached item index`);
    if (value === 0) this.terms.delete(view.keyword(o));
    else this.terms.set(view.keyword(o), value);
  }

  // ---------- training ----------
  /**
   * Tune α on training queries planned as held out: the value of `grid` with the highest
   * mean F1 of the matched sets (ties: the earlier value).
   */
  tuneAlpha(
    queries: readonly GenerateInput[],
    relevantOf: (id: string) => ReadonlySet<number>,
    grid: readonly number[] = ALPHA_GRID,
  ): { alpha: number; f1: number; curve: [number, number][] } {
    const curve: [number, number][] = [];
    let best = { alpha: this.alpha, f1: -1 };
    // Query by query, every α of the grid (a query's features, p and candidates are built
    // once, not once per α when the caches cannot hold every query); each α's sum adds the
    // queries in the same order, so the curve is that of α by α.
    const sums = new Float64Array(grid.length);
    for (const q of queries) {
      const rel = relevantOf(q.id);
      for (let g = 0; g < grid.length; g++) {
        this.alpha = grid[g];
        sums[g] += setF1(this.plan(q, { asHeldOut: true }).matched, rel);
      }
    }
    grid.forEach((a, g) => {
      const f1 = queries.length ? sums[g] / queries.length : 0;
      curve.push([a, f1]);
      if (f1 > best.f1 + 1e-12) best = { alpha: a, f1 };
    });
    this.alpha = best.alpha;
    return { ...best, curve };
  }

  /**
   * One GRPO step: ascent on mean_i min(ρ_i·A_i, clip(ρ_i, 1 − ε, 1 + ε)·A_i), ρ_i =
   * exp(log π_new − oldLogProb), with Adagrad on θ (per keyword) and, with grpoParams
   * 'all', θ_stop, ln α and the relevance weights w.
   */
  grpoUpdate(
    batch: readonly PlannerGrpoSample[],
    opts: { clip?: number; lr?: number; temperature?: number } = {},
  ): { objective: number; clipFraction: number; skipped: number } {
    const eps = opts.clip ?? 0.2;
    const lr = opts.lr ?? 0.05;
    const T = opts.temperature ?? 1;
    const g = new PlannerGrad(this.relevance.dim);
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
      const one = new PlannerGrad(this.relevance.dim);
      const l = this.run(s.input, { forced: s.keywords, temperature: T, asHeldOut: s.asHeldOut ?? false, grad: one, coef: 1 }).logProb;
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
    this.applyGrad(g, lr);
    return { objective: obj / B, clipFraction: clipped / B, skipped };
  }

  private adagrad(key: string, value: number, grad: number, lr: number): number {
    const gg = grad - this.config.l2 * value;
    const acc = (this.g2.get(key) ?? 0) + gg * gg;
    this.g2.set(key, acc);
    return acc > 0 ? value + (lr * gg) / (Math.sqrt(acc) + 1e-8) : value;
  }

  private applyGrad(g: PlannerGrad, lr: number): void {
    if (this.config.grpoParams !== 'global') {
      for (const [k, v] of g.terms) {
        const nv = this.adagrad('t\u0001' + k, this.terms.get(k) ?? 0, v, lr);
        if (nv === 0) this.terms.delete(k);
        else this.terms.set(k, nv);
      }
    }
    if (this.config.grpoParams !== 'terms') {
      this.stopBias = this.adagrad('stop', this.stopBias, g.stop, lr);
      this.alpha = Math.exp(this.adagrad('lnAlpha', Math.log(this.alpha), g.lnAlpha, lr));
    }
    if (this.config.grpoParams === 'all') {
      const w = this.relevance.getWeights();
      let changed = false;
      for (let j = 0; j < w.length; j++) {
        if (g.w[j] === 0) continue;
        const nv = this.adagrad('w' + j, w[j], g.w[j], lr);
        if (nv !== w[j]) changed = true;
        w[j] = nv;
      }
      if (changed) this.relevance.setWeights(w);
    }
  }

  /** The planner's own parameters (the relevance model is serialised separately). */
  paramsJSON(): PlannerJSONParams {
    return {
      alpha: this.alpha,
      stopBias: this.stopBias,
      terms: [...this.terms.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
    };
  }
  setParams(p: PlannerJSONParams): void {
    if (!(p.alpha > 0) || !Number.isFinite(p.stopBias) || !Array.isArray(p.terms))
      throw cogrError('DATA_FORMAT', 'planner parameters are malformed (alpha, stopBias, terms)');
    this.alpha = p.alpha;
    this.stopBias = p.stopBias;
    this.terms.clear();
    for (const [k, v] of p.terms) this.terms.set(k, v);
  }

  // ---------- persistence ----------
  toJSON(): PlannerJSON {
    return {
      format: PLANNER_FORMAT,
      version: PLANNER_VERSION,
      config: { ...this.config },
      params: this.paramsJSON(),
      relevance: this.relevance.toJSON(),
    };
  }

  /** A saved planner over the given items (their texts rebuild the relevance model's BM25 index). */
  static fromJSON(json: unknown, items: readonly RelevanceItem[], reuse?: RelevanceModel | null): KeywordPlanner {
    const j = json as Partial<PlannerJSON> | null;
    if (!j || typeof j !== 'object' || j.format !== PLANNER_FORMAT)
      throw cogrError('DATA_FORMAT', `not a query planner (format field is not "${PLANNER_FORMAT}")`);
    if (j.version !== PLANNER_VERSION)
      throw cogrError(
        'DB_VERSION',
        `query planner has format version ${String(j.version)}; this cogr reads version ${PLANNER_VERSION} only (rerun the co-evolution run)`,
      );
    if (!j.config || !j.params) throw cogrError('DATA_FORMAT', 'query planner JSON is malformed (config, params)');
    const p = new KeywordPlanner(RelevanceModel.fromJSON(j.relevance, items, reuse), j.config);
    p.setParams(j.params);
    return p;
  }

  // ---------- KeywordGenerator ----------
  async generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]> {
    if (side !== 'query') throw cogrError('INVALID_ARGUMENT', `the query planner generates query keywords, not ${side}`);
    return drawSamples(inputs, opts, (input, rng) => {
      const r = this.run(input, { temperature: opts.temperature, rng, asHeldOut: this.leaveOneOut });
      return { keywords: r.keywords, logProb: Number.isNaN(r.logProb) ? null : r.logProb };
    });
  }
}

/** The `k` entity ordinals with the highest p (ties: lower ordinal first), best first. */
export function topByP(p: Float64Array, k: number): number[] {
  const n = p.length;
  if (k <= 0) return [];
  if (k >= n) return Array.from({ length: n }, (_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
  // binary heap of the best k (min at the root)
  const heap: number[] = [];
  const worse = (a: number, b: number) => p[a] < p[b] || (p[a] === p[b] && a > b);
  for (let i = 0; i < n; i++) {
    if (heap.length < k) {
      heap.push(i);
      let c = heap.length - 1;
      while (c > 0) {
        const pa = (c - 1) >> 1;
        if (worse(heap[c], heap[pa])) {
          [heap[c], heap[pa]] = [heap[pa], heap[c]];
          c = pa;
        } else break;
      }
    } else if (worse(heap[0], i)) {
      heap[0] = i;
      let c = 0;
      for (;;) {
        const l = 2 * c + 1;
        const r = l + 1;
        let m = c;
        if (l < k && worse(heap[l], heap[m])) m = l;
        if (r < k && worse(heap[r], heap[m])) m = r;
        if (m === c) break;
        [heap[c], heap[m]] = [heap[m], heap[c]];
        c = m;
      }
    }
  }
  return heap.sort((a, b) => p[b] - p[a] || a - b);
}
