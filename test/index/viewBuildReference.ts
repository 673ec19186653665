/**
 * The view builder as it was before the flat typed-array rewrite of index/view/viewBuild.ts
 * (normalised keyword strings per entity, a Set per entity, vocabularies as Sets of
 * strings, a Map of surface counts per key), unchanged: kept only as the reference the
 * current builder must equal (test/index/viewBuild.test.ts).
 */
import type { IndexEntry, Side } from '../../index/core/types.ts';
import { keywordWords, makeKeywordNormalizer } from '../../index/text/normalize.ts';
import { DEFAULT_ANALYZER, type AnalyzerName } from '../../index/text/analyzer.ts';
import { encodeStrings, i32 } from '../../index/view/buffers.ts';
import type { ViewData } from '../../index/view/viewBuild.ts';

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The previous builder: the compact data of a view from entries. Entries are ordered by id, so
 * ordinals (and every tie-break by ordinal) follow id order.
 */
export function buildViewDataReference(
  side: Side,
  generation: number,
  entries: readonly IndexEntry[],
  opts: { shared?: boolean; analyzer?: AnalyzerName } = {},
): ViewData {
  const shared = opts.shared ?? false;
  const analyzer = opts.analyzer ?? DEFAULT_ANALYZER;
  const plain = analyzer === 'none';
  // key → surface form → number of entities using it (analysed views only)
  const surfaces = new Map<string, Map<string, number>>();
  const noteSurface = (key: string, surface: string) => {
    let m = surfaces.get(key);
    if (!m) surfaces.set(key, (m = new Map()));
    m.set(surface, (m.get(surface) ?? 0) + 1);
  };
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
  const norm = makeKeywordNormalizer({ memo: Infinity, analyzer });
  for (let e = 0; e < n; e++) {
    const surface = norm.self(sorted[e].self);
    const s = plain ? surface : norm.analyzer.key(surface);
    selfs[e] = s;
    if (s.length > 0) {
      kwVocab.add(s);
      if (!plain) noteSurface(s, surface);
    }
    const seen = new Set<string>();
    for (const raw of sorted[e].keywords) {
      const k = norm.key(raw);
      if (k === null || seen.has(k)) continue;
      seen.add(k);
      if (!plain) noteSurface(k, norm.keyword(raw)!);
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
  const surf = encodeStrings(
    plain
      ? []
      : keywords.map((k) => {
          let best = k;
          let count = -1;
          for (const [sf, c] of surfaces.get(k) ?? []) if (c > count || (c === count && sf < best)) [best, count] = [sf, c];
          return best;
        }),
    shared,
  );
  return {
    side,
    analyzer,
    surfBlob: surf.blob,
    surfOff: surf.off,
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
