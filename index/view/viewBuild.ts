/**
 * Building the compact data of a view (`ViewData`, read by `KeywordView` in view.ts):
 * keyword and word vocabularies sorted, CSR postings keyword → entity ordinals (self
 * keywords posted like any keyword), the forward index entity → keywords, per-entity word
 * bags with term frequencies, document lengths and word document frequencies, all in
 * typed arrays that may sit on SharedArrayBuffer. Entries are ordered by id, so ordinals
 * (and every tie-break by ordinal) follow id order.
 *
 * Keywords are matched on their analysed key (analyzer.ts): the vocabulary, postings and
 * word bags hold keys (under `english`, "statins" and "statin" are one keyword, and BM25
 * counts stemmed words); each key keeps the surface form entities use most (ties: the
 * smallest string) for display. Under `none` the key is the surface form and no surface
 * table is stored.
 *
 * Built in flat typed arrays, with no per-entity objects: each distinct raw keyword
 * string is normalised once, each distinct surface form analysed once, surfaces and keys
 * interned to integer ids (one Map look-up per keyword occurrence); the distinct keys and
 * words are sorted once with the built-in string sort; forward lists, bags and postings
 * are written by counting passes into arrays allocated once.
 */
import type { IndexEntry, Side } from '../core/types.ts';
import { keywordWords, normalizeKeyword, normalizeSelf } from '../text/normalize.ts';
import { DEFAULT_ANALYZER, getAnalyzer, type AnalyzerName } from '../text/analyzer.ts';
import { encodeStrings, i32 } from './buffers.ts';

/** Plain, structured-clone-friendly data of a view. Arrays may sit on SharedArrayBuffers. */
export interface ViewData {
  side: Side;
  /** How keyword keys were made (analyzer.ts). */
  analyzer: AnalyzerName;
  /** keyword ordinal → its most used surface form (empty when the analyzer is `none`: the key is the surface). */
  surfBlob: Uint8Array;
  surfOff: Int32Array;
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

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A growable Int32Array (amortised doubling) for counts whose final size is not known up front. */
class IntList {
  a: Int32Array;
  n = 0;
  constructor(cap = 1024) {
    this.a = new Int32Array(Math.max(16, cap));
  }
  push(x: number): void {
    if (this.n === this.a.length) this.grow(this.n + 1);
    this.a[this.n++] = x;
  }
  /** Make room for at least `cap` elements (zero-filled). */
  grow(cap: number): void {
    if (cap <= this.a.length) return;
    const b = new Int32Array(Math.max(cap, 2 * this.a.length));
    b.set(this.a);
    this.a = b;
  }
}

/** Sort a[from, to) ascending in place: insertion sort for the usual short runs, the built-in sort otherwise. */
function sortRun(a: Int32Array, from: number, to: number): void {
  if (to - from > 32) {
    a.subarray(from, to).sort();
    return;
  }
  for (let i = from + 1; i < to; i++) {
    const x = a[i];
    let j = i - 1;
    while (j >= from && a[j] > x) {
      a[j + 1] = a[j];
      j--;
    }
    a[j + 1] = x;
  }
}

/** Entry indices in id order (duplicate ids refused). Ids already ascending (a store's entries are) need no sort. */
function idOrder(side: Side, entries: readonly IndexEntry[]): Int32Array {
  const n = entries.length;
  const order = new Int32Array(n);
  let ascending = true;
  for (let i = 1; i < n && ascending; i++) ascending = entries[i - 1].id < entries[i].id;
  if (ascending) {
    for (let i = 0; i < n; i++) order[i] = i;
    return order;
  }
  const ids: string[] = new Array(n);
  for (let i = 0; i < n; i++) ids[i] = entries[i].id;
  // Sorting indices of a plain array with a comparator exploits ascending runs of ids.
  const idx: number[] = new Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  idx.sort((x, y) => compareStrings(ids[x], ids[y]));
  for (let r = 0; r < n; r++) {
    order[r] = idx[r];
    if (r > 0 && ids[idx[r]] === ids[idx[r - 1]]) throw new Error(`duplicate entity id ${JSON.stringify(ids[idx[r]])} in ${side} index`);
  }
  return order;
}

/** Number of words of a non-empty normalised keyword or key (words are joined by single spaces). */
function wordCount(k: string): number {
  let c = 1;
  for (let i = k.indexOf(' '); i >= 0; i = k.indexOf(' ', i + 1)) c++;
  return c;
}

/**
 * Build the compact data of a view from entries. Entries are ordered by id, so
 * ordinals (and every tie-break by ordinal) follow id order.
 */
export function buildViewData(
  side: Side,
  generation: number,
  entries: readonly IndexEntry[],
  opts: { shared?: boolean; analyzer?: AnalyzerName } = {},
): ViewData {
  const shared = opts.shared ?? false;
  const analyzer = opts.analyzer ?? DEFAULT_ANALYZER;
  const plain = analyzer === 'none';
  const an = getAnalyzer(analyzer);
  const n = entries.length;
  const order = idOrder(side, entries);

  // 1. Intern, entity by entity in id order. Keys (match keys) get provisional ids in
  // order of first appearance; under an analyzer, surface forms get ids too, each with
  // its key and the number of entities using it (a self keyword counts once, a keyword
  // once per entity: the first surface of each key in the entity's list).
  const keyId = new Map<string, number>();
  const keyStr: string[] = [];
  const keyLen = new IntList(); // words per key
  const internKey = (k: string): number => {
    let id = keyId.get(k);
    if (id === undefined) {
      id = keyStr.length;
      keyStr.push(k);
      keyId.set(k, id);
      keyLen.push(wordCount(k));
    }
    return id;
  };
  const surfId = new Map<string, number>();
  const surfStr: string[] = [];
  const surfKey = new IntList();
  const surfCount = new IntList();
  const internSurface = (sf: string): number => {
    let id = surfId.get(sf);
    if (id === undefined) {
      id = surfStr.length;
      surfStr.push(sf);
      surfId.set(sf, id);
      surfKey.push(internKey(an.keyOnce(sf)));
      surfCount.push(0);
    }
    return id;
  };
  // raw keyword string → surface id (analysed) or key id (plain); −1 when rejected.
  const rawId = new Map<string, number>();
  let occurrences = 0;
  for (let i = 0; i < n; i++) occurrences += entries[i].keywords.length;
  // The distinct keyword keys of each entity, in list order (key ids now, ordinals in step 3).
  const fwdOff = i32(n + 1, shared);
  const occ = new Int32Array(occurrences);
  const selfKey = new Int32Array(n);
  const selfExtra = new Uint8Array(n); // self keyword not among S_e: posted and bagged besides them
  const docLen = i32(n, shared);
  const stamp = new IntList(); // key id → 1 + the last entity that listed it
  let o = 0;
  let totalLength = 0;
  for (let r = 0; r < n; r++) {
    const ent = entries[order[r]];
    fwdOff[r] = o;
    const mark = r + 1;
    const kws = ent.keywords;
    let len = 0;
    for (let j = 0; j < kws.length; j++) {
      const raw = kws[j];
      let v = rawId.get(raw);
      if (v === undefined) {
        const sf = normalizeKeyword(raw);
        v = sf === null ? -1 : plain ? internKey(sf) : internSurface(sf);
        rawId.set(raw, v);
      }
      if (v < 0) continue;
      const k = plain ? v : surfKey.a[v];
      if (k >= stamp.a.length) stamp.grow(keyStr.length);
      if (stamp.a[k] === mark) continue;
      stamp.a[k] = mark;
      occ[o++] = k;
      len += keyLen.a[k];
      if (!plain) surfCount.a[v]++;
    }
    const sf = normalizeSelf(ent.self);
    let s = -1;
    if (sf.length > 0) {
      if (plain) s = internKey(sf);
      else {
        const v = internSurface(sf);
        surfCount.a[v]++;
        s = surfKey.a[v];
      }
      if (s >= stamp.a.length) stamp.grow(keyStr.length);
      if (stamp.a[s] !== mark) {
        selfExtra[r] = 1;
        len += keyLen.a[s];
      }
    }
    selfKey[r] = s;
    docLen[r] = len;
    totalLength += len;
  }
  fwdOff[n] = o;
  rawId.clear();
  surfId.clear();

  // 2. Keyword ordinals (the sorted keys) and the words of each key (ordinals of the
  // sorted word vocabulary). The built-in sort orders strings by UTF-16 code units, as `<`.
  const K = keyStr.length;
  const keywords = keyStr.slice().sort();
  const ordOf = new Int32Array(K); // key id → ordinal
  for (let i = 0; i < K; i++) ordOf[keyId.get(keywords[i])!] = i;
  keyId.clear();
  const wordId = new Map<string, number>();
  const wordStr: string[] = [];
  const kwWordOff = new Int32Array(K + 1);
  let nkw = 0;
  for (let k = 0; k < K; k++) nkw += keyLen.a[k];
  const kwWords = new Int32Array(nkw);
  let q = 0;
  for (let k = 0; k < K; k++) {
    kwWordOff[k] = q;
    for (const w of keywordWords(keywords[k])) {
      let id = wordId.get(w);
      if (id === undefined) {
        id = wordStr.length;
        wordStr.push(w);
        wordId.set(w, id);
      }
      kwWords[q++] = id;
    }
  }
  kwWordOff[K] = q;
  const W = wordStr.length;
  const words = wordStr.slice().sort();
  const wordOrd = new Int32Array(W);
  for (let i = 0; i < W; i++) wordOrd[wordId.get(words[i])!] = i;
  wordId.clear();
  for (let j = 0; j < q; j++) kwWords[j] = wordOrd[kwWords[j]];

  // 3. Forward lists (sorted keyword ordinals), self ordinals, bags (the words of
  // S_e ∪ {self} with term frequencies, sorted by word ordinal), word document frequencies.
  const self = i32(n, shared);
  const postCount = new Int32Array(K);
  const bagOff = i32(n + 1, shared);
  const bagWordTmp = new Int32Array(totalLength);
  const bagTfTmp = new Int32Array(totalLength);
  const wordDf = i32(W, shared);
  const tfScratch = new Int32Array(W);
  let bp = 0;
  for (let r = 0; r < n; r++) {
    const from = fwdOff[r];
    const to = fwdOff[r + 1];
    for (let j = from; j < to; j++) occ[j] = ordOf[occ[j]];
    sortRun(occ, from, to);
    const s = selfKey[r] >= 0 ? ordOf[selfKey[r]] : -1;
    self[r] = s;
    bagOff[r] = bp;
    const start = bp;
    const extra = selfExtra[r] === 1;
    for (let j = from, end = extra ? to + 1 : to; j < end; j++) {
      // The keywords of S_e, then the self keyword when it is not among them.
      const k = j < to ? occ[j] : s;
      postCount[k]++;
      for (let t = kwWordOff[k], tEnd = kwWordOff[k + 1]; t < tEnd; t++) {
        const w = kwWords[t];
        if (tfScratch[w]++ === 0) bagWordTmp[bp++] = w;
      }
    }
    sortRun(bagWordTmp, start, bp);
    for (let t = start; t < bp; t++) {
      const w = bagWordTmp[t];
      bagTfTmp[t] = tfScratch[w];
      tfScratch[w] = 0;
      wordDf[w]++;
    }
  }
  bagOff[n] = bp;
  // Unshared arrays are views on their scratch buffers (the slack is the keywords an
  // entity repeats or that were rejected, and words repeated inside a bag): every big
  // allocation costs a garbage collection of the caller's heap, so none is copied.
  let fwd: Int32Array = occ.subarray(0, o);
  let bagWord: Int32Array = bagWordTmp.subarray(0, bp);
  let bagTf: Int32Array = bagTfTmp.subarray(0, bp);
  if (shared) {
    fwd = i32(o, true);
    fwd.set(occ.subarray(0, o));
    bagWord = i32(bp, true);
    bagWord.set(bagWordTmp.subarray(0, bp));
    bagTf = i32(bp, true);
    bagTf.set(bagTfTmp.subarray(0, bp));
  }

  // 4. Postings (CSR), entity ordinals ascending because entities are visited in order.
  const postOff = i32(K + 1, shared);
  let acc = 0;
  for (let k = 0; k < K; k++) {
    postOff[k] = acc;
    acc += postCount[k];
  }
  postOff[K] = acc;
  const post = i32(acc, shared);
  const cursor = postOff.slice(0, K);
  for (let r = 0; r < n; r++) {
    for (let j = fwdOff[r], end = fwdOff[r + 1]; j < end; j++) post[cursor[fwd[j]]++] = r;
    if (selfExtra[r] === 1) post[cursor[self[r]]++] = r;
  }

  // 5. String tables; under an analyzer, each key's most used surface (ties: the smallest).
  const idStrings: string[] = new Array(n);
  for (let r = 0; r < n; r++) idStrings[r] = entries[order[r]].id;
  const ids = encodeStrings(idStrings, shared);
  const kw = encodeStrings(keywords, shared);
  const wd = encodeStrings(words, shared);
  let surfaces: string[] = [];
  if (!plain) {
    const best = new Int32Array(K).fill(-1); // keyword ordinal → surface id
    for (let v = 0; v < surfStr.length; v++) {
      const c = surfCount.a[v];
      if (c === 0) continue;
      const k = ordOf[surfKey.a[v]];
      const b = best[k];
      if (b < 0 || c > surfCount.a[b] || (c === surfCount.a[b] && surfStr[v] < surfStr[b])) best[k] = v;
    }
    surfaces = new Array(K);
    for (let k = 0; k < K; k++) surfaces[k] = surfStr[best[k]];
  }
  const surf = encodeStrings(surfaces, shared);
  return {
    side,
    analyzer,
    surfBlob: surf.blob,
    surfOff: surf.off,
    generation,
    numEntities: n,
    numKeywords: K,
    numWords: W,
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
