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
 * S_e ∪ {self_e}; a probe is the set of distinct words of S ∪ {s}.
 *   idf(w)   = ln(1 + (N − df(w) + 0.5) / (df(w) + 0.5))            (Lucene's non-negative idf)
 *   score    = Σ_w idf(w) · tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avgdl))
 * Defaults k1 = 1.2, b = 0.75 (Robertson & Zaragoza, "The Probabilistic Relevance
 * Framework: BM25 and Beyond", 2009; also Lucene's defaults). Useful ranges:
 * k1 ∈ [0, 3] (term-frequency saturation), b ∈ [0, 1] (length normalisation).
 * Only integer sums are stored (df, document lengths, total length); avgdl is derived.
 */
import type { IndexEntry, Side } from './types.ts';
import { keywordWords, makeKeywordNormalizer, normalizeKeyword, normalizeSelf } from './normalize.ts';
import { DEFAULTS } from './defaults.ts';
import { encodeStrings, i32, StringTable } from './buffers.ts';

export interface Bm25Params {
  k1: number;
  b: number;
}
export const DEFAULT_BM25: Readonly<Bm25Params> = DEFAULTS.bm25;

/** Plain, structured-clone-friendly data of a view. Arrays may sit on SharedArrayBuffers. */
export interface ViewData {
  side: Side;
  generation: number;
  numEntities: number;
  numKeywords: number;
  numWords: number;
  /** Σ document lengths in words (integer); avgdl = totalLength / numEntities. */
  totalLength: number;
  idsBlob: Uint8Array;
  idsOff: Int32Array;
  kwBlob: Uint8Array;
  kwOff: Int32Array;
  wordBlob: Uint8Array;
  wordOff: Int32Array;
  /** keyword ordinal → sorted entity ordinals (self keywords included). */
  postOff: Int32Array;
  post: Int32Array;
  /** entity ordinal → sorted keyword ordinals of S_e (self keyword excluded). */
  fwdOff: Int32Array;
  fwd: Int32Array;
  /** entity ordinal → keyword ordinal of its self keyword, −1 when it is empty. */
  self: Int32Array;
  /** entity ordinal → (sorted word ordinals, term frequencies). */
  bagOff: Int32Array;
  bagWord: Int32Array;
  bagTf: Int32Array;
  docLen: Int32Array;
  /** word ordinal → number of entities whose bag contains it. */
  wordDf: Int32Array;
}

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

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Build the compact data of a view from entries. Entries are ordered by id, so
 * ordinals (and every tie-break by ordinal) follow id order.
 */
export function buildViewData(
  side: Side,
  generation: number,
  entries: readonly IndexEntry[],
  opts: { shared?: boolean } = {},
): ViewData {
  const shared = opts.shared ?? false;
  const sorted = [...entries].sort((a, b) => compareStrings(a.id, b.id));
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i].id === sorted[i - 1].id) throw new Error(`duplicate entity id ${JSON.stringify(sorted[i].id)} in ${side} index`);
  }
  const n = sorted.length;
  // Normalise; collect keyword and word vocabularies.
  const selfs: string[] = new Array(n);
  const kwSets: string[][] = new Array(n);
  const kwVocab = new Set<string>();
  // Keyword strings repeat across entities: normalise each distinct raw string once.
  const norm = makeKeywordNormalizer({ memo: Infinity });
  for (let e = 0; e < n; e++) {
    const s = norm.self(sorted[e].self);
    selfs[e] = s;
    if (s.length > 0) kwVocab.add(s);
    const seen = new Set<string>();
    for (const raw of sorted[e].keywords) {
      const k = norm.keyword(raw);
      if (k !== null) seen.add(k);
    }
    kwSets[e] = [...seen];
    for (const k of seen) kwVocab.add(k);
  }
  const keywords = [...kwVocab].sort(compareStrings);
  const kwIndex = new Map<string, number>();
  keywords.forEach((k, i) => kwIndex.set(k, i));

  const wordVocab = new Set<string>();
  for (const k of keywords) for (const w of keywordWords(k)) wordVocab.add(w);
  const words = [...wordVocab].sort(compareStrings);
  const wordIndex = new Map<string, number>();
  words.forEach((w, i) => wordIndex.set(w, i));

  // Forward index and bags.
  // Word ordinals of every keyword, once (CSR), so entity bags need no string work.
  const kwWordOff = new Int32Array(keywords.length + 1);
  const kwWordList: number[] = [];
  for (let k = 0; k < keywords.length; k++) {
    kwWordOff[k] = kwWordList.length;
    for (const w of keywordWords(keywords[k])) kwWordList.push(wordIndex.get(w)!);
  }
  kwWordOff[keywords.length] = kwWordList.length;
  const kwWords = Int32Array.from(kwWordList);

  // Forward index and bags; a scratch tf array indexed by word ordinal avoids per-entity maps.
  const fwdOff = i32(n + 1, shared);
  const self = i32(n, shared);
  const bagOff = i32(n + 1, shared);
  const docLen = i32(n, shared);
  const fwdLists: Int32Array[] = new Array(n);
  const bagWordList: number[] = [];
  const bagTfList: number[] = [];
  let fwdTotal = 0;
  let totalLength = 0;
  const postCount = new Int32Array(keywords.length);
  const wordDfArr = new Int32Array(words.length);
  const tfScratch = new Int32Array(words.length);
  const touched: number[] = [];
  const addKeyword = (k: number): number => {
    postCount[k]++;
    for (let j = kwWordOff[k]; j < kwWordOff[k + 1]; j++) {
      const w = kwWords[j];
      if (tfScratch[w]++ === 0) touched.push(w);
    }
    return kwWordOff[k + 1] - kwWordOff[k];
  };
  for (let e = 0; e < n; e++) {
    const list = kwSets[e];
    const kws = new Int32Array(list.length);
    for (let j = 0; j < list.length; j++) kws[j] = kwIndex.get(list[j])!;
    kws.sort();
    fwdLists[e] = kws;
    fwdTotal += kws.length;
    const s = selfs[e].length > 0 ? kwIndex.get(selfs[e])! : -1;
    self[e] = s;
    let len = 0;
    for (let j = 0; j < kws.length; j++) len += addKeyword(kws[j]);
    if (s >= 0 && !kws.includes(s)) len += addKeyword(s);
    touched.sort((a, b) => a - b);
    bagOff[e] = bagWordList.length;
    for (const w of touched) {
      bagWordList.push(w);
      bagTfList.push(tfScratch[w]);
      wordDfArr[w]++;
      tfScratch[w] = 0;
    }
    touched.length = 0;
    docLen[e] = len;
    totalLength += len;
  }
  bagOff[n] = bagWordList.length;
  const fwd = i32(fwdTotal, shared);
  const bagWord = i32(bagWordList.length, shared);
  const bagTf = i32(bagTfList.length, shared);
  bagWord.set(bagWordList);
  bagTf.set(bagTfList);
  let fp = 0;
  for (let e = 0; e < n; e++) {
    fwdOff[e] = fp;
    fwd.set(fwdLists[e], fp);
    fp += fwdLists[e].length;
  }
  fwdOff[n] = fp;

  // Postings (CSR), entity ordinals ascending because e is visited in order.
  const postOff = i32(keywords.length + 1, shared);
  let acc = 0;
  for (let k = 0; k < keywords.length; k++) {
    postOff[k] = acc;
    acc += postCount[k];
  }
  postOff[keywords.length] = acc;
  const post = i32(acc, shared);
  const cursor = new Int32Array(keywords.length);
  for (let e = 0; e < n; e++) {
    for (const k of fwdLists[e]) post[postOff[k] + cursor[k]++] = e;
    const s = self[e];
    if (s >= 0 && !fwdLists[e].includes(s)) post[postOff[s] + cursor[s]++] = e;
  }
  const wordDf = i32(words.length, shared);
  wordDf.set(wordDfArr);

  const ids = encodeStrings(
    sorted.map((x) => x.id),
    shared,
  );
  const kw = encodeStrings(keywords, shared);
  const wd = encodeStrings(words, shared);
  return {
    side,
    generation,
    numEntities: n,
    numKeywords: keywords.length,
    numWords: words.length,
    totalLength,
    idsBlob: ids.blob,
    idsOff: ids.off,
    kwBlob: kw.blob,
    kwOff: kw.off,
    wordBlob: wd.blob,
    wordOff: wd.off,
    postOff,
    post,
    fwdOff,
    fwd,
    self,
    bagOff,
    bagWord,
    bagTf,
    docLen,
    wordDf,
  };
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
  }

  static build(side: Side, generation: number, entries: readonly IndexEntry[], opts: { shared?: boolean } = {}): KeywordView {
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
  keyword(ordinal: number): string {
    return this.kwTable.all()[ordinal];
  }
  /** The sorted keyword vocabulary (self keywords included). */
  vocabulary(): string[] {
    return this.kwTable.all();
  }
  /** Ordinal of an already normalised keyword, −1 when absent. */
  keywordOrdinal(k: string): number {
    return this.kwTable.lookup(k);
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
  /** S_e: the entity's keywords (self keyword excluded), sorted. */
  keywordsOf(ordinal: number): string[] {
    const { fwdOff, fwd } = this.data;
    const out: string[] = [];
    for (let j = fwdOff[ordinal]; j < fwdOff[ordinal + 1]; j++) out.push(this.keyword(fwd[j]));
    return out;
  }
  selfOf(ordinal: number): string {
    const s = this.data.self[ordinal];
    return s < 0 ? '' : this.keyword(s);
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
   * Keyword ordinals of a probe: its keywords normalised (rejected ones dropped) plus its
   * self keyword; those absent from this view's vocabulary are dropped.
   */
  probeKeywordOrdinals(probe: Probe): number[] {
    const out = new Set<number>();
    for (const raw of probe.keywords) {
      const k = normalizeKeyword(raw);
      if (k === null) continue;
      const o = this.kwTable.lookup(k);
      if (o >= 0) out.add(o);
    }
    if (probe.self !== undefined) {
      const s = normalizeSelf(probe.self);
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
      const k = normalizeKeyword(raw);
      if (k !== null) addWords(k);
    }
    if (probe.self !== undefined) addWords(normalizeSelf(probe.self));
    return [...out];
  }

  idf(wordOrdinal: number): number {
    const df = this.data.wordDf[wordOrdinal];
    return Math.log(1 + (this.size - df + 0.5) / (df + 0.5));
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
      const norm = k1 * (1 - b + (b * docLen[e]) / avgdl);
      let s = 0;
      for (let j = 0; j < wordOrdinals.length; j++) {
        const tf = this.tf(e, wordOrdinals[j]);
        if (tf > 0) s += (idfs[j] * tf * (k1 + 1)) / (tf + norm);
      }
      out[i] = s;
    }
    return out;
  }

  /**
   * Retrieval by the method's rule, ranked by BM25: the whole matched set's size and the
   * top k (or all) entities, best first, ties broken by id.
   */
  search(probe: Probe, opts: { k?: number; all?: boolean; params?: Bm25Params } = {}): SearchResult {
    const matched = this.match(probe);
    const scores = this.score(this.probeWordOrdinals(probe), matched, opts.params);
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
    const matchedKeywords = [...probeKws].filter((k) => own.has(k)).map((k) => this.keyword(k)).sort();
    const avgdl = this.avgDocLength || 1;
    const dl = this.data.docLen[e];
    const norm = params.k1 * (1 - params.b + (params.b * dl) / avgdl);
    const terms: ExplainTerm[] = [];
    let score = 0;
    for (const w of this.probeWordOrdinals(probe)) {
      const tf = this.tf(e, w);
      if (tf === 0) continue;
      const idf = this.idf(w);
      const contribution = (idf * tf * (params.k1 + 1)) / (tf + norm);
      score += contribution;
      terms.push({ word: this.word(w), tf, df: this.data.wordDf[w], idf, contribution });
    }
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
      formula: `Σ idf(w)·tf·(k1+1)/(tf + k1·(1 − b + b·dl/avgdl)), idf = ln(1 + (N − df + 0.5)/(df + 0.5)), N=${this.size}, k1=${params.k1}, b=${params.b}, dl=${dl}, avgdl=${avgdl.toFixed(4)}`,
    };
  }
}
