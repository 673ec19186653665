/**
 * EmbeddedPolicy: a small trainable stochastic keyword policy for the item side, offline
 * (the query side is the query planner, generators/planner).
 *
 * The policy scores candidate keywords of its input with a log-linear model and samples
 * an ordered keyword set from them (Plackett–Luce without replacement with a stop
 * choice). One idea per module:
 *   candidates.ts  candidate keywords of an input and their dense features
 *   params.ts      the parameters and the score s(c); Adagrad steps
 *   sampling.ts    sampling, greedy decoding, exact sequence log-probabilities (and gradients)
 *   training.ts    SFT (maximum likelihood) and the GRPO clipped surrogate
 *   serialize.ts   the versioned JSON document
 * This module holds the policy's context (word statistics, the attached opposite view and
 * query side, the per-input candidate cache) and its public API, including
 * the KeywordGenerator interface.
 */
import { cogrError } from '../../index/core/errors.ts';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import type { Rng } from '../../index/core/random.ts';
import type { Side } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { GenerateInput, GenerateOptions, KeywordGenerator, KeywordSample } from '../types.ts';
import { drawSamples } from '../samples.ts';
import {
  D,
  DEFAULT_CANDIDATES,
  inputWords,
  textCandidates,
  withQuerySide,
  type QuerySide,
  type TextCandidates,
  type WordStats,
} from './candidates.ts';
import { OppositeIndex } from './opposite.ts';
import { PolicyParams, sequenceOf, type CandidateSet, type PolicyConfig } from './params.ts';
import { greedySequence, sampleSequence, sequenceLogProb } from './sampling.ts';
import { checkPolicyJSON, loadWeights, policyToJSON, statsFromJSON, type PolicyJSON } from './serialize.ts';
import { Vocabulary, type VocabularyOptions } from './vocabulary.ts';
import type { AnalyzerName } from '../../index/text/analyzer.ts';
import {
  grpoUpdate,
  trainSft,
  type GrpoOptions,
  type GrpoSample,
  type GrpoStats,
  type SftExample,
  type SftOptions,
  type SftReport,
} from './training.ts';

export type { PolicyConfig } from './params.ts';
export type { PolicyJSON } from './serialize.ts';
export type { GrpoOptions, GrpoSample, GrpoStats, SftExample, SftOptions, SftReport } from './training.ts';

export interface SampleResult {
  keywords: string[];
  logProb: number;
}

export class EmbeddedPolicy implements KeywordGenerator {
  readonly kind = 'embedded';
  readonly side: Side;
  readonly config: PolicyConfig;
  readonly params: PolicyParams;
  private opposite: OppositeIndex | null = null;
  private querySide: QuerySide | null = null;
  private stats: WordStats | null = null;
  private vocab: Vocabulary | null = null;
  private cache = new Map<string, CandidateSet>();
  /** Per input id, its candidates from its own text (candidates.ts textCandidates): kept when only the query side changes. */
  private textCache = new Map<string, { title: string; text: string; candidates: TextCandidates }>();

  constructor(side: Side, config: Partial<PolicyConfig> = {}) {
    if (side !== 'item')
      throw cogrError(
        'INVALID_ARGUMENT',
        `the embedded policy generates item keywords; query keywords come from the query planner (generators/planner), not a ${side} policy`,
      );
    this.side = side;
    this.config = {
      ...DEFAULT_CANDIDATES,
      kMax: K_MAX,
      l2: 1e-4,
      keywordFeatures: true,
      greedyStop: 'argmax',
      grpoParams: 'query',
      ...config,
    };
    if (!Number.isInteger(this.config.kMax) || this.config.kMax < 1)
      throw cogrError('INVALID_ARGUMENT', `kMax must be a positive integer, got ${this.config.kMax}`);
    this.params = new PolicyParams();
  }

  /** Number of parameters (dense + stop + sparse). */
  get parameterCount(): number {
    return this.params.count;
  }
  /** A copy of the dense weights by feature name (for inspection). */
  denseWeights(): Record<string, number> {
    return this.params.denseWeights();
  }

  // ---------- context ----------
  /** Attach the opposite side's frozen view (or detach with null); clears the candidate cache. */
  attachOpposite(view: KeywordView | null): void {
    this.opposite = view ? new OppositeIndex(view) : null;
    this.cache.clear();
    this.textCache.clear();
  }
  /**
   * Attach (or detach) what the item side may borrow from the frozen query side: the
   * keywords the query generation offers each item (candidates.ts QuerySide). Clears the
   * candidate cache; the candidates from the items' own texts are kept.
   */
  attachQuerySide(querySide: QuerySide | null): void {
    this.querySide = querySide;
    this.cache.clear();
  }
  /** Fit the word statistics (idf feature) on the items; clears the candidate cache. */
  fitStats(inputs: readonly GenerateInput[]): void {
    const df = new Map<string, number>();
    for (const x of inputs) {
      const { title, text } = inputWords(x);
      for (const w of new Set([...title, ...text])) df.set(w, (df.get(w) ?? 0) + 1);
    }
    this.stats = { n: inputs.length, df };
    this.cache.clear();
    this.textCache.clear();
  }
  /**
   * Fit the shared vocabulary on the items (vocabulary.ts): from now on the candidates are its
   * phrases only. Clears the candidate cache.
   */
  fitVocabulary(inputs: readonly GenerateInput[], analyzer: AnalyzerName, opts: Partial<VocabularyOptions> = {}): Vocabulary {
    this.vocab = Vocabulary.build(inputs, analyzer, opts);
    this.cache.clear();
    this.textCache.clear();
    return this.vocab;
  }
  /** The shared vocabulary the candidates are drawn from (null: open, every n-gram and the title, as runs stored before it). */
  get vocabulary(): Vocabulary | null {
    return this.vocab;
  }
  /** Drop the cached candidate sets and features (they are rebuilt on demand). */
  clearCache(): void {
    this.cache.clear();
    this.textCache.clear();
  }

  /**
   * Cached by input id; a hit also needs the same title and text (usually the very same
   * string objects, so the comparison is a pointer check rather than hashing the text).
   */
  candidateSet(input: GenerateInput): CandidateSet {
    const key = input.id;
    const title = input.title ?? '';
    let cs = this.cache.get(key);
    if (cs && cs.text === input.text && cs.title === title) return cs;
    let text = this.textCache.get(key);
    if (!text || text.text !== input.text || text.title !== title) {
      text = { title, text: input.text, candidates: textCandidates(input, this.config, this.stats, this.opposite, this.vocab) };
      if (this.textCache.size >= 200_000) this.textCache.clear();
      this.textCache.set(key, text);
    }
    const raw = withQuerySide(text.candidates, input, this.config, this.querySide, this.vocab);
    const n = raw.length;
    const dense = new Float64Array(n * D);
    const spOff = new Int32Array(n + 1);
    const sp: number[] = [];
    const index = new Map<string, number>();
    for (let c = 0; c < n; c++) {
      dense.set(raw[c].dense, c * D);
      index.set(raw[c].keyword, c);
      spOff[c] = sp.length;
      if (this.config.keywordFeatures) sp.push(this.params.featureId('k\u0001' + raw[c].keyword));
    }
    spOff[n] = sp.length;
    cs = {
      title,
      text: input.text,
      keywords: raw.map((r) => r.keyword),
      index,
      dense,
      spOff,
      spIdx: Int32Array.from(sp),
      version: -1,
      scores: new Float64Array(n),
    };
    if (this.cache.size >= 200_000) this.cache.clear();
    this.cache.set(key, cs);
    return cs;
  }

  /** The candidate keywords of an input (cached). */
  candidateKeywords(input: GenerateInput): string[] {
    return [...this.candidateSet(input).keywords];
  }

  // ---------- sampling ----------
  /**
   * Sample an ordered keyword set. temperature 0 is greedy (argmax at each step, STOP
   * included); its logProb is then reported at temperature 1. `topP` < 1 samples each
   * step from its nucleus (sampling.ts); logProb stays the untruncated policy's.
   */
  sample(input: GenerateInput, opts: { temperature?: number; rng: Rng; kMax?: number; topP?: number }): SampleResult {
    const T = opts.temperature ?? 1;
    const kMax = Math.min(opts.kMax ?? this.config.kMax, this.config.kMax);
    const cs = this.candidateSet(input);
    if (T <= 0) {
      const seq = greedySequence(this.params, this.params.scores(cs), kMax, this.config.greedyStop);
      return { keywords: seq.map((c) => cs.keywords[c]), logProb: sequenceLogProb(this.params, cs, seq, 1, kMax) };
    }
    const { seq, logProb } = sampleSequence(this.params, cs, T, kMax, opts.rng, opts.topP ?? 1);
    return { keywords: seq.map((c) => cs.keywords[c]), logProb };
  }

  /** Decoding for indexing and evaluation: the index decoding temperature (0.7) by default; `greedy` for a deterministic set. */
  decode(input: GenerateInput, opts: { temperature?: number; topP?: number; rng?: Rng; greedy?: boolean } = {}): SampleResult {
    if (opts.greedy || !opts.rng) return this.sample(input, { temperature: 0, rng: () => 0 });
    return this.sample(input, {
      temperature: opts.temperature ?? DEFAULTS.decoding.index.temperature,
      topP: opts.topP ?? 1,
      rng: opts.rng,
    });
  }

  /** The top-m candidates by score (no stop): the deterministic candidate ranking. */
  rank(input: GenerateInput, m: number): string[] {
    const cs = this.candidateSet(input);
    const s = this.params.scores(cs);
    return Array.from(s.keys())
      .sort((a, b) => s[b] - s[a] || (cs.keywords[a] < cs.keywords[b] ? -1 : 1))
      .slice(0, m)
      .map((c) => cs.keywords[c]);
  }

  /** Exact log-probability of an ordered keyword sequence (−∞ when a keyword is not a candidate). */
  logProb(input: GenerateInput, keywords: readonly string[], temperature = 1): number {
    const cs = this.candidateSet(input);
    const seq = sequenceOf(cs, keywords);
    if (seq === null || seq.length > this.config.kMax) return -Infinity;
    return sequenceLogProb(this.params, cs, seq, temperature, this.config.kMax);
  }

  /**
   * ∇ log p(keywords | input) as a map from parameter name (dense feature name,
   * stopBias, stopSlope, or sparse key) to value; for tests and inspection.
   */
  gradLogProb(input: GenerateInput, keywords: readonly string[], temperature = 1): Map<string, number> {
    const cs = this.candidateSet(input);
    const seq = sequenceOf(cs, keywords);
    if (seq === null) throw cogrError('INVALID_ARGUMENT', 'a keyword is not among the candidates');
    sequenceLogProb(this.params, cs, seq, temperature, this.config.kMax, true, 1);
    return this.params.takeGradient();
  }
  /** Read or set one parameter by name (tests: finite differences). */
  getParam(name: string): number {
    return this.params.get(name);
  }
  setParam(name: string, value: number): void {
    this.params.set(name, value);
  }

  // ---------- training ----------
  /** Maximum likelihood on ordered targets (targets outside the candidates are dropped). */
  trainSft(examples: readonly SftExample[], opts: SftOptions = {}): SftReport {
    return trainSft(this, examples, opts);
  }

  /** One GRPO update on a batch of samples with their advantages (training.ts). */
  grpoUpdate(batch: readonly GrpoSample[], opts: GrpoOptions = {}): GrpoStats {
    return grpoUpdate(this, batch, opts);
  }

  // ---------- KeywordGenerator ----------
  async generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]> {
    if (side !== this.side) throw cogrError('INVALID_ARGUMENT', `this embedded policy generates ${this.side} keywords, not ${side}`);
    return drawSamples(inputs, opts, (input, rng) => this.sample(input, { temperature: opts.temperature, topP: opts.topP ?? 1, rng }));
  }

  // ---------- persistence ----------
  toJSON(): PolicyJSON {
    return policyToJSON(this.side, this.config, this.params, this.stats, this.vocab);
  }

  static fromJSON(json: unknown): EmbeddedPolicy {
    const j = checkPolicyJSON(json);
    const p = new EmbeddedPolicy(j.side, j.config ?? {});
    loadWeights(p.params, j);
    p.stats = statsFromJSON(j);
    p.vocab = j.vocabulary ? Vocabulary.fromJSON(j.vocabulary) : null;
    return p;
  }

  /** An independent copy (e.g. the frozen SFT reference for the KL term). */
  clone(): EmbeddedPolicy {
    const p = EmbeddedPolicy.fromJSON(this.toJSON());
    if (this.opposite) p.opposite = this.opposite;
    return p;
  }
}
