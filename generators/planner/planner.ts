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
import { cogrError } from '../../index/core/errors.ts';
import type { Side } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { GenerateInput, GenerateOptions, KeywordGenerator, KeywordSample } from '../types.ts';
import { drawSamples } from '../samples.ts';
import { DEFAULT_PLANNER, type PlannerConfig, type RelevanceSource } from './config.ts';
import { PlannerGrad } from './gradients.ts';
import { PlannerParams } from './params.ts';
import { runPlan, type PlanOptions, type PlanParts, type PlanResult } from './plan.ts';
import { PlannerContexts, queryLabel, topByP } from './queryContext.ts';
import { RelevanceModel, type RelevanceItem } from './relevance.ts';
import { plannerToJSON, readPlannerJSON, setParams, type PlannerJSON } from './serialize.ts';
import { alphaCurves, grpoUpdate, tuneAlpha, type PlannerGrpoSample } from './training.ts';

/**
 * The planner: the public face over its parts — configuration and relevance model
 * (config.ts), parameters (params.ts), the attached view and per-query contexts
 * (queryContext.ts), one plan (plan.ts, step by step in step.ts, gradients.ts), training
 * (training.ts) and JSON (serialize.ts).
 */
export class KeywordPlanner implements KeywordGenerator {
  readonly kind = 'planner';
  readonly side: Side = 'query';
  readonly config: PlannerConfig;
  readonly relevance: RelevanceSource;
  /** Plan every query of `generate()` as held out (rollouts of training queries for external trainers). */
  leaveOneOut = false;
  private readonly params: PlannerParams;
  private readonly contexts: PlannerContexts;
  private readonly parts: PlanParts;

  constructor(relevance: RelevanceSource, config: Partial<PlannerConfig> = {}) {
    this.relevance = relevance;
    this.config = { ...DEFAULT_PLANNER, ...config };
    this.params = new PlannerParams(this.config);
    this.contexts = new PlannerContexts(relevance, this.config);
    this.parts = { config: this.config, relevance, params: this.params, contexts: this.contexts };
  }

  /** α of G = 2Σp/(|U| + αE). */
  get alpha(): number {
    return this.params.alpha;
  }
  set alpha(value: number) {
    this.params.alpha = value;
  }
  /** θ_stop. */
  get stopBias(): number {
    return this.params.stopBias;
  }
  set stopBias(value: number) {
    this.params.stopBias = value;
  }

  /** Attach the frozen item index the planner plans against (clears per-query candidates). */
  attachOpposite(view: KeywordView | null): void {
    this.contexts.attach(view);
  }
  get attached(): KeywordView | null {
    return this.contexts.view;
  }

  /** p(item relevant | query) over the attached view's ordinals (a training query's own judgements left out). */
  probabilities(input: GenerateInput): Float64Array {
    return this.contexts.probabilities(input);
  }

  /** The query's text BM25 over each item's title and description, normalised by the best item, over the attached view's ordinals (queryContext.ts). */
  textScores(input: GenerateInput): Float64Array {
    return this.contexts.textScores(input);
  }

  /** Drop cached per-query features, probabilities and candidates. */
  clearCache(): void {
    this.contexts.clear();
  }

  /** The query's label: null when its own string is within the keyword limits, else its 8 highest-idf content words in order. */
  label(text: string): string | null {
    return this.config.labels ? queryLabel(this.relevance, text) : null;
  }

  /**
   * The "+ search results" context of an LLM query prompt: the ids of the `items` most
   * probable items for the query (p descending, ties by ordinal) and the keywords of its
   * greedy plan (the index keywords that retrieve them).
   */
  searchContext(input: GenerateInput, items: number): { itemIds: string[]; keywords: string[] } {
    const view = this.contexts.requireView();
    const order = topByP(this.probabilities(input), items);
    return { itemIds: order.map((o) => view.id(o)), keywords: this.plan(input).keywords };
  }

  /** Before planning these queries one by one: their candidates' encoder vectors in one call (queryContext.ts prefetchKeywordVectors; nothing without the encoder's rule). */
  prefetch(inputs: readonly GenerateInput[]): void {
    this.contexts.prefetchKeywordVectors(inputs);
  }

  /** Plan one query (greedy unless a temperature and rng are given). */
  plan(input: GenerateInput, opts: PlanOptions = {}): PlanResult {
    return runPlan(this.parts, input, opts);
  }

  /** Exact log π(keywords | query) at temperature τ (−∞ when the sequence cannot be produced). */
  logProb(input: GenerateInput, keywords: readonly string[], temperature = 1, asHeldOut = false): number {
    return runPlan(this.parts, input, { forced: keywords, temperature, asHeldOut }).logProb;
  }

  /** ∇ log π(keywords | query) (tests: finite differences). */
  gradLogProb(input: GenerateInput, keywords: readonly string[], temperature = 1, asHeldOut = false): PlannerGrad {
    const g = new PlannerGrad(this.relevance.dim);
    runPlan(this.parts, input, { forced: keywords, temperature, asHeldOut, grad: g, coef: 1 });
    return g;
  }

  /** θ of a keyword (by its match key). */
  term(keyword: string): number {
    const view = this.contexts.requireView();
    const o = this.contexts.ordinalOf(keyword);
    return o < 0 ? 0 : (this.params.terms.get(view.keyword(o)) ?? 0);
  }
  setTerm(keyword: string, value: number): void {
    const view = this.contexts.requireView();
    const o = this.contexts.ordinalOf(keyword);
    if (o < 0) throw cogrError('NOT_FOUND', `keyword ${JSON.stringify(keyword)} is not in the attached item index`);
    if (value === 0) this.params.terms.delete(view.keyword(o));
    else this.params.terms.set(view.keyword(o), value);
  }

  /** Tune α on training queries planned as held out (training.ts). */
  tuneAlpha(
    queries: readonly GenerateInput[],
    relevantOf: (id: string) => ReadonlySet<number>,
    grid?: readonly number[],
  ): { alpha: number; f1: number; curve: [number, number][] } {
    return tuneAlpha(this.parts, queries, relevantOf, grid);
  }

  /** Each query's F1 at every α of the grid, planned as held out; α unchanged (training.ts). */
  alphaCurves(
    queries: readonly GenerateInput[],
    relevantOf: (id: string) => ReadonlySet<number>,
    grid?: readonly number[],
  ): Float64Array[] {
    return alphaCurves(this.parts, queries, relevantOf, grid);
  }

  /** One GRPO step on the clipped surrogate (training.ts). */
  grpoUpdate(
    batch: readonly PlannerGrpoSample[],
    opts: { clip?: number; lr?: number; temperature?: number } = {},
  ): { objective: number; clipFraction: number; skipped: number } {
    return grpoUpdate(this.parts, batch, opts);
  }

  /** A planner with this one's configuration and parameters over another relevance model (no view attached). */
  withRelevance(relevance: RelevanceSource): KeywordPlanner {
    const p = new KeywordPlanner(relevance, this.config);
    setParams(p.params, plannerToJSON(this.config, this.params, null).params);
    return p;
  }

  // ---------- persistence ----------
  toJSON(): PlannerJSON {
    return plannerToJSON(this.config, this.params, this.relevance.toJSON());
  }

  /** A saved planner over the given items (their texts rebuild the relevance model's BM25 index). */
  static fromJSON(json: unknown, items: readonly RelevanceItem[], reuse?: RelevanceModel | null): KeywordPlanner {
    const j = readPlannerJSON(json);
    const p = new KeywordPlanner(RelevanceModel.fromJSON(j.relevance, items, reuse), j.config);
    setParams(p.params, j.params);
    return p;
  }

  // ---------- KeywordGenerator ----------
  async generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]> {
    if (side !== 'query') throw cogrError('INVALID_ARGUMENT', `the query planner generates query keywords, not ${side}`);
    this.prefetch(inputs);
    return drawSamples(inputs, opts, (input, rng) => {
      const r = runPlan(this.parts, input, { temperature: opts.temperature, rng, asHeldOut: this.leaveOneOut });
      return { keywords: r.keywords, logProb: Number.isNaN(r.logProb) ? null : r.logProb };
    });
  }
}
