/**
 * The embedded policy's parameters and its score.
 *
 *   s(c) = w_dense · φ(c) + θ_kw[c]
 *   stop score at step t = b_stop + a_stop · t / 10
 *
 * One weight vector holds the dense weights (DENSE order), the two stop weights and the
 * sparse weights, each sparse feature named by a key ("k␁<kw>") and
 * numbered on first use. Training accumulates a gradient into a buffer (only the touched
 * entries) and takes Adagrad ascent steps with a small L2; `version` changes with every
 * step so that cached candidate scores are recomputed.
 */
import { cogrError } from '../../index/core/errors.ts';
import { normalizeKeyword } from '../../index/text/normalize.ts';
import { D, DENSE, DI, type CandidateConfig } from './candidates.ts';

export interface PolicyConfig extends CandidateConfig {
  kMax: number;
  l2: number;
  /** Sparse per-keyword features θ_kw[c]. */
  keywordFeatures: boolean;
  /** Greedy decoding's stop rule (see greedySequence in sampling.ts): 'mass' or 'argmax'. */
  greedyStop: 'mass' | 'argmax';
  /**
   * Parameters a GRPO update may change: 'all'; 'sparse' (the per-keyword weights only;
   * dense and stop weights keep their SFT values); 'sparse+query' (also the dense weights
   * of the query-side features); or 'query' (only those four dense weights). Default
   * 'query': the reward sees only training queries, so per-keyword or shared text weights
   * would tune every item's own keywords to the training queries' current plans
   * (measured: held-out F1 fell on MED and NFCorpus), while the query-side weights decide
   * only which offered keywords an item adopts.
   */
  grpoParams: 'all' | 'sparse' | 'sparse+query' | 'query';
}

export const STOP_B = D;
export const STOP_A = D + 1;
/** Index of the first sparse weight. */
export const SPARSE0 = D + 2;

/** A cached candidate set of one input with its features (built in model.ts). */
export interface CandidateSet {
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

/**
 * Candidate indices of an ordered keyword list (duplicates after normalisation kept
 * once), or null when a keyword is not a candidate (probability 0).
 */
export function sequenceOf(cs: CandidateSet, keywords: readonly string[]): number[] | null {
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

/** Initial dense weights: the untrained candidate ranking (the base generator for SFT). */
function initialDense(): Float64Array {
  const w = new Float64Array(D);
  w[DI.idf] = 2;
  w[DI.logTf] = 1;
  w[DI.inTitle] = 0.7;
  w[DI.self] = 0.5;
  w[DI.len2] = 0.3;
  w[DI.firstPos] = -0.5;
  w[DI.oppDf] = 0.5;
  return w;
}

function grow(a: Float64Array): Float64Array {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}

const NONE_TRAIN: ReadonlySet<number> = new Set();

export class PolicyParams {
  w: Float64Array;
  private g2: Float64Array;
  private grad: Float64Array;
  private mark: Uint8Array;
  private touched: number[] = [];
  private size = SPARSE0;
  private readonly ids = new Map<string, number>();
  private readonly keys: string[] = new Array(SPARSE0).fill('');
  /** Changes with every update: cached scores of an older version are stale. */
  version = 0;
  /** Gradients of parameters below this index are not accumulated (GRPO with grpoParams 'sparse'), except those in `alsoTrain`. */
  gradFrom = 0;
  /** Dense indices below `gradFrom` that still train (grpoParams 'sparse+query' and 'query': the query-side features). */
  alsoTrain: ReadonlySet<number> = NONE_TRAIN;

  constructor() {
    const cap = 1024;
    this.w = new Float64Array(cap);
    this.g2 = new Float64Array(cap);
    this.grad = new Float64Array(cap);
    this.mark = new Uint8Array(cap);
    this.w.set(initialDense());
    this.w[STOP_B] = 1.5;
    this.w[STOP_A] = 1;
  }

  /** The index of a sparse feature, numbered on first use. */
  featureId(key: string): number {
    let id = this.ids.get(key);
    if (id !== undefined) return id;
    id = this.size++;
    if (id >= this.w.length) {
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
  get count(): number {
    return this.size;
  }

  /** The non-zero sparse weights by key. */
  sparse(): [string, number][] {
    const out: [string, number][] = [];
    for (let i = SPARSE0; i < this.size; i++) if (this.w[i] !== 0) out.push([this.keys[i], this.w[i]]);
    return out;
  }

  /** A copy of the dense weights by feature name (for inspection). */
  denseWeights(): Record<string, number> {
    const out: Record<string, number> = {};
    DENSE.forEach((n, i) => (out[n] = this.w[i]));
    out.stopBias = this.w[STOP_B];
    out.stopSlope = this.w[STOP_A];
    return out;
  }

  /** The candidates' scores s(c) (cached in the set until the parameters change). */
  scores(cs: CandidateSet): Float64Array {
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

  stopScore(t: number): number {
    return this.w[STOP_B] + (this.w[STOP_A] * t) / 10;
  }

  addGrad(i: number, v: number): void {
    if (i < this.gradFrom && !this.alsoTrain.has(i)) return;
    if (!this.mark[i]) {
      this.mark[i] = 1;
      this.touched.push(i);
    }
    this.grad[i] += v;
  }

  /** Adds v · φ(c) (dense and sparse features of candidate c) to the gradient. */
  addCandGrad(cs: CandidateSet, c: number, v: number): void {
    const o = c * D;
    if (this.gradFrom === 0 || this.alsoTrain.size > 0)
      for (let d = 0; d < D; d++) if (cs.dense[o + d] !== 0) this.addGrad(d, v * cs.dense[o + d]);
    for (let j = cs.spOff[c]; j < cs.spOff[c + 1]; j++) this.addGrad(cs.spIdx[j], v);
  }

  /** Adagrad ascent step on the accumulated gradient (minus L2), then clear it; `from`: first parameter that may change. */
  step(lr: number, l2: number, from = 0): void {
    for (const i of this.touched) {
      if (i < from && !this.alsoTrain.has(i)) {
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

  /** The accumulated gradient by parameter name, clearing it (tests and inspection). */
  takeGradient(): Map<string, number> {
    const out = new Map<string, number>();
    for (const i of this.touched) {
      out.set(this.name(i), this.grad[i]);
      this.grad[i] = 0;
      this.mark[i] = 0;
    }
    this.touched = [];
    return out;
  }

  private name(i: number): string {
    return i < D ? DENSE[i] : i === STOP_B ? 'stopBias' : i === STOP_A ? 'stopSlope' : this.keys[i];
  }

  private index(name: string): number {
    const d = (DENSE as readonly string[]).indexOf(name);
    if (d >= 0) return d;
    if (name === 'stopBias') return STOP_B;
    if (name === 'stopSlope') return STOP_A;
    return this.ids.get(name) ?? -1;
  }

  /** One parameter by name (0 for an unknown sparse key). */
  get(name: string): number {
    const i = this.index(name);
    return i < 0 ? 0 : this.w[i];
  }

  set(name: string, value: number): void {
    const i = this.index(name);
    if (i < 0) throw cogrError('NOT_FOUND', `no parameter ${name}`);
    this.w[i] = value;
    this.version++;
  }
}
