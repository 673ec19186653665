/**
 * EmbeddedPolicy: a small trainable stochastic keyword policy for one side.
 *
 * Score of candidate c for input x (log-linear):
 *   s(c) = w_dense · φ(c) + θ_kw[c] + Σ_{w ∈ words(x)} θ_pair[w, c]   (pairs: query side)
 * Sampling (Plackett–Luce without replacement with a stop choice): at step t (t keywords
 * chosen so far) the policy picks among the remaining candidates and STOP with
 *   P(c) ∝ exp(s(c)/T),  P(STOP) ∝ exp((b_stop + a_stop·t/10)/T);
 * after K_max keywords it stops with probability 1. The log-probability of a sampled
 * (ordered) keyword sequence is the exact sum of the step log-probabilities; a sequence
 * using a keyword outside the candidate set has probability 0 (−∞).
 *
 * Training: ascent on Σ log p (SFT, maximum likelihood on ordered targets) or on the GRPO
 * clipped surrogate with group-normalised advantages and an optional k3 KL estimate to a
 * reference policy; Adagrad steps with a small L2 on the touched weights.
 * Candidate sets and their features are cached per input (and per attached opposite view).
 */
import { cogrError } from '../../index/errors.ts';
import { normalizeKeyword } from '../../index/normalize.ts';
import { createRng, deriveSeed, shuffle, type Rng } from '../../index/random.ts';
import type { Side } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import { DEFAULTS, K_MAX } from '../../index/defaults.ts';
import { type GenerateInput, type GenerateOptions, type KeywordGenerator, type KeywordSample } from '../types.ts';
import {
  D,
  DEFAULT_CANDIDATES,
  DENSE,
  DI,
  extractCandidates,
  inputWords,
  type Associations,
  type CandidateConfig,
  type WordStats,
} from './candidates.ts';
import { OppositeIndex } from './opposite.ts';
import { STOP_WORDS } from './stopwords.ts';

export const POLICY_FORMAT = 'cogr-embedded-policy';
export const POLICY_VERSION = 2;

const STOP_B = D;
const STOP_A = D + 1;
const SPARSE0 = D + 2;

export interface PolicyConfig extends CandidateConfig {
  kMax: number;
  l2: number;
  /** Sparse per-keyword features θ_kw[c]. */
  keywordFeatures: boolean;
  /** Sparse (query word, keyword) pair features θ_pair[w, c] (query side). */
  pairFeatures: boolean;
  /** Greedy decoding's stop rule (see greedyIdx): 'mass' or 'argmax'. */
  greedyStop: 'mass' | 'argmax';
  /**
   * Parameters a GRPO update may change: 'all', or 'sparse' (the per-keyword and pair
   * weights only; dense and stop weights keep their SFT values). Default: 'sparse' on the
   * item side, where the reward sees only training queries and shared dense/stop weights
   * would carry its "fewer keywords is safer" signal to every item; 'all' on the query side.
   */
  grpoParams: 'all' | 'sparse';
}

export interface PolicyJSON {
  format: typeof POLICY_FORMAT;
  version: number;
  side: Side;
  config: PolicyConfig;
  dense: number[];
  stop: [number, number];
  sparse: [string, number][];
  stats: { n: number; df: [string, number][] } | null;
  assoc: [string, [string, number][]][];
}

/** A cached candidate set with its features. */
interface CandidateSet {
  /** The input's title and text the set was built from (the cache is keyed by id and checks these). */
  title: string;
  text: string;
  keywords: string[];
  index: Map<string, number>;
  dense: Float64Array; // n × D
  spOff: Int32Array; // n + 1
  spIdx: Int32Array;
  version: number;
  scores: Float64Array;
}

export interface SampleResult {
  keywords: string[];
  logProb: number;
}

export interface SftExample {
  input: GenerateInput;
  target: string[];
}
export interface SftOptions {
  epochs?: number;
  lr?: number;
  seed?: number;
  batchSize?: number;
}
export interface SftReport {
  /** Mean negative log-likelihood per example, per epoch. */
  epochLoss: number[];
  /** Share of target keywords found among the candidates. */
  coverage: number;
}

export interface GrpoSample {
  input: GenerateInput;
  keywords: string[];
  oldLogProb: number;
  advantage: number;
}
export interface GrpoOptions {
  clip?: number;
  klCoef?: number;
  reference?: EmbeddedPolicy;
  lr?: number;
  temperature?: number;
  /** Gradient steps over the batch (the first is on-policy when oldLogProb is current). */
  steps?: number;
}
export interface GrpoStats {
  objective: number;
  meanRatio: number;
  clipFraction: number;
  kl: number;
  skipped: number;
}

/** Initial dense weights: the untrained candidate ranking (the base generator for SFT). */
function initialDense(side: Side): Float64Array {
  const w = new Float64Array(D);
  if (side === 'item') {
    w[DI.idf] = 2;
    w[DI.logTf] = 1;
    w[DI.inTitle] = 0.7;
    w[DI.self] = 0.5;
    w[DI.len2] = 0.3;
    w[DI.firstPos] = -0.5;
    w[DI.oppDf] = 0.5;
  } else {
    w[DI.share] = 3;
    w[DI.support] = 1;
    w[DI.prec] = 1;
    w[DI.precSq] = 1;
    w[DI.inOpp] = 1;
    w[DI.ngram] = 0.5;
    w[DI.overlap] = 0.5;
    w[DI.oppDf] = -0.5;
    w[DI.assoc] = 2;
    w[DI.self] = 0.5;
  }
  return w;
}

export class EmbeddedPolicy implements KeywordGenerator {
  readonly kind = 'embedded';
  readonly side: Side;
  readonly config: PolicyConfig;
  private w: Float64Array;
  private g2: Float64Array;
  private size: number;
  private readonly ids = new Map<string, number>();
  private keys: string[] = [];
  private version = 0;
  private opposite: OppositeIndex | null = null;
  private stats: WordStats | null = null;
  private assoc: Associations | null = null;
  private cache = new Map<string, CandidateSet>();
  private grad: Float64Array;
  private touched: number[] = [];
  private mark: Uint8Array;
  /** Gradients of parameters below this index are not accumulated (GRPO with grpoParams 'sparse'). */
  private gradFrom = 0;

  constructor(side: Side, config: Partial<PolicyConfig> = {}) {
    this.side = side;
    this.config = {
      ...DEFAULT_CANDIDATES,
      kMax: K_MAX,
      l2: 1e-4,
      keywordFeatures: true,
      pairFeatures: true,
      greedyStop: 'argmax',
      grpoParams: side === 'item' ? 'sparse' : 'all',
      ...config,
    };
    if (!Number.isInteger(this.config.kMax) || this.config.kMax < 1) throw cogrError('INVALID_ARGUMENT', `kMax must be a positive integer, got ${this.config.kMax}`);
    const cap = 1024;
    this.w = new Float64Array(cap);
    this.g2 = new Float64Array(cap);
    this.grad = new Float64Array(cap);
    this.mark = new Uint8Array(cap);
    this.w.set(initialDense(side));
    this.w[STOP_B] = side === 'item' ? 1.5 : 2;
    this.w[STOP_A] = 1;
    this.size = SPARSE0;
    this.keys = new Array(SPARSE0).fill('');
  }

  // ---------- parameters ----------
  private featureId(key: string): number {
    let id = this.ids.get(key);
    if (id !== undefined) return id;
    id = this.size++;
    if (id >= this.w.length) {
      const grow = (a: Float64Array) => {
        const b = new Float64Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.w = grow(this.w);
      this.g2 = grow(this.g2);
      this.grad = grow(this.grad);
      const m = new Uint8Array(this.w.length);
      m.set(this.mark);
      this.mark = m;
    }
    this.ids.set(key, id);
    this.keys.push(key);
    return id;
  }
  /** Number of parameters (dense + stop + sparse). */
  get parameterCount(): number {
    return this.size;
  }
  /** A copy of the dense weights by feature name (for inspection). */
  denseWeights(): Record<string, number> {
    const out: Record<string, number> = {};
    DENSE.forEach((n, i) => (out[n] = this.w[i]));
    out.stopBias = this.w[STOP_B];
    out.stopSlope = this.w[STOP_A];
    return out;
  }

  // ---------- context ----------
  /** Attach the opposite side's frozen view (or detach with null); clears the candidate cache. */
  attachOpposite(view: KeywordView | null): void {
    this.opposite = view ? new OppositeIndex(view) : null;
    this.cache.clear();
  }
  /** Fit the word statistics (idf feature) on this side's inputs; clears the candidate cache. */
  fitStats(inputs: readonly GenerateInput[]): void {
    const df = new Map<string, number>();
    for (const x of inputs) {
      const { title, text } = inputWords(this.side, x);
      for (const w of new Set([...title, ...text])) df.set(w, (df.get(w) ?? 0) + 1);
    }
    this.stats = { n: inputs.length, df };
    this.cache.clear();
  }
  /**
   * Learn word → keyword associations from (input, target) pairs (query side):
   * P(k ∈ target | w ∈ input) over examples, kept when the pair occurs ≥ minCount times.
   */
  fitAssociations(examples: readonly SftExample[], minCount = 2, perWord = 10): void {
    const cw = new Map<string, number>();
    const cwk = new Map<string, Map<string, number>>();
    for (const ex of examples) {
      const words = new Set(inputWords(this.side, ex.input).text.filter((w) => !STOP_WORDS.has(w)));
      for (const w of words) {
        cw.set(w, (cw.get(w) ?? 0) + 1);
        let m = cwk.get(w);
        if (!m) cwk.set(w, (m = new Map()));
        for (const k of ex.target) m.set(k, (m.get(k) ?? 0) + 1);
      }
    }
    const assoc: Associations = new Map();
    for (const [w, m] of cwk) {
      const n = cw.get(w)!;
      const list = [...m.entries()]
        .filter(([, c]) => c >= minCount)
        .map(([k, c]) => [k, c / n] as [string, number])
        .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
        .slice(0, perWord);
      if (list.length) assoc.set(w, list);
    }
    this.assoc = assoc;
    this.cache.clear();
  }

  /** Drop the cached candidate sets and features (they are rebuilt on demand). */
  clearCache(): void {
    this.cache.clear();
  }

  /**
   * Cached by input id; a hit also needs the same title and text (usually the very same
   * string objects, so the comparison is a pointer check rather than hashing the text).
   */
  private candidates(input: GenerateInput): CandidateSet {
    const key = input.id;
    const title = input.title ?? '';
    let cs = this.cache.get(key);
    if (cs && cs.text === input.text && cs.title === title) return cs;
    const raw = extractCandidates(this.side, input, this.config, this.stats, this.opposite, this.assoc);
    const n = raw.length;
    const dense = new Float64Array(n * D);
    const spOff = new Int32Array(n + 1);
    const sp: number[] = [];
    const pairWords = this.side === 'query' ? [...new Set(inputWords(this.side, input).text)].filter((w) => !STOP_WORDS.has(w)) : [];
    const index = new Map<string, number>();
    for (let c = 0; c < n; c++) {
      dense.set(raw[c].dense, c * D);
      index.set(raw[c].keyword, c);
      spOff[c] = sp.length;
      if (this.config.keywordFeatures) sp.push(this.featureId('k\u0001' + raw[c].keyword));
      if (this.config.pairFeatures) for (const w of pairWords) sp.push(this.featureId('p\u0001' + w + '\u0001' + raw[c].keyword));
    }
    spOff[n] = sp.length;
    cs = { title, text: input.text, keywords: raw.map((r) => r.keyword), index, dense, spOff, spIdx: Int32Array.from(sp), version: -1, scores: new Float64Array(n) };
    if (this.cache.size >= 200_000) this.cache.clear();
    this.cache.set(key, cs);
    return cs;
  }

  private scores(cs: CandidateSet): Float64Array {
    if (cs.version === this.version) return cs.scores;
    const w = this.w;
    const n = cs.keywords.length;
    for (let c = 0; c < n; c++) {
      let s = 0;
      const o = c * D;
      for (let d = 0; d < D; d++) s += w[d] * cs.dense[o + d];
      for (let j = cs.spOff[c]; j < cs.spOff[c + 1]; j++) s += w[cs.spIdx[j]];
      cs.scores[c] = s;
    }
    cs.version = this.version;
    return cs.scores;
  }

  private stopScore(t: number): number {
    return this.w[STOP_B] + (this.w[STOP_A] * t) / 10;
  }

  /** The candidate keywords of an input (cached). */
  candidateKeywords(input: GenerateInput): string[] {
    return [...this.candidates(input).keywords];
  }

  // ---------- sampling ----------
  /**
   * Sample an ordered keyword set. temperature 0 is greedy (argmax at each step, STOP
   * included); its logProb is then reported at temperature 1.
   */
  sample(input: GenerateInput, opts: { temperature?: number; rng: Rng; kMax?: number }): SampleResult {
    const T = opts.temperature ?? 1;
    const kMax = Math.min(opts.kMax ?? this.config.kMax, this.config.kMax);
    const cs = this.candidates(input);
    const s = this.scores(cs);
    const n = s.length;
    if (T <= 0) {
      const seq = this.greedyIdx(s, kMax);
      return { keywords: seq.map((c) => cs.keywords[c]), logProb: this.seqLogProb(cs, seq, 1, kMax) };
    }
    let M = Math.max(this.stopScore(0), this.stopScore(kMax));
    for (let c = 0; c < n; c++) if (s[c] > M) M = s[c];
    const u = new Float64Array(n);
    let rem = 0;
    for (let c = 0; c < n; c++) rem += u[c] = Math.exp((s[c] - M) / T);
    const chosen: number[] = [];
    let logProb = 0;
    for (let t = 0; t < kMax; t++) {
      const us = Math.exp((this.stopScore(t) - M) / T);
      const total = rem + us;
      let r = opts.rng() * total;
      let pick = -1;
      for (let c = 0; c < n; c++) {
        if (u[c] === 0) continue;
        r -= u[c];
        if (r < 0) {
          pick = c;
          break;
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
    return { keywords: chosen.map((c) => cs.keywords[c]), logProb };
  }

  /**
   * Greedy decoding of the two decisions each step makes: continue while P(continue) =
   * Σ_remaining P(c) is at least P(STOP) (config.greedyStop 'mass'), or only while the
   * single best candidate beats STOP ('argmax', the plain argmax over the step's choices,
   * which stops early when the mass is spread over many candidates); then take the best
   * remaining candidate.
   */
  private greedyIdx(s: Float64Array, kMax: number): number[] {
    const order = Array.from(s.keys()).sort((a, b) => s[b] - s[a] || a - b);
    const out: number[] = [];
    const mass = this.config.greedyStop === 'mass';
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
      if (cont < this.stopScore(t)) break;
      out.push(order[t]);
    }
    return out;
  }

  /** Decoding for indexing and evaluation: the index decoding temperature (0.7) by default; `greedy` for a deterministic set. */
  decode(input: GenerateInput, opts: { temperature?: number; rng?: Rng; greedy?: boolean } = {}): SampleResult {
    if (opts.greedy || !opts.rng) return this.sample(input, { temperature: 0, rng: () => 0 });
    return this.sample(input, { temperature: opts.temperature ?? DEFAULTS.decoding.index.temperature, rng: opts.rng });
  }

  /** The top-m candidates by score (no stop): the deterministic candidate ranking. */
  rank(input: GenerateInput, m: number): string[] {
    const cs = this.candidates(input);
    const s = this.scores(cs);
    return Array.from(s.keys())
      .sort((a, b) => s[b] - s[a] || (cs.keywords[a] < cs.keywords[b] ? -1 : 1))
      .slice(0, m)
      .map((c) => cs.keywords[c]);
  }

  private toIdx(cs: CandidateSet, keywords: readonly string[]): number[] | null {
    const seen = new Set<number>();
    const out: number[] = [];
    for (const raw of keywords) {
      const k = normalizeKeyword(raw);
      const c = k === null ? undefined : cs.index.get(k);
      if (c === undefined) return null;
      if (!seen.has(c)) {
        seen.add(c);
        out.push(c);
      }
    }
    return out;
  }

  private seqLogProb(cs: CandidateSet, seq: readonly number[], T: number, kMax: number): number {
    return this.stepProbs(cs, seq, T, kMax, null, 0);
  }

  /**
   * log p(seq) at temperature T; when `grad` is set, adds coef · ∇ log p into the gradient
   * buffer. ∇ log p = (1/T) Σ_t [φ(chosen_t) − Σ_j p_t(j) φ(j)], STOP's features being
   * (1, t/10) on the stop weights.
   */
  private stepProbs(cs: CandidateSet, seq: readonly number[], T: number, kMax: number, grad: Float64Array | null, coef: number): number {
    const s = this.scores(cs);
    const n = s.length;
    let M = Math.max(this.stopScore(0), this.stopScore(kMax));
    for (let c = 0; c < n; c++) if (s[c] > M) M = s[c];
    const u = new Float64Array(n);
    let rem = 0;
    for (let c = 0; c < n; c++) rem += u[c] = Math.exp((s[c] - M) / T);
    const expect = grad ? new Float64Array(n) : null;
    let eStopB = 0;
    let eStopA = 0;
    let logp = 0;
    const steps = Math.min(seq.length + 1, kMax);
    for (let t = 0; t < steps; t++) {
      const us = Math.exp((this.stopScore(t) - M) / T);
      const total = rem + us;
      const isStop = t === seq.length;
      const c = isStop ? -1 : seq[t];
      logp += Math.log((isStop ? us : u[c]) / total);
      if (expect) {
        for (let j = 0; j < n; j++) if (u[j] > 0) expect[j] += u[j] / total;
        eStopB += us / total;
        eStopA += ((us / total) * t) / 10;
        if (isStop) {
          this.addGrad(STOP_B, coef / T);
          this.addGrad(STOP_A, (coef / T) * (t / 10));
        } else this.addCandGrad(cs, c, coef / T);
      }
      if (!isStop) {
        rem -= u[c];
        u[c] = 0;
        rem = 0;
        for (let j = 0; j < n; j++) rem += u[j];
      }
    }
    if (expect) {
      for (let j = 0; j < n; j++) if (expect[j] > 0) this.addCandGrad(cs, j, (-coef / T) * expect[j]);
      this.addGrad(STOP_B, (-coef / T) * eStopB);
      this.addGrad(STOP_A, (-coef / T) * eStopA);
    }
    return logp;
  }

  private addGrad(i: number, v: number): void {
    if (i < this.gradFrom) return;
    if (!this.mark[i]) {
      this.mark[i] = 1;
      this.touched.push(i);
    }
    this.grad[i] += v;
  }
  private addCandGrad(cs: CandidateSet, c: number, v: number): void {
    const o = c * D;
    if (this.gradFrom === 0) for (let d = 0; d < D; d++) if (cs.dense[o + d] !== 0) this.addGrad(d, v * cs.dense[o + d]);
    for (let j = cs.spOff[c]; j < cs.spOff[c + 1]; j++) this.addGrad(cs.spIdx[j], v);
  }

  /** Adagrad ascent step on the accumulated gradient (minus L2), then clear it; `from`: first parameter that may change. */
  private step(lr: number, from = 0): void {
    const l2 = this.config.l2;
    for (const i of this.touched) {
      if (i < from) {
        this.grad[i] = 0;
        this.mark[i] = 0;
        continue;
      }
      const g = this.grad[i] - l2 * this.w[i];
      this.g2[i] += g * g;
      this.w[i] += (lr * g) / (Math.sqrt(this.g2[i]) + 1e-8);
      this.grad[i] = 0;
      this.mark[i] = 0;
    }
    this.touched = [];
    this.version++;
  }

  /** Exact log-probability of an ordered keyword sequence (−∞ when a keyword is not a candidate). */
  logProb(input: GenerateInput, keywords: readonly string[], temperature = 1): number {
    const cs = this.candidates(input);
    const seq = this.toIdx(cs, keywords);
    if (seq === null || seq.length > this.config.kMax) return -Infinity;
    return this.seqLogProb(cs, seq, temperature, this.config.kMax);
  }

  /**
   * ∇ log p(keywords | input) as a map from parameter name (dense feature name,
   * stopBias, stopSlope, or sparse key) to value; for tests and inspection.
   */
  gradLogProb(input: GenerateInput, keywords: readonly string[], temperature = 1): Map<string, number> {
    const cs = this.candidates(input);
    const seq = this.toIdx(cs, keywords);
    if (seq === null) throw cogrError('INVALID_ARGUMENT', 'a keyword is not among the candidates');
    this.stepProbs(cs, seq, temperature, this.config.kMax, this.grad, 1);
    const out = new Map<string, number>();
    for (const i of this.touched) {
      out.set(this.paramName(i), this.grad[i]);
      this.grad[i] = 0;
      this.mark[i] = 0;
    }
    this.touched = [];
    return out;
  }
  private paramName(i: number): string {
    return i < D ? DENSE[i] : i === STOP_B ? 'stopBias' : i === STOP_A ? 'stopSlope' : this.keys[i];
  }
  /** Read or set one parameter by name (tests: finite differences). */
  getParam(name: string): number {
    const i = this.paramIndex(name);
    return i < 0 ? 0 : this.w[i];
  }
  setParam(name: string, value: number): void {
    const i = this.paramIndex(name);
    if (i < 0) throw cogrError('NOT_FOUND', `no parameter ${name}`);
    this.w[i] = value;
    this.version++;
  }
  private paramIndex(name: string): number {
    const d = (DENSE as readonly string[]).indexOf(name);
    if (d >= 0) return d;
    if (name === 'stopBias') return STOP_B;
    if (name === 'stopSlope') return STOP_A;
    return this.ids.get(name) ?? -1;
  }

  // ---------- training ----------
  /** Maximum likelihood on ordered targets (targets outside the candidates are dropped). */
  trainSft(examples: readonly SftExample[], opts: SftOptions = {}): SftReport {
    const epochs = opts.epochs ?? 5;
    const lr = opts.lr ?? 0.1;
    const bs = opts.batchSize ?? 16;
    const rng = createRng(opts.seed ?? 0);
    let total = 0;
    let found = 0;
    const prepared: { cs: CandidateSet; seq: number[] }[] = [];
    for (const ex of examples) {
      const cs = this.candidates(ex.input);
      const seq: number[] = [];
      const seen = new Set<number>();
      for (const raw of ex.target) {
        total++;
        const k = normalizeKeyword(raw);
        const c = k === null ? undefined : cs.index.get(k);
        if (c === undefined || seen.has(c)) continue;
        found++;
        seen.add(c);
        if (seq.length < this.config.kMax) seq.push(c);
      }
      prepared.push({ cs, seq });
    }
    const epochLoss: number[] = [];
    for (let e = 0; e < epochs; e++) {
      let loss = 0;
      const order = shuffle(
        prepared.map((_, i) => i),
        rng,
      );
      for (let b = 0; b < order.length; b += bs) {
        const batch = order.slice(b, b + bs);
        for (const i of batch) {
          const { cs, seq } = prepared[i];
          loss -= this.stepProbs(cs, seq, 1, this.config.kMax, this.grad, 1 / batch.length);
        }
        this.step(lr);
      }
      epochLoss.push(prepared.length ? loss / prepared.length : 0);
    }
    return { epochLoss, coverage: total ? found / total : 1 };
  }

  /**
   * One GRPO update: maximise mean_i [min(ρ_i A_i, clip(ρ_i, 1−ε, 1+ε) A_i) − β·KL_i],
   * ρ_i = exp(log p_new − oldLogProb), KL_i the k3 estimate exp(r−l) − (r−l) − 1 with r the
   * reference log-probability. Samples with a non-finite log-probability are skipped.
   */
  grpoUpdate(batch: readonly GrpoSample[], opts: GrpoOptions = {}): GrpoStats {
    const eps = opts.clip ?? 0.2;
    const beta = opts.klCoef ?? 0;
    const lr = opts.lr ?? 0.05;
    const T = opts.temperature ?? 1;
    const steps = opts.steps ?? 1;
    const kMax = this.config.kMax;
    const prepared = batch.map((b) => {
      const cs = this.candidates(b.input);
      const seq = this.toIdx(cs, b.keywords);
      const ref = beta > 0 && opts.reference ? opts.reference.logProb(b.input, b.keywords, T) : null;
      return { b, cs, seq, ref };
    });
    const stats: GrpoStats = { objective: 0, meanRatio: 0, clipFraction: 0, kl: 0, skipped: 0 };
    this.gradFrom = this.config.grpoParams === 'sparse' ? SPARSE0 : 0;
    try {
      for (let it = 0; it < steps; it++) {
        let obj = 0;
        let ratioSum = 0;
        let clipped = 0;
        let kl = 0;
        let used = 0;
        let skipped = 0;
        for (const p of prepared) {
          if (p.seq === null || !Number.isFinite(p.b.oldLogProb)) {
            skipped++;
            continue;
          }
          const l = this.seqLogProb(p.cs, p.seq, T, kMax);
          const ratio = Math.exp(l - p.b.oldLogProb);
          const A = p.b.advantage;
          const clippedRatio = Math.min(Math.max(ratio, 1 - eps), 1 + eps);
          const isClipped = A * clippedRatio < A * ratio;
          let coef = isClipped ? 0 : A * ratio;
          obj += Math.min(ratio * A, clippedRatio * A);
          if (isClipped) clipped++;
          if (beta > 0 && p.ref !== null && Number.isFinite(p.ref)) {
            const d = p.ref - l;
            kl += Math.exp(d) - d - 1;
            coef += beta * (Math.exp(d) - 1);
          }
          ratioSum += ratio;
          used++;
          if (coef !== 0) this.stepProbs(p.cs, p.seq, T, kMax, this.grad, coef / batch.length);
        }
        this.step(lr, this.gradFrom);
        if (it === 0) {
          const u = Math.max(1, used);
          Object.assign(stats, { objective: obj / u, meanRatio: ratioSum / u, clipFraction: clipped / u, kl: kl / u, skipped });
        }
      }
    } finally {
      this.gradFrom = 0;
    }
    return stats;
  }

  // ---------- KeywordGenerator ----------
  async generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]> {
    if (side !== this.side) throw cogrError('INVALID_ARGUMENT', `this embedded policy generates ${this.side} keywords, not ${side}`);
    if (!Number.isInteger(opts.samples) || opts.samples < 1) throw cogrError('INVALID_ARGUMENT', `samples must be a positive integer, got ${opts.samples}`);
    const seed = opts.seed ?? 0;
    return inputs.map((input) => {
      if (opts.signal?.aborted) throw cogrError('ABORTED', 'generation cancelled');
      const out: KeywordSample[] = [];
      for (let s = 0; s < opts.samples; s++) {
        const r = this.sample(input, { temperature: opts.temperature, rng: createRng(deriveSeed(seed, input.id, s)) });
        out.push({ keywords: r.keywords, logProb: r.logProb, format: 'ok' });
      }
      return out;
    });
  }

  // ---------- persistence ----------
  toJSON(): PolicyJSON {
    const sparse: [string, number][] = [];
    for (let i = SPARSE0; i < this.size; i++) if (this.w[i] !== 0) sparse.push([this.keys[i], this.w[i]]);
    return {
      format: POLICY_FORMAT,
      version: POLICY_VERSION,
      side: this.side,
      config: { ...this.config },
      dense: Array.from(this.w.subarray(0, D)),
      stop: [this.w[STOP_B], this.w[STOP_A]],
      sparse,
      stats: this.stats ? { n: this.stats.n, df: [...this.stats.df.entries()] } : null,
      assoc: this.assoc ? [...this.assoc.entries()] : [],
    };
  }

  static fromJSON(json: unknown): EmbeddedPolicy {
    const j = json as Partial<PolicyJSON> | null;
    if (!j || typeof j !== 'object' || j.format !== POLICY_FORMAT) throw cogrError('DATA_FORMAT', `not an embedded policy (format field is not "${POLICY_FORMAT}")`);
    if (j.version !== POLICY_VERSION)
      throw cogrError('DB_VERSION', `embedded policy has format version ${String(j.version)}; this cogr reads version ${POLICY_VERSION} only (retrain with cogr sft)`);
    if ((j.side !== 'item' && j.side !== 'query') || !Array.isArray(j.dense) || j.dense.length !== D || !Array.isArray(j.sparse) || !Array.isArray(j.stop))
      throw cogrError('DATA_FORMAT', 'embedded policy JSON is malformed (side, dense, stop or sparse)');
    const p = new EmbeddedPolicy(j.side, j.config ?? {});
    p.w.set(j.dense, 0);
    p.w[STOP_B] = j.stop[0];
    p.w[STOP_A] = j.stop[1];
    for (const [k, v] of j.sparse) p.w[p.featureId(k)] = v;
    if (j.stats) p.stats = { n: j.stats.n, df: new Map(j.stats.df) };
    if (j.assoc && j.assoc.length) p.assoc = new Map(j.assoc);
    return p;
  }

  /** An independent copy (e.g. the frozen SFT reference for the KL term). */
  clone(): EmbeddedPolicy {
    const p = EmbeddedPolicy.fromJSON(this.toJSON());
    if (this.opposite) p.opposite = this.opposite;
    return p;
  }
}
