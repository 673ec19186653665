/**
 * The one BM25 formula (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
 * BM25 and Beyond", 2009; Lucene's non-negative idf):
 *   idf(w)  = ln(1 + (N − df + 0.5) / (df + 0.5))
 *   norm(d) = k1·(1 − b + b·dl/avgdl)
 *   term    = weight · tf·(k1 + 1) / (tf + norm(d))          (weight = idf, or boost·idf)
 * Every BM25 in the tree calls these: the keyword view's scorer and `explain`, the pruned
 * top k (exact scores and its bounds), the relevance model's text index and the item
 * policy's candidate idf. The operation order is fixed here, so every caller's scores are
 * bit-identical to each other's.
 */

export interface Bm25Params {
  k1: number;
  b: number;
}

/** Lucene's non-negative idf of a word in `df` of `n` documents. */
export function bm25Idf(n: number, df: number): number {
  return Math.log(1 + (n - df + 0.5) / (df + 0.5));
}

/** A document's length normalisation k1·(1 − b + b·dl/avgdl). */
export function bm25Norm(k1: number, b: number, dl: number, avgdl: number): number {
  return k1 * (1 - b + (b * dl) / avgdl);
}

/** The term's numerator weight·tf·(k1 + 1) (top k's bounds divide it by tf + norm themselves). */
export function bm25Numerator(weight: number, tf: number, k1: number): number {
  return weight * tf * (k1 + 1);
}

/** One word's contribution weight·tf·(k1 + 1)/(tf + norm), `norm` from `bm25Norm`. */
export function bm25Term(weight: number, tf: number, k1: number, norm: number): number {
  return bm25Numerator(weight, tf, k1) / (tf + norm);
}

/** The formula as `explain` prints it. */
export const BM25_FORMULA = 'Σ idf(w)·tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)), idf = ln(1 + (N − df + 0.5)/(df + 0.5))';
