/**
 * Whether a keyword is related to a query, from the items' texts alone (no embeddings): it
 * is when it shares an analysed word with the query (score 1), and otherwise by how strongly
 * it co-occurs with one of the query's words across the items — the normalised pointwise
 * mutual information (Bouma 2009) of "the item's text holds the keyword's words" and "the
 * item's text holds the query word",
 *   NPMI(k, w) = ln(P(k, w) / (P(k) P(w))) / −ln P(k, w),   in [−1, 1],
 * the best over the query's words (−1 when they never meet, or meet in fewer than
 * MIN_TOGETHER items: two chance meetings say nothing). 1 means they always occur together,
 * 0 that they are independent. The query planner keeps a candidate only at or above the run's
 * threshold (generators/planner/config.ts `relatedness`), so that what a query asks for is
 * what its keywords say: "x-rays" and "radiation" for a question about dental x-rays, not the
 * name of some item the relevance model likes.
 */
import { boundedMemo } from '../../index/core/memo.ts';
import type { RelevanceSource } from './config.ts';

/** Items two words must share before their co-occurrence counts. */
const MIN_TOGETHER = 2;
/** Query words considered (the rarest, by idf). */
const MAX_QUERY_WORDS = 32;

export interface QueryRelatedness {
  /** The relatedness of a keyword (its surface form) to the query: 1 when it shares a word, else its best NPMI with a query word, −1 when none. */
  (keyword: string): number;
}

export class Relatedness {
  /** The relatedness of a relevance source, or null when the rule is off (`tau` null) or the source cannot give words' items. */
  static of(source: RelevanceSource, tau: number | null): Relatedness | null {
    if (tau === null || !source.wordItems || !source.textWords) return null;
    return new Relatedness(source as RelevanceSource & { wordItems(word: string): Int32Array }, source.size ?? 0);
  }

  private readonly n: number;
  private readonly keywordItems: (keyword: string) => Int32Array | null;
  private mask: Uint32Array;

  constructor(
    private readonly source: RelevanceSource & { wordItems(word: string): Int32Array },
    size: number,
  ) {
    this.n = size;
    this.mask = new Uint32Array(size);
    // The items whose text holds every word of a keyword (null: a word no item has).
    this.keywordItems = boundedMemo((k: string) => {
      const ws = [...new Set(this.words(k))];
      if (ws.length === 0) return null;
      const lists = ws.map((w) => source.wordItems(w)).sort((a, b) => a.length - b.length);
      if (lists[0].length === 0) return null;
      let cur: Int32Array = lists[0];
      for (let i = 1; i < lists.length && cur.length > 0; i++) cur = intersect(cur, lists[i]);
      return cur;
    }, 1 << 16);
  }

  private words(text: string): string[] {
    return this.source.textWords ? this.source.textWords(text) : [];
  }

  /** The relatedness function of one query (its words' items marked once). */
  forQuery(text: string): QueryRelatedness {
    const qWords = [...new Set(this.words(text))]
      .map((w) => ({ w, items: this.source.wordItems(w) }))
      .filter((x) => x.items.length > 0)
      .sort((a, b) => a.items.length - b.items.length || (a.w < b.w ? -1 : 1))
      .slice(0, MAX_QUERY_WORDS);
    const own = new Set(this.words(text));
    const mask = this.mask;
    mask.fill(0);
    qWords.forEach((x, j) => {
      for (const e of x.items) mask[e] |= 1 << j;
    });
    const n = this.n;
    const counts = new Int32Array(qWords.length);
    const memo = new Map<string, number>();
    return (keyword: string): number => {
      let r = memo.get(keyword);
      if (r !== undefined) return r;
      const kw = this.words(keyword);
      if (kw.some((w) => own.has(w))) r = 1;
      else {
        r = -1;
        const items = this.keywordItems(keyword);
        if (items && items.length > 0) {
          counts.fill(0);
          for (const e of items) {
            let m = mask[e];
            while (m !== 0) {
              const j = 31 - Math.clz32(m & -m);
              counts[j]++;
              m &= m - 1;
            }
          }
          const pk = items.length / n;
          for (let j = 0; j < qWords.length; j++) {
            if (counts[j] < MIN_TOGETHER) continue;
            const pkw = counts[j] / n;
            const pw = qWords[j].items.length / n;
            const v = pkw >= 1 ? 1 : Math.log(pkw / (pk * pw)) / -Math.log(pkw);
            if (v > r) r = v;
          }
        }
      }
      memo.set(keyword, r);
      return r;
    };
  }
}

/** The common elements of two ascending lists. */
function intersect(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(Math.min(a.length, b.length));
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) {
    if (a[i] < b[j]) i++;
    else if (a[i] > b[j]) j++;
    else {
      out[k++] = a[i];
      i++;
      j++;
    }
  }
  return out.subarray(0, k);
}
