/**
 * Frozen, compact, in-memory view of one keyword-index generation.
 *
 * Everything lives in typed arrays (CSR layouts), optionally backed by
 * SharedArrayBuffer so that worker threads read the very same memory: a `ViewData`
 * can be posted to a worker without copying its arrays. Strings (ids, keywords,
 * words) are stored as UTF-8 blobs with offsets and decoded lazily, once per thread.
 *
 * Matching follows the CoGR rule: entity e matches a probe with keyword set S and
 * self keyword s iff (S ∪ {s}) ∩ (S_e ∪ {self_e}) ≠ ∅. Each entity's self keyword is
 * therefore posted like any other keyword.
 *
 * Ranking is BM25 over bags of words: a document is the multiset of the words of
 * S_e ∪ {self_e}; a probe is the set of distinct words of S ∪ {s}; the score is the sum
 * over the probe's words of bm25.ts's term (Lucene's non-negative idf). Defaults k1 = 1.2, b = 0.75 (Robertson & Zaragoza, "The Probabilistic Relevance
 * Framework: BM25 and Beyond", 2009; also Lucene's defaults). Useful ranges:
 * k1 ∈ [0, 3] (term-frequency saturation), b ∈ [0, 1] (length normalisation).
 * Only integer sums are stored (df, document lengths, total length); avgdl is derived.
 *
 * Keywords are matched on their analysed key (analyzer.ts, recorded in the data): a probe
 * keyword is normalised and analysed the same way before it is looked up, and BM25
 * counts analysed words. `keyword(o)` is a key; `surface(o)` its display form.
 */
import type { IndexEntry, Side } from '../core/types.ts';
import { keywordWords, sharedKeywordNormalizer, type KeywordNormalizer } from '../text/normalize.ts';
import { getAnalyzer, textTokens, type Analyzer } from '../text/analyzer.ts';
import { DEFAULTS } from '../core/defaults.ts';
import { StringTable } from './buffers.ts';
import { buildViewData, type ViewData } from './viewBuild.ts';
import { rankTopK } from './topk.ts';
import { BM25_FORMULA, bm25Idf, bm25Norm, bm25Term, type Bm25Params } from '../text/bm25.ts';

export type { ViewData } from './viewBuild.ts';

export type { Bm25Params } from '../text/bm25.ts';
export const DEFAULT_BM25: Readonly<Bm25Params> = DEFAULTS.bm25;

export interface ScoredEntity {
  id: string;
  ordinal: number;
  score: number;
}

export interface SearchResult {
  /** Size of the whole matched set. */
  matched: number;
  /** Best first; the top k, or every matched entity when `all` is set. */
  items: ScoredEntity[];
}

export interface Probe {
  /** The probe's own string ({q} for a query probing the item index). */
  self?: string;
  keywords: readonly string[];
}

export interface ExplainTerm {
  word: string;
  tf: number;
  df: number;
  idf: number;
  contribution: number;
}

export interface Explanation {
  id: string;
  matched: boolean;
  matchedKeywords: string[];
  score: number;
  docLength: number;
  avgDocLength: number;
  params: Bm25Params;
  terms: ExplainTerm[];
  formula: string;
}

/** A read-only view of one generation. Cheap to construct from ViewData in any thread. */
export class KeywordView {
  readonly data: ViewData;
  readonly side: Side;
  readonly generation: number;
  readonly size: number;
  private readonly idTable: StringTable;
  private readonly kwTable: StringTable;
  private readonly wordTable: StringTable;
  private readonly surfTable: StringTable | null;
  /** How this view's keys were made; probes are analysed the same way. */
  readonly analyzer: Analyzer;
  private readonly norm: KeywordNormalizer;
  private stamp: Uint32Array | null = null;
  private epoch = 0;

  constructor(data: ViewData) {
    this.data = data;
    this.side = data.side;
    this.generation = data.generation;
    this.size = data.numEntities;
    this.idTable = new StringTable(data.idsBlob, data.idsOff, data.numEntities);
    this.kwTable = new StringTable(data.kwBlob, data.kwOff, data.numKeywords);
    this.wordTable = new StringTable(data.wordBlob, data.wordOff, data.numWords);
    this.analyzer = getAnalyzer(data.analyzer);
    this.norm = sharedKeywordNormalizer(data.analyzer);
    this.surfTable = data.surfOff.length > 1 ? new StringTable(data.surfBlob, data.surfOff, data.numKeywords) : null;
  }

  static build(
    side: Side,
    generation: number,
    entries: readonly IndexEntry[],
    opts: { shared?: boolean; analyzer?: Analyzer['name'] } = {},
  ): KeywordView {
    return new KeywordView(buildViewData(side, generation, entries, opts));
  }

  get numKeywords(): number {
    return this.data.numKeywords;
  }
  get avgDocLength(): number {
    return this.size === 0 ? 0 : this.data.totalLength / this.size;
  }

  id(ordinal: number): string {
    return this.idTable.all()[ordinal];
  }
  ids(): string[] {
    return this.idTable.all();
  }
  /** Ordinal of an entity id, −1 when absent. */
  ordinalOf(id: string): number {
    return this.idTable.lookup(id);
  }
  /** The match key of a keyword ordinal. */
  keyword(ordinal: number): string {
    return this.kwTable.all()[ordinal];
  }
  /** The display (surface) form of a keyword ordinal: the form its entities use most. */
  surface(ordinal: number): string {
    return this.surfTable ? this.surfTable.all()[ordinal] : this.kwTable.all()[ordinal];
  }
  /** The sorted keyword vocabulary as match keys (self keywords included). */
  vocabulary(): string[] {
    return this.kwTable.all();
  }
  /** Ordinal of a match key (already normalised and analysed), −1 when absent. */
  keywordOrdinal(key: string): number {
    return this.kwTable.lookup(key);
  }
  /** The match key of a raw keyword under this view's analyzer (null: rejected by normalisation). */
  keyOf(raw: string): string | null {
    return this.norm.key(raw);
  }
  /** Ordinal of a raw keyword (normalised and analysed), −1 when absent or rejected. */
  ordinalOfKeyword(raw: string): number {
    const k = this.norm.key(raw);
    return k === null ? -1 : this.kwTable.lookup(k);
  }
  word(ordinal: number): string {
    return this.wordTable.all()[ordinal];
  }
  wordOrdinal(w: string): number {
    return this.wordTable.lookup(w);
  }
  /** Number of entities posted under a keyword ordinal (document frequency of the keyword). */
  keywordDf(k: number): number {
    return this.data.postOff[k + 1] - this.data.postOff[k];
  }
  postings(k: number): Int32Array {
    return this.data.post.subarray(this.data.postOff[k], this.data.postOff[k + 1]);
  }
  /** S_e: the entity's keywords (self keyword excluded) in their surface forms, in key order. */
  keywordsOf(ordinal: number): string[] {
    const { fwdOff, fwd } = this.data;
    const out: string[] = [];
    for (let j = fwdOff[ordinal]; j < fwdOff[ordinal + 1]; j++) out.push(this.surface(fwd[j]));
    return out;
  }
  selfOf(ordinal: number): string {
    const s = this.data.self[ordinal];
    return s < 0 ? '' : this.surface(s);
  }
  entry(ordinal: number): IndexEntry {
    return { id: this.id(ordinal), self: this.selfOf(ordinal), keywords: this.keywordsOf(ordinal) };
  }
  entries(): IndexEntry[] {
    const out: IndexEntry[] = [];
    for (let e = 0; e < this.size; e++) out.push(this.entry(e));
    return out;
  }

  /**
   * Whether a probe has a searchable term in this view: one of its keywords (or its self
   * keyword) is in the vocabulary, or a word of its self text (stop words aside, analysed)
   * is among the words of the keywords. A blank, stop-word-only or unknown probe has none
   * (search answers it with `no_terms`).
   */
  hasSearchableTerm(probe: Probe): boolean {
    if (this.probeKeywordOrdinals(probe).length > 0) return true;
    for (const w of textTokens(probe.self ?? '', this.analyzer)) if (this.wordOrdinal(w) >= 0) return true;
    return false;
  }

  /**
   * Keyword ordinals of a probe: its keywords normalised (rejected ones dropped) plus its
   * self keyword; those absent from this view's vocabulary are dropped.
   */
  probeKeywordOrdinals(probe: Probe): number[] {
    const out = new Set<number>();
    for (const raw of probe.keywords) {
      const k = this.norm.key(raw);
      if (k === null) continue;
      const o = this.kwTable.lookup(k);
      if (o >= 0) out.add(o);
    }
    if (probe.self !== undefined) {
      const s = this.norm.selfKey(probe.self);
      if (s.length > 0) {
        const o = this.kwTable.lookup(s);
        if (o >= 0) out.add(o);
      }
    }
    return [...out];
  }

  /** The whole matched set as sorted entity ordinals. */
  matchOrdinals(keywordOrdinals: readonly number[]): Int32Array {
    const { postOff, post } = this.data;
    if (keywordOrdinals.length === 1) {
      const k = keywordOrdinals[0];
      return post.slice(postOff[k], postOff[k + 1]);
    }
    if (!this.stamp || this.stamp.length < this.size) this.stamp = new Uint32Array(this.size);
    if (++this.epoch === 0xffffffff) {
      this.stamp.fill(0);
      this.epoch = 1;
    }
    const stamp = this.stamp;
    const ep = this.epoch;
    let total = 0;
    for (const k of keywordOrdinals) total += postOff[k + 1] - postOff[k];
    const out = new Int32Array(total);
    let m = 0;
    for (const k of keywordOrdinals) {
      for (let j = postOff[k]; j < postOff[k + 1]; j++) {
        const e = post[j];
        if (stamp[e] !== ep) {
          stamp[e] = ep;
          out[m++] = e;
        }
      }
    }
    return out.subarray(0, m).sort();
  }

  match(probe: Probe): Int32Array {
    return this.matchOrdinals(this.probeKeywordOrdinals(probe));
  }

  /** Distinct word ordinals of a probe (words of S ∪ {s}) present in this view. */
  probeWordOrdinals(probe: Probe): number[] {
    const out = new Set<number>();
    const addWords = (k: string) => {
      for (const w of keywordWords(k)) {
        const o = this.wordTable.lookup(w);
        if (o >= 0) out.add(o);
      }
    };
    for (const raw of probe.keywords) {
      const k = this.norm.key(raw);
      if (k !== null) addWords(k);
    }
    if (probe.self !== undefined) addWords(this.norm.selfKey(probe.self));
    return [...out];
  }

  /**
   * Keyword and word ordinals of a probe at once (`probeKeywordOrdinals` and
   * `probeWordOrdinals` together), its self keyword analysed only once: for callers that
   * need both, such as a Boolean program's `text` nodes.
   */
  probeOrdinals(probe: Probe): { keywords: number[]; words: number[] } {
    const keywords = new Set<number>();
    const words = new Set<number>();
    const add = (key: string) => {
      const o = this.kwTable.lookup(key);
      if (o >= 0) keywords.add(o);
      for (const w of keywordWords(key)) {
        const wo = this.wordTable.lookup(w);
        if (wo >= 0) words.add(wo);
      }
    };
    for (const raw of probe.keywords) {
      const k = this.norm.key(raw);
      if (k !== null) add(k);
    }
    if (probe.self !== undefined) {
      const s = this.norm.selfKey(probe.self);
      if (s.length > 0) add(s);
    }
    return { keywords: [...keywords], words: [...words] };
  }

  idf(wordOrdinal: number): number {
    return bm25Idf(this.size, this.data.wordDf[wordOrdinal]);
  }

  /** Term frequency of a word in an entity's bag (binary search), 0 when absent. */
  tf(ordinal: number, wordOrdinal: number): number {
    const { bagOff, bagWord, bagTf } = this.data;
    let lo = bagOff[ordinal];
    let hi = bagOff[ordinal + 1] - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const w = bagWord[mid];
      if (w === wordOrdinal) return bagTf[mid];
      if (w < wordOrdinal) lo = mid + 1;
      else hi = mid - 1;
    }
    return 0;
  }

  /** BM25 scores of the given entities for the given probe words. */
  score(wordOrdinals: readonly number[], ordinals: ArrayLike<number>, params: Bm25Params = DEFAULT_BM25): Float64Array {
    const { k1, b } = params;
    const avgdl = this.avgDocLength || 1;
    const idfs = wordOrdinals.map((w) => this.idf(w));
    const out = new Float64Array(ordinals.length);
    const docLen = this.data.docLen;
    for (let i = 0; i < ordinals.length; i++) {
      const e = ordinals[i];
      const norm = bm25Norm(k1, b, docLen[e], avgdl);
      let s = 0;
      for (let j = 0; j < wordOrdinals.length; j++) {
        const tf = this.tf(e, wordOrdinals[j]);
        if (tf > 0) s += bm25Term(idfs[j], tf, k1, norm);
      }
      out[i] = s;
    }
    return out;
  }

  /**
   * Retrieval by the method's rule, ranked by BM25: the whole matched set's size and the
   * top k (or all) entities, best first, ties broken by id. A finite top k is ranked with
   * dynamic pruning (topk.ts): the same items, order and scores as `searchExhaustive`,
   * scoring only the entities that can still enter the top k.
   */
  search(probe: Probe, opts: { k?: number; all?: boolean; params?: Bm25Params } = {}): SearchResult {
    const { keywords, words } = this.probeOrdinals(probe);
    if (!opts.all && Number.isFinite(opts.k ?? 10)) {
      const k = Math.max(0, Math.floor(opts.k ?? 10));
      const top = rankTopK(this.data, keywords, words, k, opts.params ?? DEFAULT_BM25);
      // null: parameters without a bound, or a matched set small enough to score whole.
      if (top) return { matched: top.matched, items: top.ordinals.map((e, i) => ({ id: this.id(e), ordinal: e, score: top.scores[i] })) };
    }
    return this.rankExhaustive(keywords, words, opts);
  }

  /**
   * The exhaustive ranking: every matched entity scored, then sorted (`all`) or the best
   * k selected. The reference the pruned top k of `search` equals.
   */
  searchExhaustive(probe: Probe, opts: { k?: number; all?: boolean; params?: Bm25Params } = {}): SearchResult {
    const { keywords, words } = this.probeOrdinals(probe);
    return this.rankExhaustive(keywords, words, opts);
  }

  private rankExhaustive(
    keywordOrdinals: readonly number[],
    wordOrdinals: readonly number[],
    opts: { k?: number; all?: boolean; params?: Bm25Params },
  ): SearchResult {
    const matched = this.matchOrdinals(keywordOrdinals);
    const scores = this.score(wordOrdinals, matched, opts.params);
    const m = matched.length;
    const k = opts.all ? m : Math.max(0, Math.min(m, Math.floor(opts.k ?? 10)));
    let order: number[];
    if (k === m) {
      order = Array.from({ length: m }, (_, i) => i);
      order.sort((x, y) => scores[y] - scores[x] || matched[x] - matched[y]);
    } else {
      // Bounded selection of the best k (score desc, then ordinal asc); matched is
      // ascending, so a later entity never beats an equal score.
      order = [];
      for (let i = 0; i < m && k > 0; i++) {
        const sc = scores[i];
        if (order.length === k) {
          if (!(sc > scores[order[k - 1]])) continue;
          order.pop();
        }
        let pos = order.length;
        while (pos > 0 && sc > scores[order[pos - 1]]) pos--;
        order.splice(pos, 0, i);
      }
    }
    const items: ScoredEntity[] = [];
    for (let i = 0; i < k; i++) {
      const j = order[i];
      items.push({ id: this.id(matched[j]), ordinal: matched[j], score: scores[j] });
    }
    return { matched: m, items };
  }

  /** Why (and how much) an entity matches a probe: shared keywords and each BM25 term. */
  explain(probe: Probe, id: string, params: Bm25Params = DEFAULT_BM25): Explanation | null {
    const e = this.ordinalOf(id);
    if (e < 0) return null;
    const probeKws = new Set(this.probeKeywordOrdinals(probe));
    const own = new Set<number>();
    const { fwdOff, fwd, self } = this.data;
    for (let j = fwdOff[e]; j < fwdOff[e + 1]; j++) own.add(fwd[j]);
    if (self[e] >= 0) own.add(self[e]);
    const matchedKeywords = [...probeKws]
      .filter((k) => own.has(k))
      .map((k) => this.surface(k))
      .sort();
    const avgdl = this.avgDocLength || 1;
    const dl = this.data.docLen[e];
    const norm = bm25Norm(params.k1, params.b, dl, avgdl);
    const terms: ExplainTerm[] = [];
    const words = this.probeWordOrdinals(probe);
    for (const w of words) {
      const tf = this.tf(e, w);
      if (tf === 0) continue;
      const idf = this.idf(w);
      terms.push({ word: this.word(w), tf, df: this.data.wordDf[w], idf, contribution: bm25Term(idf, tf, params.k1, norm) });
    }
    // The score is the scorer's own (the sum of the terms in the probe's word order).
    const score = this.score(words, [e], params)[0];
    terms.sort((a, b) => b.contribution - a.contribution || (a.word < b.word ? -1 : 1));
    return {
      id,
      matched: matchedKeywords.length > 0,
      matchedKeywords,
      score,
      docLength: dl,
      avgDocLength: avgdl,
      params: { ...params },
      terms,
      formula: `${BM25_FORMULA}, N=${this.size}, k1=${params.k1}, b=${params.b}, dl=${dl}, avgdl=${avgdl.toFixed(4)}`,
    };
  }
}
