/**
 * The opposite side's index as the embedded policy sees it: a first-stage word-level
 * BM25 search over the frozen view's word bags (words of S_e ∪ {self_e}), the keywords of
 * the top-ranked entities, and keyword document frequencies. Built once per attached
 * view: word → entity postings in CSR typed arrays from the view's bags.
 */
import type { KeywordView } from '../../index/view.ts';
import { DEFAULTS } from '../../index/defaults.ts';

export interface ExpansionKeyword {
  keyword: string;
  /** Share of the top-m entities carrying the keyword (S_e or self). */
  share: number;
  /** Σ over carrying entities of 1/(rank+1), divided by Σ_{r<m} 1/(r+1). */
  support: number;
  /** Carrying entities among the top-m divided by the keyword's df (the share of its postings there). */
  precision: number;
}

export class OppositeIndex {
  readonly view: KeywordView;
  private readonly wpOff: Int32Array;
  private readonly wpEnt: Int32Array;
  private readonly wpTf: Int32Array;
  private readonly idf: Float64Array;
  private readonly acc: Float64Array;
  private readonly k1 = DEFAULTS.bm25.k1;
  private readonly b = DEFAULTS.bm25.b;
  private readonly logN: number;

  constructor(view: KeywordView) {
    this.view = view;
    const d = view.data;
    const nW = d.numWords;
    const off = new Int32Array(nW + 1);
    for (let j = 0; j < d.bagWord.length; j++) off[d.bagWord[j] + 1]++;
    for (let w = 0; w < nW; w++) off[w + 1] += off[w];
    const ent = new Int32Array(d.bagWord.length);
    const tf = new Int32Array(d.bagWord.length);
    const cur = off.slice(0, nW);
    for (let e = 0; e < d.numEntities; e++) {
      for (let j = d.bagOff[e]; j < d.bagOff[e + 1]; j++) {
        const w = d.bagWord[j];
        ent[cur[w]] = e;
        tf[cur[w]++] = d.bagTf[j];
      }
    }
    this.wpOff = off;
    this.wpEnt = ent;
    this.wpTf = tf;
    this.idf = new Float64Array(nW);
    for (let w = 0; w < nW; w++) this.idf[w] = view.idf(w);
    this.acc = new Float64Array(d.numEntities);
    this.logN = Math.log1p(Math.max(1, d.numEntities));
  }

  /** Number of entities posted under a normalised keyword (0 when absent). */
  keywordDf(k: string): number {
    const o = this.view.ordinalOfKeyword(k);
    return o < 0 ? 0 : this.view.keywordDf(o);
  }
  /** log(1 + df) / log(1 + N), in [0, 1]. */
  scaledDf(k: string): number {
    return Math.log1p(this.keywordDf(k)) / this.logN;
  }

  /** Top-m entity ordinals by BM25 of the given (distinct) words over the bags. */
  topEntities(words: readonly string[], m: number): number[] {
    const d = this.view.data;
    const avgdl = this.view.avgDocLength || 1;
    const touched: number[] = [];
    const acc = this.acc;
    for (const w of new Set(words)) {
      const o = this.view.wordOrdinal(this.view.analyzer.word(w));
      if (o < 0) continue;
      const idf = this.idf[o];
      for (let j = this.wpOff[o]; j < this.wpOff[o + 1]; j++) {
        const e = this.wpEnt[j];
        const t = this.wpTf[j];
        if (acc[e] === 0) touched.push(e);
        acc[e] += (idf * t * (this.k1 + 1)) / (t + this.k1 * (1 - this.b + (this.b * d.docLen[e]) / avgdl));
      }
    }
    touched.sort((x, y) => acc[y] - acc[x] || x - y);
    const top = touched.slice(0, m);
    for (const e of touched) acc[e] = 0;
    return top;
  }

  /** Keywords (S_e and self) of the top-m entities, with share and rank-weighted support. */
  expansion(words: readonly string[], m: number): ExpansionKeyword[] {
    const top = this.topEntities(words, m);
    if (top.length === 0) return [];
    let h = 0;
    for (let r = 0; r < m; r++) h += 1 / (r + 1);
    const map = new Map<string, { c: number; s: number }>();
    const d = this.view.data;
    top.forEach((e, r) => {
      const kws = new Set<number>();
      for (let j = d.fwdOff[e]; j < d.fwdOff[e + 1]; j++) kws.add(d.fwd[j]);
      if (d.self[e] >= 0) kws.add(d.self[e]);
      for (const k of kws) {
        const key = this.view.surface(k);
        const v = map.get(key) ?? { c: 0, s: 0 };
        v.c++;
        v.s += 1 / (r + 1);
        map.set(key, v);
      }
    });
    return [...map.entries()].map(([keyword, v]) => {
      const df = Math.max(v.c, this.keywordDf(keyword));
      return { keyword, share: v.c / m, support: v.s / h, precision: v.c / df };
    });
  }
}
