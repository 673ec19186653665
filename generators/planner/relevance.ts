/**
 * The relevance model p(item | query) behind the query planner: a logistic regression
 * over features of (query, item) pairs, fitted on every (training query, item) pair
 * (no down-sampling of negatives: the planner sums these probabilities, so they must be
 * calibrated), L2-regularised (logistic.ts).
 *
 * Text features, from BM25 of the query text over the items' title + description
 * (textIndex.ts), s = the item's score, s_max = the best score for the query:
 *   sNorm    s / s_max (0 when nothing matches)
 *   logRank  ln(1 + rank) / ln(1 + N), rank = N when the item does not match
 *   sIdf     s / Σ idf(query words)
 *   matched  [s > 0]
 * Judgement features (when training judgements exist; `judgements: false` drops them):
 *   logJudged   ln(1 + number of training queries judging the item relevant)
 *   {text,profile,relmean}{Share,Max}: over the query's NEIGHBOURS most similar
 *   training queries under three similarities — BM25 between query texts (normalised by
 *   the best neighbour), overlap of the top-`profileDepth` BM25 item lists, and the
 *   query's mean normalised BM25 over each neighbour's relevant items — the
 *   similarity-weighted share of neighbours judging the item relevant, and the max of
 *   similarity × [relevant].
 * RM3 features (with `rm3`), from BM25 + RM3 of the query over the same words
 * (feedback.ts: Anserini's 10 feedback items, 10 feedback words, original query weight
 * 0.5), r = the item's score under the expanded query, r_max the best, rank its rank:
 *   rm3Norm  r / r_max (0 when the expanded query matches nothing of the item)
 *   rm3Rank  1 − ln(1 + rank) / ln(1 + N) (0 when unmatched)
 * Dense features (with `embeddings`, the name of an embeddings model whose vectors are
 * registered with `registerDenseVectors` before the model is built — src/embeddings/ fetches
 * them from an OpenAI-compatible /v1/embeddings endpoint), appended last; c = the cosine of
 * the query's and the item's vectors:
 *   cos         c
 *   cosNorm     c / max over items of c (0 when that max is ≤ 0)
 *   cosLogRank  ln(1 + rank by c) / ln(1 + N)
 * A model built with them and no registered vectors, or asked about a query text without a
 * vector, is DATA_MISSING naming the model (never a silent zero).
 * Leave-one-out: when the query is itself a training query (fitting, tuning, rollouts),
 * its own judgements never enter its own features: it is no neighbour of itself and its
 * judgement is not counted in logJudged.
 */
import type { Analyzer } from '../../index/text/analyzer.ts';
import { getAnalyzer, isAnalyzerName, type AnalyzerName } from '../../index/text/analyzer.ts';
import { cogrError } from '../../index/core/errors.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { createRng } from '../../index/core/random.ts';
import { fitLogistic, RowBuilder, sigmoid } from './logistic.ts';
import { TextIndex } from './textIndex.ts';
import { RM3_DEFAULTS, Rm3Feedback } from './feedback.ts';
import { isTextAnalysis, luceneEnglishTokens, type TextAnalysis } from '../../index/text/english.ts';

/** Bytes of feature rows a model keeps (rows cost items × features × 8 bytes per query; features do not depend on the weights). */
const FEATURE_MEMO_BYTES = 256 << 20;
/**
 * Bytes of per-query scores (queryScores) a model keeps, least recently used out first:
 * a query's p and text scores kept as its rows that are more than plain (20 bytes each)
 * and one p per judged count, so that the passes of a half-round (α tuning, GRPO epochs,
 * generation, offers, evaluation) over thousands of queries compute each query's rows
 * once per weights, not once per pass.
 */
const SCORE_MEMO_BYTES = 1 << 30;

/** One query's queryScores, sparse: the rows that are more than plain (ascending), their p and text score, and the plain rows' p by judged count (NaN: no plain row has that count). */
interface SparseScores {
  version: number;
  rows: Int32Array;
  p: Float64Array;
  text: Float64Array;
  plainP: Float64Array;
  bytes: number;
}

/** What marks a feature row as more than the bias, the unmatched logRank and logJudged (queryRows). */
const ROW_MATCHED = 1;
const ROW_TF = 2;
const ROW_OWN = 4;
const ROW_NEIGHBOUR = 8;
const ROW_RM3 = 16;
/** The neighbour columns (share and max of three families) after logJudged. */
const NEIGHBOUR_COLS = 6;

/** One query's feature rows, written on demand (RelevanceModel.queryRows). */
interface QueryRows {
  fill(i: number, out: Float64Array, off: number): void;
  plain(i: number): boolean;
  release(): void;
}

/** A query's key in the feature memo: its id and text (a query's features depend on both). */
const memoKey = (query: RelevanceQuery): string => `${query.id}\u0001${query.text}`;

/** The dense p and text scores of a kept query (RelevanceModel.queryScores): plain rows' p by judged count, text 0; the kept rows' values. */
function denseScores(k: SparseScores, judgedCount: Int32Array): { p: Float64Array; text: Float64Array } {
  const N = judgedCount.length;
  const p = new Float64Array(N);
  const text = new Float64Array(N);
  const plainP = k.plainP;
  for (let i = 0; i < N; i++) {
    const c = judgedCount[i];
    if (c < plainP.length) p[i] = plainP[c];
  }
  const rows = k.rows;
  for (let r = 0; r < rows.length; r++) {
    p[rows[r]] = k.p[r];
    text[rows[r]] = k.text[r];
  }
  return { p, text };
}

export const TEXT_FEATURES = ['bias', 'sNorm', 'logRank', 'sIdf', 'matched'] as const;
/** The feature column holding the normalised text BM25 s / s_max (the planner's text ranking reads it without `queryTf`). */
export const TEXT_SCORE_COLUMN = TEXT_FEATURES.indexOf('sNorm');
/**
 * With `queryTf`, appended after the others: the text BM25 with each query word weighted
 * by its count in the query (as Lucene and wink score a query: one clause per token),
 * normalised by its best item (sTfNorm) and by Σ idf of the query's distinct words (sTfIdf).
 */
export const QUERY_TF_FEATURES = ['sTfNorm', 'sTfIdf'] as const;
/** With `rm3`, after the query-tf features: the BM25 + RM3 score of the item, normalised by the best, and its rank. */
export const RM3_FEATURES = ['rm3Norm', 'rm3Rank'] as const;
export const DENSE_FEATURES = ['cos', 'cosNorm', 'cosLogRank'] as const;

/**
 * The vectors of one embeddings model: every item's (by id) and the query texts' (those
 * embedded ahead of time, and any added later, e.g. a served query's, at most
 * MAX_DENSE_QUERIES kept beyond the first ones).
 */
export class DenseVectors {
  private readonly queries = new Map<string, Float32Array>();
  private readonly pinned: number;
  constructor(
    readonly model: string,
    readonly dim: number,
    private readonly items: ReadonlyMap<string, Float32Array>,
    queries: ReadonlyMap<string, Float32Array> = new Map(),
  ) {
    for (const [t, v] of queries) this.queries.set(t, v);
    this.pinned = this.queries.size;
  }
  item(id: string): Float32Array | undefined {
    return this.items.get(id);
  }
  query(text: string): Float32Array | undefined {
    return this.queries.get(text);
  }
  addQuery(text: string, v: Float32Array): void {
    if (v.length !== this.dim)
      throw cogrError('EMBEDDINGS_FORMAT', `a ${this.model} query vector has dimension ${v.length}, expected ${this.dim}`);
    if (this.queries.size >= this.pinned + MAX_DENSE_QUERIES) {
      // Forget the oldest added query (the pinned ones stay).
      let n = 0;
      for (const k of this.queries.keys())
        if (n++ === this.pinned) {
          this.queries.delete(k);
          break;
        }
    }
    this.queries.set(text, v);
  }

  /** Vectors of texts asked for by `texts` (keywords, and query texts embedded on demand), at most MAX_DENSE_TEXTS kept. */
  private readonly texts = new Map<string, Float32Array>();
  private fetcher: ((texts: readonly string[]) => Float32Array[]) | null = null;

  /** Whether `vectorsOf` can fetch what it lacks (a fetcher is set). */
  get canFetch(): boolean {
    return this.fetcher !== null;
  }

  /** How `vectorsOf` gets the texts it has no vector for, synchronously (src/embeddings/syncEmbedder.ts). */
  setFetcher(fetch: (texts: readonly string[]) => Float32Array[]): void {
    this.fetcher = fetch;
  }

  /**
   * The vectors of texts (a query text's from those embedded ahead, else any text's from the
   * ones fetched before), fetching the missing ones in one call; DATA_MISSING without a fetcher.
   */
  vectorsOf(texts: readonly string[]): Float32Array[] {
    const have = new Map<string, Float32Array>();
    for (const t of texts) {
      const v = this.queries.get(t) ?? this.texts.get(t);
      if (v) have.set(t, v);
    }
    const missing = [...new Set(texts.filter((t) => !have.has(t)))];
    if (missing.length > 0) {
      if (!this.fetcher)
        throw cogrError('DATA_MISSING', `no ${this.model} vector for ${JSON.stringify(missing[0])} and no embeddings endpoint to ask`, {
          embeddings: this.model,
        });
      const got = this.fetcher(missing);
      if (got.length !== missing.length)
        throw cogrError('EMBEDDINGS_FORMAT', `${got.length} ${this.model} vectors for ${missing.length} texts`);
      if (this.texts.size + missing.length > MAX_DENSE_TEXTS) this.texts.clear();
      missing.forEach((t, i) => {
        if (got[i].length !== this.dim)
          throw cogrError('EMBEDDINGS_FORMAT', `a ${this.model} vector has dimension ${got[i].length}, expected ${this.dim}`);
        this.texts.set(t, got[i]);
        have.set(t, got[i]);
      });
    }
    return texts.map((t) => have.get(t)!);
  }
}
const MAX_DENSE_QUERIES = 10_000;
/** Keyword and other texts' vectors kept (about 150 MB at 384 dimensions; beyond it the memo starts again). */
const MAX_DENSE_TEXTS = 100_000;
const denseRegistry = new Map<string, DenseVectors>();
/** Make a model's vectors available to relevance models built with `embeddings: model` (in this thread). */
export function registerDenseVectors(v: DenseVectors): void {
  denseRegistry.set(v.model, v);
}
export function denseVectorsOf(model: string): DenseVectors | undefined {
  return denseRegistry.get(model);
}
export const JUDGEMENT_FEATURES = [
  'logJudged',
  'textShare',
  'textMax',
  'profileShare',
  'profileMax',
  'relmeanShare',
  'relmeanMax',
] as const;

export interface RelevanceItem {
  id: string;
  title: string;
  text: string;
}
export interface RelevanceQuery {
  id: string;
  text: string;
}

export interface RelevanceOptions {
  analyzer: AnalyzerName;
  /**
   * The words of the text BM25 features (index/text/english.ts): `wink` — index/text/analyzer.ts
   * textTokens (letter/digit runs, wink-nlp-utils' stop words) stemmed by `analyzer`;
   * `lucene` — Lucene's EnglishAnalyzer chain (Porter v1, 33 stop words). Models saved
   * before this option read as `wink`.
   */
  textAnalysis: TextAnalysis;
  /** Use the training judgements as features (default true when there are any). */
  judgements: boolean;
  neighbours: number;
  profileDepth: number;
  l2: number;
  /** Above this many distinct rows, non-merged negative rows are subsampled with inverse-probability weights (seeded). */
  maxRows: number;
  seed: number;
  /** Add the query-term-frequency BM25 features (QUERY_TF_FEATURES); models saved before them have none. */
  queryTf: boolean;
  /** The embeddings model whose cosines are features (DENSE_FEATURES); null: none (models saved before them have none). */
  embeddings: string | null;
  /** Add the BM25 + RM3 features (RM3_FEATURES); models saved before them have none. */
  rm3: boolean;
}
/** The relevance model's defaults, from index/core/defaults.ts (`DEFAULTS.relevance`); no embeddings unless a run gives a model. */
export const DEFAULT_RELEVANCE: RelevanceOptions = (({
  analyzer,
  textAnalysis,
  judgements,
  queryTf,
  rm3,
  neighbours,
  profileDepth,
  l2,
  maxRows,
  seed,
}) => ({
  analyzer,
  textAnalysis,
  judgements,
  queryTf,
  embeddings: null,
  rm3,
  neighbours,
  profileDepth,
  l2,
  maxRows,
  seed,
}))(DEFAULTS.relevance);

/** The text BM25 profile of one query over the items. */
export interface QueryProfile {
  scores: Float64Array;
  sMax: number;
  sumIdf: number;
  /** rank (1-based) of every item, N when unmatched. */
  rank: Int32Array;
  /** Best `profileDepth` items. */
  top: Int32Array;
  /** Items with s > 0, best first. */
  ranked: Int32Array;
}

/** What the last fit did: pairs seen, distinct rows, Newton iterations, mean log-likelihood, the weights by feature. */
export interface RelevanceFit {
  iterations: number;
  rows: number;
  pairs: number;
  logLik: number;
  weights: Record<string, number>;
}

export interface RelevanceJSON {
  format: 'cogr-relevance-model';
  version: 1;
  options: RelevanceOptions;
  features: string[];
  weights: number[];
  /** Training judgements: query id, text, relevant item ids. */
  training: [string, string, string[]][];
}

/** Item → list positions holding it (CSR; positions ascending). */
interface Holders {
  off: Int32Array;
  pos: Int32Array;
}
const EMPTY_HOLDERS: Holders = { off: new Int32Array(1), pos: new Int32Array(0) };

function holders(size: number, lists: readonly Int32Array[]): Holders {
  const off = new Int32Array(size + 1);
  for (const l of lists) for (const i of l) off[i + 1]++;
  for (let i = 0; i < size; i++) off[i + 1] += off[i];
  const pos = new Int32Array(off[size]);
  const cur = off.slice(0, size);
  lists.forEach((l, t) => {
    for (const i of l) pos[cur[i]++] = t;
  });
  return { off, pos };
}

function itemText(it: RelevanceItem): string {
  if (it.title === '' || it.text.startsWith(it.title)) return it.text;
  return `${it.title} ${it.text}`;
}

export class RelevanceModel {
  readonly options: RelevanceOptions;
  readonly analyzer: Analyzer;
  /** Items in id order (ordinals match a keyword view over the same ids). */
  readonly itemIds: string[];
  readonly size: number;
  readonly dim: number;
  readonly featureNames: string[];
  /** The column the planner's text ranking reads: sTfNorm with `queryTf`, else sNorm. */
  readonly textScoreColumn: number;
  private weights: Float64Array;
  private readonly itemIndex: TextIndex;
  private readonly ordinal = new Map<string, number>();
  // training judgements
  private readonly train: RelevanceQuery[];
  private readonly trainPos = new Map<string, number>();
  private readonly trainRel: Int32Array[];
  private readonly judgedCount: Int32Array;
  private readonly queryIndex: TextIndex | null;
  private readonly trainTop: Int32Array[];
  /** Item → the training query positions whose top-`profileDepth` list holds it, and whose relevant items hold it (CSR, ascending positions). */
  private readonly topHolders: Holders;
  private readonly relHolders: Holders;
  private readonly profileMemo = new Map<string, QueryProfile>();
  /** With `rm3`: the feedback over the item texts, its column, and each query text's expanded scores (memoised per text). */
  private readonly feedback: Rm3Feedback | null;
  private readonly rm3Col: number;
  private readonly rm3Memo = new Map<string, { scores: Float64Array; sMax: number; ranked: Int32Array }>();
  private version = 0;
  /** Unit item vectors in ordinal order (size × dim) and their source, with `embeddings`. */
  private readonly dense: { vectors: DenseVectors; matrix: Float32Array; dim: number; col: number } | null;

  private constructor(
    items: readonly RelevanceItem[],
    training: readonly (readonly [RelevanceQuery, readonly string[]])[],
    options: RelevanceOptions,
    weights?: Float64Array,
  ) {
    this.options = options;
    this.analyzer = getAnalyzer(options.analyzer);
    const sorted = [...items].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.itemIds = sorted.map((x) => x.id);
    this.size = sorted.length;
    this.itemIds.forEach((id, i) => this.ordinal.set(id, i));
    const tokenize = options.textAnalysis === 'lucene' ? luceneEnglishTokens : undefined;
    this.itemIndex = new TextIndex(sorted.map(itemText), this.analyzer, undefined, tokenize);
    this.train = training.map(([q]) => q);
    this.train.forEach((q, i) => this.trainPos.set(q.id, i));
    this.trainRel = training.map(([, rel]) => {
      const o = rel.map((id) => this.ordinal.get(id)).filter((x): x is number => x !== undefined);
      return Int32Array.from(new Set(o)).sort();
    });
    const useJ = options.judgements && this.train.length > 0;
    this.judgedCount = new Int32Array(this.size);
    for (const rel of this.trainRel) for (const i of rel) this.judgedCount[i]++;
    this.queryIndex = useJ
      ? new TextIndex(
          this.train.map((q) => q.text),
          this.analyzer,
          undefined,
          tokenize,
        )
      : null;
    this.trainTop = useJ ? this.train.map((q) => this.profile(q.text).top) : [];
    this.topHolders = useJ ? holders(this.size, this.trainTop) : EMPTY_HOLDERS;
    this.relHolders = useJ ? holders(this.size, this.trainRel) : EMPTY_HOLDERS;
    this.featureNames = [
      ...TEXT_FEATURES,
      ...(useJ ? JUDGEMENT_FEATURES : []),
      ...(options.queryTf ? QUERY_TF_FEATURES : []),
      ...(options.rm3 ? RM3_FEATURES : []),
      ...(options.embeddings !== null ? DENSE_FEATURES : []),
    ];
    this.rm3Col = this.featureNames.indexOf('rm3Norm');
    this.feedback = options.rm3 ? new Rm3Feedback(this.itemIndex, { ...RM3_DEFAULTS, docVectors: 'length' }) : null;
    this.dim = this.featureNames.length;
    this.dense = options.embeddings === null ? null : this.denseMatrix(options.embeddings);
    this.textScoreColumn = options.queryTf ? this.featureNames.indexOf('sTfNorm') : TEXT_SCORE_COLUMN;
    this.weights = weights ?? new Float64Array(this.dim);
  }

  private denseMatrix(model: string): { vectors: DenseVectors; matrix: Float32Array; dim: number; col: number } {
    const vectors = denseRegistry.get(model);
    if (vectors === undefined)
      throw cogrError(
        'DATA_MISSING',
        `the relevance model uses ${model} embeddings: give --embeddings URL of an endpoint serving ${model}`,
        { embeddings: model },
      );
    const dim = vectors.dim;
    const matrix = new Float32Array(this.size * dim);
    this.itemIds.forEach((id, i) => {
      const v = vectors.item(id);
      if (v === undefined)
        throw cogrError('DATA_MISSING', `no ${model} embedding for item ${JSON.stringify(id)}`, { embeddings: model, item: id });
      let n = 0;
      for (let j = 0; j < dim; j++) n += v[j] * v[j];
      n = Math.sqrt(n);
      if (n > 0) for (let j = 0; j < dim; j++) matrix[i * dim + j] = v[j] / n;
    });
    return { vectors, matrix, dim, col: this.featureNames.indexOf('cos') };
  }

  /** Cosine of a query text's vector with every item (ordinal order); null without `embeddings`. */
  cosines(text: string): Float64Array | null {
    if (this.dense === null) return null;
    const { vectors, matrix, dim } = this.dense;
    // A text not embedded ahead (a generated query's) is fetched when the vectors have an endpoint to ask.
    const q = vectors.query(text) ?? (vectors.canFetch ? vectors.vectorsOf([text])[0] : undefined);
    if (q === undefined)
      throw cogrError('DATA_MISSING', `no ${vectors.model} embedding for the query text ${JSON.stringify(text.slice(0, 80))}`, {
        embeddings: vectors.model,
      });
    let n = 0;
    for (let j = 0; j < dim; j++) n += q[j] * q[j];
    n = n > 0 ? Math.sqrt(n) : 1;
    const out = new Float64Array(this.size);
    for (let i = 0; i < this.size; i++) {
      let s = 0;
      const o = i * dim;
      for (let j = 0; j < dim; j++) s += matrix[o + j] * q[j];
      out[i] = s / n;
    }
    return out;
  }

  /** The embeddings model of the dense features, or null. */
  get embeddingsModel(): string | null {
    return this.options.embeddings;
  }

  /** Fit on every (training query, item) pair. */
  static fit(
    items: readonly RelevanceItem[],
    training: readonly (readonly [RelevanceQuery, readonly string[]])[],
    opts: Partial<RelevanceOptions> = {},
  ): RelevanceModel {
    const options = { ...DEFAULT_RELEVANCE, ...opts };
    const m = new RelevanceModel(items, training, options);
    m.refit();
    return m;
  }

  /** An unfitted model (weights zero) with the given training judgements; `refit()` fits it. */
  static create(
    items: readonly RelevanceItem[],
    training: readonly (readonly [RelevanceQuery, readonly string[]])[],
    opts: Partial<RelevanceOptions> = {},
  ): RelevanceModel {
    return new RelevanceModel(items, training, { ...DEFAULT_RELEVANCE, ...opts });
  }

  get usesJudgements(): boolean {
    return this.queryIndex !== null;
  }
  get trainingQueries(): readonly RelevanceQuery[] {
    return this.train;
  }
  isTraining(queryId: string): boolean {
    return this.trainPos.has(queryId);
  }
  /** Relevant item ordinals of a training query (empty when it is not one). */
  trainingRelevant(queryId: string): Int32Array {
    const p = this.trainPos.get(queryId);
    return p === undefined ? new Int32Array(0) : this.trainRel[p];
  }
  /** How many distinct words of a text (stop words aside, analysed) occur in the item texts. */
  knownWords(text: string): number {
    return this.itemIndex.terms(text).length;
  }
  /** The analysed words of a text, as the text BM25 features see them. */
  textWords(text: string): string[] {
    return this.itemIndex.tokens(text);
  }
  /** The items (ordinals, ascending) whose text holds an analysed word. */
  wordItems(word: string): Int32Array {
    return this.itemIndex.docsOf(word);
  }
  /** idf of an analysed word over the item texts. */
  wordIdf(word: string): number {
    return this.itemIndex.idfOf(word);
  }
  itemOrdinal(id: string): number {
    return this.ordinal.get(id) ?? -1;
  }
  getWeights(): Float64Array {
    return Float64Array.from(this.weights);
  }
  setWeights(w: ArrayLike<number>): void {
    if (w.length !== this.dim) throw cogrError('INVALID_ARGUMENT', `relevance weights: expected ${this.dim}, got ${w.length}`);
    let same = true;
    for (let j = 0; j < this.dim && same; j++) same = Object.is(this.weights[j], w[j]);
    // The same weights again (a saved planner loaded over this model): what was computed with them still holds.
    if (same) return;
    this.weights = Float64Array.from(w);
    this.version++;
  }
  /** Changes whenever the weights change (callers cache probabilities by it). */
  get weightsVersion(): number {
    return this.version;
  }

  /** BM25 profile of a query text over the items (memoised per text). */
  profile(text: string): QueryProfile {
    let p = this.profileMemo.get(text);
    if (p) return p;
    const { scores, sumIdf, ranked } = this.itemIndex.score(text);
    const rank = new Int32Array(this.size).fill(this.size);
    for (let r = 0; r < ranked.length; r++) rank[ranked[r]] = r + 1;
    const sMax = ranked.length > 0 ? scores[ranked[0]] : 0;
    p = { scores, sMax, sumIdf, rank, top: ranked.slice(0, this.options.profileDepth), ranked };
    if (this.profileMemo.size >= 4096) this.profileMemo.clear();
    this.profileMemo.set(text, p);
    return p;
  }

  /** BM25 + RM3 scores of a query text over the items (memoised per text); null without `rm3`. */
  private rm3Profile(text: string): { scores: Float64Array; sMax: number; ranked: Int32Array } | null {
    if (this.feedback === null) return null;
    let r = this.rm3Memo.get(text);
    if (r) return r;
    const { scores, ranked } = this.feedback.score(text);
    r = { scores, sMax: ranked.length > 0 ? scores[ranked[0]] : 0, ranked };
    if (this.rm3Memo.size >= 4096) this.rm3Memo.clear();
    this.rm3Memo.set(text, r);
    return r;
  }

  /**
   * Feature rows of a query over every item (row-major, size × dim). When the query is a
   * training query, its own judgements are left out.
   */
  features(query: RelevanceQuery): Float64Array {
    const key = memoKey(query);
    const hit = this.featureMemo.get(key);
    if (hit) return hit;
    const x = this.computeFeatures(query);
    if (this.featureBytes + x.byteLength > FEATURE_MEMO_BYTES) {
      this.featureMemo.clear();
      this.featureBytes = 0;
    }
    this.featureMemo.set(key, x);
    this.featureBytes += x.byteLength;
    return x;
  }

  private computeFeatures(query: RelevanceQuery): Float64Array {
    const N = this.size;
    const d = this.dim;
    const x = new Float64Array(N * d);
    const rows = this.queryRows(query);
    try {
      for (let i = 0; i < N; i++) rows.fill(i, x, i * d);
    } finally {
      rows.release();
    }
    if (this.dense !== null) {
      const logN = Math.log1p(N);
      const c = this.cosines(query.text)!;
      const col = this.dense.col;
      let mx = -Infinity;
      for (let i = 0; i < N; i++) if (c[i] > mx) mx = c[i];
      const order = Int32Array.from({ length: N }, (_, i) => i).sort((a, b) => c[b] - c[a] || a - b);
      for (let r = 0; r < N; r++) {
        const i = order[r];
        const o = i * d + col;
        x[o] = c[i];
        x[o + 1] = mx > 0 ? c[i] / mx : 0;
        x[o + 2] = Math.log1p(r + 1) / logN;
      }
    }
    return x;
  }

  /**
   * A query's feature rows without the dense matrix: what each row depends on (the text
   * profile, the query-tf scores, the query's own judgements and the neighbour columns of
   * the items its neighbours judge) and `fill(i, out, off)`, which writes item i's row
   * (every column but the dense ones) exactly as the dense matrix holds it. `plain(i)`:
   * the row is the bias, the unmatched logRank and logJudged alone, so it depends on the
   * item only through its judged count. The neighbour columns live in the model's scratch
   * until `release()` (one query's rows at a time).
   */
  private queryRows(query: RelevanceQuery): QueryRows {
    const N = this.size;
    const pr = this.profile(query.text);
    const logN = Math.log1p(N);
    // Every unmatched item has rank N: one logRank value; matched items by their rank.
    const unmatchedLogRank = Math.log1p(N) / logN;
    if (this.rowsBusy) throw cogrError('INTERNAL', 'relevance model: feature rows of two queries at once');
    const flags = (this.rowFlags ??= new Uint8Array(N));
    const touched: number[] = [];
    const useJ = this.queryIndex !== null;
    const nb = useJ ? (this.nbScratch ??= new Float64Array(N * NEIGHBOUR_COLS)) : null;
    const release = (): void => {
      for (const i of touched) {
        flags[i] = 0;
        if (nb) nb.fill(0, i * NEIGHBOUR_COLS, (i + 1) * NEIGHBOUR_COLS);
      }
      this.rowsBusy = false;
    };
    this.rowsBusy = true;
    try {
      return this.buildRows(query, pr, logN, unmatchedLogRank, flags, touched, nb, release);
    } catch (e) {
      release();
      throw e;
    }
  }

  private buildRows(
    query: RelevanceQuery,
    pr: QueryProfile,
    logN: number,
    unmatchedLogRank: number,
    flags: Uint8Array,
    touched: number[],
    nb: Float64Array | null,
    release: () => void,
  ): QueryRows {
    const N = this.size;
    const d = this.dim;
    const mark = (i: number, f: number) => {
      if (flags[i] === 0) touched.push(i);
      flags[i] |= f;
    };
    for (const i of pr.ranked) mark(i, ROW_MATCHED);
    const tf = this.options.queryTf ? this.itemIndex.scoreCounts(query.text) : null;
    const tfMax = tf && tf.ranked.length > 0 ? tf.scores[tf.ranked[0]] : 0;
    if (tf) for (let i = 0; i < N; i++) if (tf.scores[i] > 0) mark(i, ROW_TF);
    const tfCol = this.textScoreColumn;
    const rm3 = this.rm3Profile(query.text);
    const rm3Col = this.rm3Col;
    // Ranks of the items the expanded query matches (read only for them: ROW_RM3).
    const rm3Rank = rm3 === null ? null : (this.rm3RankScratch ??= new Int32Array(N));
    if (rm3)
      for (let r = 0; r < rm3.ranked.length; r++) {
        const i = rm3.ranked[r];
        mark(i, ROW_RM3);
        rm3Rank![i] = r + 1;
      }
    const useJ = nb !== null;
    const self = useJ ? this.trainPos.get(query.id) : undefined;
    const own = self === undefined ? null : this.trainRel[self];
    if (own) for (const i of own) mark(i, ROW_OWN);
    const lj = useJ ? (this.logJudged ??= Float64Array.from(this.judgedCount, (c) => Math.log1p(c))) : null;
    if (nb) {
      const fam = this.neighbours(query, pr, self);
      fam.forEach((f, k) => {
        let den = 0;
        for (const s of f.sim) den += s;
        if (den <= 0) return;
        const shareCol = 2 * k;
        for (let r = 0; r < f.pos.length; r++) {
          const sim = f.sim[r];
          for (const i of this.trainRel[f.pos[r]]) {
            mark(i, ROW_NEIGHBOUR);
            const o = i * NEIGHBOUR_COLS + shareCol;
            nb[o] += sim / den;
            if (sim > nb[o + 1]) nb[o + 1] = sim;
          }
        }
      });
    }
    const judgedCount = this.judgedCount;
    const fill = (i: number, out: Float64Array, off: number): void => {
      out.fill(0, off, off + d);
      out[off] = 1;
      const f = flags[i];
      if (f & ROW_MATCHED) {
        const s = pr.scores[i];
        out[off + 1] = pr.sMax > 0 ? s / pr.sMax : 0;
        out[off + 3] = pr.sumIdf > 0 ? s / pr.sumIdf : 0;
        out[off + 4] = 1;
        out[off + 2] = Math.log1p(pr.rank[i]) / logN;
      } else out[off + 2] = unmatchedLogRank;
      if (f & ROW_TF) {
        const s = tf!.scores[i];
        out[off + tfCol] = tfMax > 0 ? s / tfMax : 0;
        out[off + tfCol + 1] = tf!.sumIdf > 0 ? s / tf!.sumIdf : 0;
      }
      if (f & ROW_RM3) {
        out[off + rm3Col] = rm3!.sMax > 0 ? rm3!.scores[i] / rm3!.sMax : 0;
        out[off + rm3Col + 1] = 1 - Math.log1p(rm3Rank![i]) / logN;
      }
      if (lj === null) return;
      out[off + 5] = f & ROW_OWN ? Math.log1p(judgedCount[i] - 1) : lj[i];
      if (f & ROW_NEIGHBOUR) for (let k = 0; k < NEIGHBOUR_COLS; k++) out[off + 6 + k] = nb![i * NEIGHBOUR_COLS + k];
    };
    return { fill, plain: (i) => flags[i] === 0, release };
  }
  private rowsBusy = false;
  private rowFlags: Uint8Array | null = null;
  private rm3RankScratch: Int32Array | null = null;
  private nbScratch: Float64Array | null = null;

  /** The three neighbour families: training query positions and similarities, best first. */
  private neighbours(query: RelevanceQuery, pr: QueryProfile, self: number | undefined): { pos: number[]; sim: number[] }[] {
    const T = this.train.length;
    const sims: Float64Array[] = [new Float64Array(T), new Float64Array(T), new Float64Array(T)];
    // 1. BM25 between query texts, normalised by the best other training query.
    const qs = this.queryIndex!.score(query.text);
    let mx = 0;
    for (let t = 0; t < T; t++) if (t !== self && qs.scores[t] > mx) mx = qs.scores[t];
    if (mx > 0) for (let t = 0; t < T; t++) if (t !== self) sims[0][t] = qs.scores[t] / mx;
    // 2. Overlap of the top-depth BM25 item lists: counted from the items' side (the
    // training queries whose list holds each of the query's top items), so the cost is
    // that of the lists met, not T × depth.
    const depth = this.options.profileDepth;
    const ov = sims[1];
    const th = this.topHolders;
    for (const i of pr.top) for (let j = th.off[i]; j < th.off[i + 1]; j++) ov[th.pos[j]]++;
    for (let t = 0; t < T; t++) if (ov[t] !== 0) ov[t] = t === self ? 0 : ov[t] / depth;
    // 3. Mean normalised BM25 of the query over each neighbour's relevant items: every
    // matched item (ascending ordinal, so each neighbour's sum adds the same terms in the
    // same order as a pass over its relevant items would) adds its score to the training
    // queries judging it relevant.
    if (pr.sMax > 0) {
      const acc = sims[2];
      const rh = this.relHolders;
      const matched = Int32Array.from(pr.ranked).sort();
      for (const i of matched) {
        const s = pr.scores[i];
        for (let j = rh.off[i]; j < rh.off[i + 1]; j++) acc[rh.pos[j]] += s;
      }
      for (let t = 0; t < T; t++) {
        if (acc[t] === 0) continue;
        acc[t] = t === self ? 0 : acc[t] / pr.sMax / this.trainRel[t].length;
      }
    }
    const k = this.options.neighbours;
    return sims.map((sim) => {
      const order: number[] = [];
      for (let t = 0; t < T; t++) if (sim[t] > 0) order.push(t);
      order.sort((a, b) => sim[b] - sim[a] || a - b);
      const top = order.slice(0, k);
      return { pos: top, sim: top.map((t) => sim[t]) };
    });
  }
  private readonly featureMemo = new Map<string, Float64Array>();
  /** ln(1 + training queries judging the item relevant), per item. */
  private logJudged: Float64Array | null = null;
  private featureBytes = 0;
  /** Identifies options and training judgements (what the features depend on). */
  get signature(): string {
    return (this.sig ??= JSON.stringify([
      this.options,
      this.train.map((q, t) => [q.id, q.text, Array.from(this.trainRel[t], (i) => this.itemIds[i])]),
    ]));
  }
  private sig: string | null = null;
  /** The statistics of the last fit (null until fitted). */
  lastFit: RelevanceFit | null = null;

  /** p(item relevant | query) for every item (ordinals in id order), from the query's feature rows. */
  probabilities(query: RelevanceQuery, features?: Float64Array): Float64Array {
    const x = features ?? this.features(query);
    const d = this.dim;
    const w = this.weights;
    const p = new Float64Array(this.size);
    for (let i = 0; i < this.size; i++) {
      const o = i * d;
      let z = 0;
      for (let j = 0; j < d; j++) z += w[j] * x[o + j];
      p[i] = sigmoid(z);
    }
    return p;
  }

  /**
   * One pass over a query's rows: p = `probabilities(query, features(query))` and the
   * normalised text BM25 the planner's text ranking reads (column `textScoreColumn` of the
   * features), both bit for bit, without the dense feature matrix (items × features × 8
   * bytes per query, what made the planner's per-query cost at 40,000 items mostly
   * allocation): each row is written into one scratch row and dotted in the same order,
   * and the rows that are plain (queryRows) share one p per judged count and have no text
   * score. From the memo or the dense matrix when there is one.
   */
  queryScores(query: RelevanceQuery): { p: Float64Array; text: Float64Array } {
    const N = this.size;
    const d = this.dim;
    const col = this.textScoreColumn;
    const key = memoKey(query);
    const memo = this.featureMemo.get(key);
    const x = memo ?? (this.dense !== null ? this.features(query) : null);
    if (x !== null) {
      const text = new Float64Array(N);
      for (let i = 0; i < N; i++) text[i] = x[i * d + col];
      return { p: this.probabilities(query, x), text };
    }
    const kept = this.scoreMemo.get(key);
    if (kept !== undefined && kept.version === this.version) {
      // Most recently used last.
      this.scoreMemo.delete(key);
      this.scoreMemo.set(key, kept);
      return denseScores(kept, this.judgedCount);
    }
    const w = this.weights;
    const p = new Float64Array(N);
    const text = new Float64Array(N);
    const row = new Float64Array(d);
    const byCount = new Map<number, number>();
    const touched: number[] = [];
    const rows = this.queryRows(query);
    try {
      for (let i = 0; i < N; i++) {
        const plain = rows.plain(i);
        if (plain) {
          const hit = byCount.get(this.judgedCount[i]);
          if (hit !== undefined) {
            p[i] = hit;
            continue;
          }
        } else touched.push(i);
        rows.fill(i, row, 0);
        let z = 0;
        for (let j = 0; j < d; j++) z += w[j] * row[j];
        p[i] = sigmoid(z);
        text[i] = row[col];
        if (plain) byCount.set(this.judgedCount[i], p[i]);
      }
    } finally {
      rows.release();
    }
    this.keepScores(key, p, text, touched, byCount);
    return { p, text };
  }

  /** Keep a query's scores in the memo, sparse (least recently used dropped to stay within SCORE_MEMO_BYTES). */
  private keepScores(
    key: string,
    p: Float64Array,
    text: Float64Array,
    touched: readonly number[],
    byCount: ReadonlyMap<number, number>,
  ): void {
    let maxCount = -1;
    for (const c of byCount.keys()) if (c > maxCount) maxCount = c;
    const plainP = new Float64Array(maxCount + 1).fill(NaN);
    for (const [c, v] of byCount) plainP[c] = v;
    const rows = Int32Array.from(touched);
    const bytes = rows.length * 20 + plainP.length * 8 + 2 * key.length + 128;
    if (bytes > SCORE_MEMO_BYTES) return;
    const old = this.scoreMemo.get(key);
    if (old !== undefined) {
      this.scoreMemo.delete(key);
      this.scoreBytes -= old.bytes;
    }
    while (this.scoreBytes + bytes > SCORE_MEMO_BYTES) {
      const [k, v] = this.scoreMemo.entries().next().value as [string, SparseScores];
      this.scoreMemo.delete(k);
      this.scoreBytes -= v.bytes;
    }
    const kp = new Float64Array(rows.length);
    const kt = new Float64Array(rows.length);
    for (let r = 0; r < rows.length; r++) {
      kp[r] = p[rows[r]];
      kt[r] = text[rows[r]];
    }
    this.scoreMemo.set(key, { version: this.version, rows, p: kp, text: kt, plainP, bytes });
    this.scoreBytes += bytes;
  }
  private readonly scoreMemo = new Map<string, SparseScores>();
  private scoreBytes = 0;

  /**
   * Every feature row of a query in item order, as `features(query)` holds it (the row is
   * a view or a scratch array, valid during the call): from the memo or the dense matrix
   * when there is one, else written row by row (queryRows).
   */
  private eachRow(query: RelevanceQuery, fn: (i: number, row: Float64Array) => void): void {
    const d = this.dim;
    const memo = this.featureMemo.get(memoKey(query));
    const x = memo ?? (this.dense !== null ? this.features(query) : null);
    if (x !== null) {
      for (let i = 0; i < this.size; i++) fn(i, x.subarray(i * d, i * d + d));
      return;
    }
    const row = new Float64Array(d);
    const rows = this.queryRows(query);
    try {
      for (let i = 0; i < this.size; i++) {
        rows.fill(i, row, 0);
        fn(i, row);
      }
    } finally {
      rows.release();
    }
  }

  /** Fit (or refit) the weights on every (training query, item) pair, leave-one-out features. */
  refit(): RelevanceFit {
    const d = this.dim;
    let rb = new RowBuilder(d);
    const N = this.size;
    let pairs = 0;
    // Individual rows are kept; rows whose only non-zero features are the bias, logRank
    // (= 1 for unmatched items) and logJudged are merged by logJudged's value. Individual
    // rows beyond maxRows subsample the non-merged negatives (below).
    const judged = this.usesJudgements;
    const plainRow = (x: Float64Array, o: number): boolean => {
      if (x[o + 4] !== 0) return false;
      // Without judgements column 5 is no logJudged (the query-tf or RM3 column).
      if (!judged && d > 5 && x[o + 5] !== 0) return false;
      for (let j = 6; j < d; j++) if (x[o + j] !== 0) return false;
      return true;
    };
    const used = this.train.map((_, t) => t).filter((t) => this.trainRel[t].length > 0);
    const relMask = new Uint8Array(N);
    // One pass over the pairs (each query's features computed once) builds the rows as if
    // nothing is subsampled while it counts the individual rows; only when they turn out
    // to exceed maxRows is the builder dropped and a second pass subsamples (seeded) —
    // the rows, their order and so the fit are those of counting first, then adding.
    let nIndividual = 0;
    let full: RowBuilder | null = rb;
    const addRow = (b: RowBuilder, i: number, row: Float64Array, plain: boolean, keepP: number, rng: (() => number) | null) => {
      const pos = relMask[i] === 1;
      if (plain) b.addMerged(row, pos, d > 5 ? row[5] : 0);
      else if (pos || keepP >= 1) b.add(row, pos);
      else if (rng!() < keepP) b.add(row, false, undefined, 1 / keepP);
    };
    const addAll = (b: RowBuilder, t: number, keepP: number, rng: (() => number) | null) =>
      this.eachRow(this.train[t], (i, row) => addRow(b, i, row, plainRow(row, 0), keepP, rng));
    const mask = (t: number) => {
      relMask.fill(0);
      for (const i of this.trainRel[t]) relMask[i] = 1;
    };
    for (const t of used) {
      // Count and add in the same walk over the query's rows; a builder that turns out to
      // exceed maxRows is dropped whole, so what it got from this query does not matter.
      const b = full;
      if (b !== null) mask(t);
      this.eachRow(this.train[t], (i, row) => {
        const plain = plainRow(row, 0);
        if (!plain) nIndividual++;
        if (b !== null) addRow(b, i, row, plain, 1, null);
      });
      pairs += N;
      if (nIndividual > this.options.maxRows) full = null;
    }
    if (full === null) {
      const keepP = this.options.maxRows / nIndividual;
      const rng = createRng(this.options.seed);
      rb = new RowBuilder(d);
      for (const t of used) {
        mask(t);
        addAll(rb, t, keepP, rng);
      }
    }
    const rows = rb.build();
    const fit = fitLogistic(rows, { l2: this.options.l2 });
    this.weights = fit.weights;
    this.version++;
    this.lastFit = {
      iterations: fit.iterations,
      rows: rows.rows,
      pairs,
      logLik: fit.logLik,
      weights: Object.fromEntries(this.featureNames.map((n, j) => [n, fit.weights[j]])),
    };
    return this.lastFit;
  }

  toJSON(): RelevanceJSON {
    return {
      format: 'cogr-relevance-model',
      version: 1,
      options: { ...this.options },
      features: [...this.featureNames],
      weights: Array.from(this.weights),
      training: this.train.map((q, t) => [q.id, q.text, Array.from(this.trainRel[t], (i) => this.itemIds[i])]),
    };
  }

  /**
   * A saved model over the given items. `reuse`: a model built from the same items,
   * options and training judgements (its BM25 indexes and cached features are kept; only
   * the weights are replaced) — the loop reloads the same model at every step.
   */
  static fromJSON(json: unknown, items: readonly RelevanceItem[], reuse?: RelevanceModel | null): RelevanceModel {
    const j = json as Partial<RelevanceJSON> | null;
    if (!j || j.format !== 'cogr-relevance-model')
      throw cogrError('DATA_FORMAT', 'not a relevance model (format field is not "cogr-relevance-model")');
    if (j.version !== 1)
      throw cogrError('DB_VERSION', `relevance model has format version ${String(j.version)}; this cogr reads version 1`);
    if (
      !j.options ||
      !isAnalyzerName(j.options.analyzer) ||
      (j.options.textAnalysis !== undefined && !isTextAnalysis(j.options.textAnalysis)) ||
      !Array.isArray(j.weights) ||
      !Array.isArray(j.training)
    )
      throw cogrError('DATA_FORMAT', 'relevance model JSON is malformed');
    const signature = JSON.stringify([j.options, j.training]);
    if (reuse && reuse.signature === signature && reuse.size === items.length && reuse.dim === j.weights.length) {
      reuse.setWeights(j.weights);
      return reuse;
    }
    const training = j.training.map(([id, text, rel]) => [{ id, text }, rel] as const);
    // A model saved before queryTf has no such features.
    const saved = j.options as Partial<RelevanceOptions>;
    // A model saved before textAnalysis used wink's tokens.
    const m = new RelevanceModel(
      items,
      training,
      {
        ...DEFAULT_RELEVANCE,
        ...saved,
        queryTf: saved.queryTf ?? false,
        textAnalysis: saved.textAnalysis ?? 'wink',
        embeddings: saved.embeddings ?? null,
        rm3: saved.rm3 ?? false,
      },
      Float64Array.from(j.weights),
    );
    if (m.dim !== j.weights.length) throw cogrError('DATA_FORMAT', `relevance model has ${j.weights.length} weights for ${m.dim} features`);
    return m;
  }
}
