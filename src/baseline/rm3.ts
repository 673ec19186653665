/**
 * BM25 + RM3 pseudo-relevance feedback (Lavrenko & Croft's relevance model, as Anserini
 * and Pyserini run it), the baseline Pyserini users compare against first. With
 * Anserini's defaults — fbDocs 10, fbTerms 10, originalQueryWeight 0.5:
 *
 * 1. First stage: BM25 (k1 1.2, b 0.75) of the query over each item's title + text, the
 *    same tokens as the BM25 baseline (`analysis`: `lucene`, Lucene's EnglishAnalyzer chain
 *    as Pyserini's default, or `wink`, lower-case letter/digit runs, English stop words
 *    removed, no stemming; generators/planner/textIndex.ts), a word repeated in the query
 *    counted as often as it occurs (Lucene's one clause per token; wink does the same).
 * 2. The relevance model over the top fbDocs items d with scores s(d):
 *      P(w | R) ∝ Σ_d s(d) · tf(w, d) / |d|,
 *    |d| the item's length in words; as Anserini, words of 1 or over 20 characters, words
 *    that are not ASCII letters and digits and words in more than 10% of the items are
 *    left out; the fbTerms heaviest kept and scaled to sum 1.
 * 3. The expanded query: originalQueryWeight · q + (1 − originalQueryWeight) · P(· | R),
 *    q the query's own words with weight tf / |q| (sum 1), searched as a query of
 *    weighted BM25 terms.
 * The ranking's cut-off is tuned on training queries to maximise F1, as BM25's is.
 */
import { z } from 'zod';
import { getAnalyzer } from '../../index/text/analyzer.ts';
import { TEXT_ANALYSES } from '../../index/text/english.ts';
import { trecOrder, type ScoredId } from '../trec.ts';
import { schemaError } from '../../index/core/errors.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { Item } from '../../index/core/types.ts';
import { TextIndex } from '../../generators/planner/textIndex.ts';
import { RM3_DEFAULTS, Rm3Feedback } from '../../generators/planner/feedback.ts';
import { silentLogger } from '../../index/core/log.ts';
import type { Corpus } from '../../index/core/types.ts';
import {
  checkFolds,
  itemText,
  parseBm25Options,
  runRankedBaseline,
  tokenizerOf,
  type Bm25BaselineOptions,
  type Bm25BaselineResult,
} from './bm25.ts';

export { RM3_DEFAULTS };

export const rm3OptionsSchema = z
  .object({
    fbDocs: z.number().int('fbDocs must be an integer').min(1, 'fbDocs must be >= 1').default(RM3_DEFAULTS.fbDocs),
    fbTerms: z.number().int('fbTerms must be an integer').min(1, 'fbTerms must be >= 1').default(RM3_DEFAULTS.fbTerms),
    originalQueryWeight: z
      .number()
      .min(0, 'originalQueryWeight must be in [0, 1]')
      .max(1, 'originalQueryWeight must be in [0, 1]')
      .default(RM3_DEFAULTS.originalQueryWeight),
    k1: z.number().min(0, 'k1 must be >= 0').default(DEFAULTS.bm25.k1),
    b: z.number().min(0, 'b must be in [0, 1]').max(1, 'b must be in [0, 1]').default(DEFAULTS.bm25.b),
    analysis: z.enum(TEXT_ANALYSES).default(DEFAULTS.baseline.analysis),
    /**
     * Each feedback item's word weights: `length` (tf / |d|, every kept word; cogr's RM3)
     * or `anserini` (as Anserini's Rm3Reranker: the item's kept words cut to its fbTerms
     * most frequent, tf over their sum). The crosscheck bench runs both against Anserini.
     */
    docVectors: z.enum(['length', 'anserini']).default('length'),
  })
  .strict();
export type Rm3Options = z.input<typeof rm3OptionsSchema>;

/** BM25 and BM25 + RM3 over a corpus's item texts. */
export class Rm3Index {
  readonly options: z.output<typeof rm3OptionsSchema>;
  private readonly index: TextIndex;
  private readonly ids: string[];
  private readonly feedback: Rm3Feedback;

  constructor(items: readonly Item[], opts: Rm3Options = {}) {
    const r = rm3OptionsSchema.safeParse(opts);
    if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error, { what: 'rm3 options' });
    this.options = r.data;
    this.ids = items.map((it) => it.id);
    this.index = new TextIndex(
      items.map(itemText),
      getAnalyzer('none'),
      { k1: this.options.k1, b: this.options.b },
      tokenizerOf(this.options.analysis),
    );
    this.feedback = new Rm3Feedback(this.index, this.options);
  }

  /** The fbTerms heaviest words of the relevance model over the top fbDocs items, weights summing to 1. */
  feedbackTerms(ranked: ArrayLike<number>, scores: Float64Array): Map<number, number> {
    return this.feedback.feedbackTerms(ranked, scores);
  }

  /** The expanded query (word → weight) of a text, with the words themselves for display. */
  expand(text: string): { weights: Map<number, number>; terms: { word: string; weight: number }[] } {
    const weights = this.feedback.expand(text);
    const terms = [...weights].sort((x, y) => y[1] - x[1] || x[0] - y[0]).map(([o, weight]) => ({ word: this.index.word(o), weight }));
    return { weights, terms };
  }

  /** BM25 of the query's own words (weighted by their count in the query), best first (ties by id as trec_eval), at most `limit`. */
  searchBm25(text: string, limit: number): ScoredId[] {
    return this.hits(this.index.scoreWeighted(this.feedback.queryVector(text)), limit);
  }

  /** BM25 + RM3, best first (ties by id as trec_eval: src/trec.ts), at most `limit`. */
  search(text: string, limit: number): ScoredId[] {
    const { weights } = this.expand(text);
    return this.hits(this.index.scoreWeighted(weights), limit);
  }

  private hits(r: { scores: Float64Array; ranked: Int32Array }, limit: number): ScoredId[] {
    return trecOrder(Array.from(r.ranked, (d) => ({ id: this.ids[d], score: r.scores[d] }))).slice(0, limit);
  }
}

/** The k-fold BM25 + RM3 baseline (cut-off tuned on training folds, as BM25's). */
export function runRm3Baseline(
  corpus: Corpus,
  options: Bm25BaselineOptions & { rm3?: Omit<Rm3Options, 'k1' | 'b' | 'analysis'> } = {},
): Bm25BaselineResult & { rm3: z.output<typeof rm3OptionsSchema> } {
  const { rm3, ...rest } = options;
  const o = parseBm25Options(rest);
  const logger = options.logger ?? silentLogger;
  checkFolds(corpus, o.folds);
  logger.info(`bm25+rm3: indexing ${corpus.items.length} items of ${corpus.name} (${o.analysis} analysis)`);
  const index = new Rm3Index(corpus.items, { ...rm3, k1: o.k1, b: o.b, analysis: o.analysis });
  return {
    ...runRankedBaseline(corpus, o, (text, limit) => index.search(text, limit), 'bm25+rm3', logger, options.run),
    rm3: index.options,
  };
}
