/**
 * RM3 pseudo-relevance feedback over a TextIndex (Lavrenko & Croft's relevance model as
 * Anserini runs it): the feedback words of a first-stage ranking and the expanded query.
 * One implementation for the BM25 + RM3 baseline (src/baseline/rm3.ts) and the relevance
 * model's RM3 features (relevance.ts RM3_FEATURES).
 *
 * - P(w | R) ∝ Σ_d s(d) · tf(w, d) / |d| over the top fbDocs items d with first-stage
 *   scores s(d), |d| the item's length in words; as Anserini, words of 1 or over 20
 *   characters, words that are not ASCII letters and digits and words in more than 10% of
 *   the items are left out; the fbTerms heaviest kept and scaled to sum 1.
 * - The expanded query: originalQueryWeight · q + (1 − originalQueryWeight) · P(· | R),
 *   q the query's own words with weight tf / |q| (sum 1).
 */
import type { TextIndex, TextScores } from './textIndex.ts';

/** Anserini's defaults. */
export const RM3_DEFAULTS = { fbDocs: 10, fbTerms: 10, originalQueryWeight: 0.5 } as const;

export interface FeedbackOptions {
  fbDocs: number;
  fbTerms: number;
  originalQueryWeight: number;
  /**
   * Each feedback item's word weights: `length` (tf / |d|, every kept word; cogr's RM3)
   * or `anserini` (as Anserini's Rm3Reranker: the item's kept words cut to its fbTerms
   * most frequent, tf over their sum).
   */
  docVectors: 'length' | 'anserini';
}

const ALLOWED = /^[a-z0-9]{2,20}$/;

export class Rm3Feedback {
  private readonly docLength: Int32Array;

  constructor(
    private readonly index: TextIndex,
    readonly options: FeedbackOptions,
  ) {
    this.docLength = new Int32Array(index.size);
    for (let d = 0; d < index.size; d++) for (const tf of index.docTerms(d).tfs) this.docLength[d] += tf;
  }

  /** The query's own words weighted tf / |q| (ordinals of words the items have; a repeated word weighs more, as in Lucene's query of one clause per token). */
  queryVector(text: string): Map<number, number> {
    const v = new Map<number, number>();
    let n = 0;
    for (const w of this.index.tokens(text)) {
      const o = this.index.wordOrdinal(w);
      if (o < 0) continue;
      v.set(o, (v.get(o) ?? 0) + 1);
      n++;
    }
    for (const [o, c] of v) v.set(o, c / n);
    return v;
  }

  /** The fbTerms heaviest words of the relevance model over the top fbDocs items, weights summing to 1. */
  feedbackTerms(ranked: ArrayLike<number>, scores: Float64Array): Map<number, number> {
    const { fbDocs, fbTerms } = this.options;
    const N = this.index.size;
    const w = new Map<number, number>();
    for (let r = 0; r < Math.min(fbDocs, ranked.length); r++) {
      const d = ranked[r];
      const { terms, tfs } = this.index.docTerms(d);
      let kept: [number, number][] = [];
      for (let j = 0; j < terms.length; j++) {
        const o = terms[j];
        if (!ALLOWED.test(this.index.word(o)) || this.index.df(o) / N > 0.1) continue;
        kept.push([o, tfs[j]]);
      }
      let len = this.docLength[d];
      if (this.options.docVectors === 'anserini') {
        kept = kept.sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, fbTerms);
        len = kept.reduce((s, [, tf]) => s + tf, 0);
      }
      if (len === 0) continue;
      for (const [o, tf] of kept) w.set(o, (w.get(o) ?? 0) + (scores[d] * tf) / len);
    }
    const top = [...w].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, fbTerms);
    const sum = top.reduce((s, [, x]) => s + x, 0);
    return new Map(sum > 0 ? top.map(([o, x]) => [o, x / sum]) : []);
  }

  /** The expanded query (word ordinal → weight) of a text. */
  expand(text: string): Map<number, number> {
    const q = this.queryVector(text);
    const first = this.index.scoreWeighted(q);
    const fb = this.feedbackTerms(first.ranked, first.scores);
    const a = this.options.originalQueryWeight;
    const weights = new Map<number, number>();
    for (const [o, x] of q) weights.set(o, a * x);
    for (const [o, x] of fb) weights.set(o, (weights.get(o) ?? 0) + (1 - a) * x);
    return weights;
  }

  /** BM25 of every item for the expanded query of a text. */
  score(text: string): TextScores {
    return this.index.scoreWeighted(this.expand(text));
  }
}
