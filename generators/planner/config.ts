/**
 * What defines a query planner: its configuration (`PlannerConfig`, defaults from
 * index/core/defaults.ts) and what it needs of a relevance model (`RelevanceSource`:
 * relevance.ts is one; tests inject fixed probabilities).
 */
import type { Analyzer } from '../../index/text/analyzer.ts';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';

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
  /**
   * In one pass: p = `probabilities(query, features(query))` and column `textScoreColumn` of
   * `features(query)` per item, bit for bit, without the dense features (relevance.ts;
   * absent: those expressions).
   */
  queryScores?(query: { id: string; text: string }): { p: Float64Array; text: Float64Array };
  getWeights(): Float64Array;
  setWeights(w: ArrayLike<number>): void;
  /** idf of an analysed word over the items' text. */
  wordIdf(word: string): number;
  /** The items (the source's ordinals, ascending) whose text holds an analysed word, and how many items there are (relatedness, related.ts). */
  wordItems?(word: string): Int32Array;
  readonly size?: number;
  /** The embeddings model whose vectors are registered for it (relevance.ts registerDenseVectors), or null/absent: none (keywordCosine). */
  readonly embeddingsModel?: string | null;
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
  /**
   * The shared vocabulary's rules for the planned keywords (generators/policy/vocabulary.ts):
   * a candidate must be carried by at least this many items (0: any, as planners saved before
   * it), so a query keyword names a group of items, never one.
   */
  minCarriers: number;
  /**
   * A candidate must be related to the query (related.ts): share an analysed word with it, or
   * co-occur with one of its words in the items' texts with NPMI at least this (null: any
   * keyword, as planners saved before it).
   */
  relatedness: number | null;
  /**
   * A candidate's least cosine to the query under the relevance model's embeddings model
   * (its vectors registered in this thread, relevance.ts DenseVectors, fetching the keywords'
   * on demand): "related to what the query asks" as the encoder reads the two texts; null: no
   * such rule (planners saved before it, runs without embeddings).
   */
  keywordCosine: number | null;
  /**
   * The embeddings model whose vectors `keywordCosine` reads (registered in this thread, as
   * the relevance model's are); null: the relevance model's own (planners saved before this
   * field). A run whose encoder is a judge only (`--embeddings-features no`) names it here
   * while its relevance model has none.
   */
  keywordModel: string | null;
  /** A query over the keyword limits starts its keywords with its label (its highest-idf words), which items can adopt (planners saved before the shared vocabulary); off: no label. */
  labels: boolean;
  /** A query whose text holds an item's title (2+ words) starts its keywords with that title, so a query naming an item finds it (the shared vocabulary; off for planners saved before it). */
  names: boolean;
}

/** The planner's defaults, from index/core/defaults.ts (`DEFAULTS.planner`, K_max). */
/**
 * The planner's defaults, from index/core/defaults.ts (`DEFAULTS.planner`, K_max). The shared
 * vocabulary's rules are off here — a saved planner without them plans as it did — and a run
 * sets them (src/run/config.ts `vocabulary`).
 */
export const DEFAULT_PLANNER: PlannerConfig = (({ topItems, lambda, epsilon, grpoParams, l2, cacheBytes, maxCandidates }) => ({
  topItems,
  maxKeywords: K_MAX,
  lambda,
  epsilon,
  grpoParams,
  l2,
  cacheBytes,
  maxCandidates,
  minCarriers: 0,
  relatedness: null,
  keywordCosine: null,
  keywordModel: null,
  labels: true,
  names: false,
}))(DEFAULTS.planner);
