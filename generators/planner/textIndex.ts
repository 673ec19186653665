/**
 * BM25 over running text (item title + description, or training query texts), the
 * first-stage signal of the relevance model. Words come from index/text/analyzer.ts
 * `textTokens` (lower-case letter/digit runs, stop words removed, analysed) or from the
 * tokenizer given (index/text/english.ts luceneEnglishTokens), postings
 * are CSR typed arrays, and scoring is term-at-a-time into a dense accumulator: the score
 * of a document is the sum over the text's distinct words of index/bm25.ts's term
 * (Lucene's non-negative idf; k1 1.2, b 0.75).
 */
import { textTokens, type Analyzer } from '../../index/text/analyzer.ts';
import { bm25Idf, bm25Norm, bm25Term, type Bm25Params } from '../../index/text/bm25.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';

export interface TextScores {
  /** BM25 score of every document (0 when it shares no word with the text). */
  scores: Float64Array;
  /** Σ idf over the text's distinct words that occur in the collection. */
  sumIdf: number;
  /** Documents with a positive score, best first (ties: lower ordinal first). */
  ranked: Int32Array;
}

export class TextIndex {
  readonly size: number;
  private readonly vocab = new Map<string, number>();
  private readonly postOff: Int32Array;
  private readonly postDoc: Int32Array;
  private readonly postTf: Int32Array;
  private readonly idf: Float64Array;
  private readonly norm: Float64Array;
  private readonly k1: number;

  /** The words of a text (textTokens with the analyzer, or the tokenizer the index was built with). */
  readonly tokens: (text: string) => string[];

  constructor(
    docs: readonly string[],
    readonly analyzer: Analyzer,
    params: Bm25Params = DEFAULTS.bm25,
    tokenize?: (text: string) => string[],
  ) {
    this.tokens = tokenize ?? ((t) => textTokens(t, analyzer));
    const n = docs.length;
    this.size = n;
    this.k1 = params.k1;
    const docTerms: Int32Array[] = new Array(n);
    const docTfs: Int32Array[] = new Array(n);
    const dl = new Float64Array(n);
    const df: number[] = [];
    let total = 0;
    for (let d = 0; d < n; d++) {
      const tf = new Map<number, number>();
      const toks = this.tokens(docs[d]);
      for (const w of toks) {
        let o = this.vocab.get(w);
        if (o === undefined) {
          o = this.vocab.size;
          this.vocab.set(w, o);
          df.push(0);
        }
        tf.set(o, (tf.get(o) ?? 0) + 1);
      }
      dl[d] = toks.length;
      total += toks.length;
      docTerms[d] = Int32Array.from(tf.keys());
      docTfs[d] = Int32Array.from(tf.values());
      for (const o of tf.keys()) df[o]++;
    }
    const nw = df.length;
    this.postOff = new Int32Array(nw + 1);
    for (let w = 0; w < nw; w++) this.postOff[w + 1] = this.postOff[w] + df[w];
    this.postDoc = new Int32Array(this.postOff[nw]);
    this.postTf = new Int32Array(this.postOff[nw]);
    const cur = this.postOff.slice(0, nw);
    for (let d = 0; d < n; d++) {
      const ts = docTerms[d];
      for (let j = 0; j < ts.length; j++) {
        const p = cur[ts[j]]++;
        this.postDoc[p] = d;
        this.postTf[p] = docTfs[d][j];
      }
    }
    this.idf = new Float64Array(nw);
    for (let w = 0; w < nw; w++) this.idf[w] = bm25Idf(n, df[w]);
    const avgdl = n > 0 && total > 0 ? total / n : 1;
    this.norm = new Float64Array(n);
    for (let d = 0; d < n; d++) this.norm[d] = bm25Norm(params.k1, params.b, dl[d], avgdl);
  }

  /** idf of an (analysed) word, the idf of an unseen word when the collection lacks it. */
  idfOf(word: string): number {
    const o = this.vocab.get(word);
    return o === undefined ? bm25Idf(this.size, 0) : this.idf[o];
  }

  /** The documents (ascending) that hold an analysed word (empty when none does). */
  docsOf(word: string): Int32Array {
    const o = this.vocab.get(word);
    return o === undefined ? new Int32Array(0) : this.postDoc.subarray(this.postOff[o], this.postOff[o + 1]);
  }

  /** Distinct word ordinals of a text that occur in the collection. */
  terms(text: string): number[] {
    const out = new Set<number>();
    for (const w of this.tokens(text)) {
      const o = this.vocab.get(w);
      if (o !== undefined) out.add(o);
    }
    return [...out];
  }

  /** The word of an ordinal (the vocabulary in first-seen order, built on first use). */
  word(o: number): string {
    this.words ??= [...this.vocab.keys()];
    return this.words[o];
  }
  private words: string[] | null = null;

  /** The ordinal of an (analysed) word, −1 when the collection lacks it. */
  wordOrdinal(word: string): number {
    return this.vocab.get(word) ?? -1;
  }

  /** Documents containing the word ordinal. */
  df(o: number): number {
    return this.postOff[o + 1] - this.postOff[o];
  }

  /** The document's words and term frequencies (ordinals; built for all documents on first use). */
  docTerms(d: number): { terms: Int32Array; tfs: Int32Array } {
    if (!this.fwd) {
      const n = this.size;
      const len = new Int32Array(n + 1);
      for (let j = 0; j < this.postDoc.length; j++) len[this.postDoc[j] + 1]++;
      for (let i = 0; i < n; i++) len[i + 1] += len[i];
      const terms = new Int32Array(this.postDoc.length);
      const tfs = new Int32Array(this.postDoc.length);
      const cur = len.slice(0, n);
      for (let w = 0; w < this.idf.length; w++) {
        for (let j = this.postOff[w]; j < this.postOff[w + 1]; j++) {
          const p = cur[this.postDoc[j]]++;
          terms[p] = w;
          tfs[p] = this.postTf[j];
        }
      }
      this.fwd = { off: len, terms, tfs };
    }
    const { off, terms, tfs } = this.fwd;
    return { terms: terms.subarray(off[d], off[d + 1]), tfs: tfs.subarray(off[d], off[d + 1]) };
  }
  private fwd: { off: Int32Array; terms: Int32Array; tfs: Int32Array } | null = null;

  /** BM25 of every document for a text (each distinct word weighted 1). */
  score(text: string): TextScores {
    return this.scoreWeighted(new Map(this.terms(text).map((w) => [w, 1])));
  }

  /** BM25 of every document for a text, each word weighted by how often the text repeats it (Lucene's one clause per token). */
  scoreCounts(text: string): TextScores {
    const m = new Map<number, number>();
    for (const w of this.tokens(text)) {
      const o = this.vocab.get(w);
      if (o !== undefined) m.set(o, (m.get(o) ?? 0) + 1);
    }
    return this.scoreWeighted(m);
  }

  /**
   * BM25 of every document for weighted words (ordinal → weight): the sum of bm25.ts's
   * term with weight(w)·idf(w) for idf, as Lucene scores a query of boosted terms.
   * `sumIdf` is Σ idf over the words (unweighted).
   */
  scoreWeighted(weights: ReadonlyMap<number, number>): TextScores {
    const scores = new Float64Array(this.size);
    let sumIdf = 0;
    const k1 = this.k1;
    let touched = 0;
    for (const [w, weight] of weights) {
      const idf = this.idf[w];
      sumIdf += idf;
      const wi = weight * idf;
      for (let j = this.postOff[w]; j < this.postOff[w + 1]; j++) {
        const d = this.postDoc[j];
        const tf = this.postTf[j];
        if (scores[d] === 0) touched++;
        scores[d] += bm25Term(wi, tf, k1, this.norm[d]);
      }
    }
    const ranked = new Int32Array(touched);
    let m = 0;
    for (let d = 0; d < this.size; d++) if (scores[d] > 0) ranked[m++] = d;
    const r = ranked.subarray(0, m);
    r.sort();
    const arr = Array.from(r).sort((a, b) => scores[b] - scores[a] || a - b);
    return { scores, sumIdf, ranked: Int32Array.from(arr) };
  }
}
