/**
 * Exact top k with dynamic pruning over a frozen view (view.ts, data from viewBuild.ts).
 *
 * The exhaustive ranking (`KeywordView.searchExhaustive`) scores every matched entity
 * with BM25 over the probe's words and keeps the best k (score descending, then ordinal
 * ascending). `rankTopK` returns the same k entities in the same order with bit-identical
 * scores, scoring only entities that can still enter the top k: MaxScore (Turtle & Flood,
 * "Query evaluation: strategies and optimizations", 1995), list at a time, with block-max
 * bounds (Ding & Suel, "Faster top-k document retrieval using block-max indexes", 2011)
 * and a per-entity bound from a signature of its bag.
 *
 * - Word postings (analysed word ordinal → ascending entity ordinals) are the transpose
 *   of the view's bags. They are built once per view and thread (`topKIndex`, kept in a
 *   WeakMap beside the ViewData; plain arrays, never stored nor shared: a worker that
 *   receives a SharedArrayBuffer-backed view builds its own on first use). With them
 *   come, per word and per block of `block` postings, the largest term frequency and the
 *   smallest document length. A word's contribution (bm25.ts's term) grows with tf and
 *   falls with dl when k1 ≥ 0 and 0 ≤ b ≤ 1, so idf·g(maxTf, minDl) bounds it over a
 *   list or a block.
 * - Matching stays the CoGR rule on keyword keys: the matched set is marked first in a
 *   bitset (and counted: a search reports the whole set's size). A matched entity holds
 *   every word of a probe keyword it shares, so it sits in at least one probe word list.
 * - Lists are walked from the highest bound down; a matched entity is scored when the
 *   first list reaches it, and its mark is cleared. An entity still marked in list i is
 *   in none of the lists walked before, so its score is at most its bound in list i plus
 *   the bounds of the lists not yet walked. Once the heap holds k entities (θ = the k-th
 *   score): the walk stops when the remaining lists' bounds sum below θ; a block is
 *   skipped when its bound plus that sum is below θ; an entity is skipped when its own
 *   bound is (its document length, and a 128-bit Bloom signature of its bag telling which
 *   remaining lists it may be in). θ only grows, so whatever was skipped once stays below
 *   it, even if it is met again, still marked, in a later list.
 * - Skips are strict (bound < θ): an entity that could tie θ is always scored and the
 *   heap breaks the tie by ordinal, as the exhaustive selection does. Exact scores use
 *   the expression and the summation order (the probe's word order) of
 *   `KeywordView.score`, so they are bit-identical; bounds are inflated by a relative
 *   1e-9 so that rounding never prunes an entity that belongs in the top k.
 *
 * Parameters outside k1 ≥ 0, 0 ≤ b ≤ 1 (where the monotonicity does not hold) and probes
 * whose keywords hold few postings return null: the caller ranks exhaustively.
 */
import { bm25Idf, bm25Norm, bm25Numerator, bm25Term, type Bm25Params } from '../text/bm25.ts';
import type { ViewData } from './viewBuild.ts';

/** Postings per block of the block-max bounds (default; a power of two). */
export const BLOCK = 64;
/**
 * Below this many postings under the probe's keywords, scoring every matched entity costs
 * less than setting up the pruning (rankTopK returns null unless told otherwise).
 */
export const MIN_POSTINGS = 512;
const SLACK = 1 + 1e-9;
/** Signature words per entity: 4 × 32 signature bits, document length, bag start, bag end, padding (32 bytes). */
export const SIG_STRIDE = 8;
const SIG_HASHES = 3;
/** Keeps the signature prefetch loop from being optimised away. */
let sink = 0;

/** Word postings and bound statistics of one view (per thread, never stored). */
export interface TopKIndex {
  /** Postings per block (a power of two). */
  block: number;
  /** word ordinal → ascending entity ordinals (CSR). */
  wpOff: Int32Array;
  wpEnt: Int32Array;
  /** word ordinal → largest term frequency / smallest document length over its postings. */
  maxTf: Int32Array;
  minDl: Int32Array;
  /** Word w's blocks are wpBlk[w] … wpBlk[w+1]−1; block j of w starts at posting wpOff[w] + j·block. */
  wpBlk: Int32Array;
  blkMaxTf: Int32Array;
  blkMinDl: Int32Array;
  /**
   * Per entity, SIG_STRIDE 32-bit words: a 128-bit Bloom signature of its bag (the bits
   * `wordBits(w)` of every word w of the bag: "all bits set" means "may contain w"), its
   * document length and its bag's start and end in bagWord/bagTf.
   */
  sig: Uint32Array;
  /** Scratch: the matched set as a bitset (cleared after every search), probe slot per word (−1 outside a search). */
  bits: Uint32Array;
  slot: Int32Array;
}

/** The signature masks (four 32-bit words) of a word ordinal: SIG_HASHES bits of 128. */
export function wordBits(w: number): [number, number, number, number] {
  const m: [number, number, number, number] = [0, 0, 0, 0];
  let h = Math.imul(w + 1, 0x9e3779b1);
  for (let i = 0; i < SIG_HASHES; i++) {
    const bit = h >>> 25; // 0 … 127
    m[bit >>> 5] |= 1 << (bit & 31);
    h = (Math.imul(h ^ (h >>> 15), 0x85ebca6b) + 0x27d4eb2f) | 0;
  }
  return m;
}

const cache = new WeakMap<ViewData, TopKIndex>();

/** The word postings and bounds of a view, built on first use in this thread (O(Σ bag sizes)). */
export function topKIndex(data: ViewData): TopKIndex {
  let ix = cache.get(data);
  if (!ix) {
    ix = buildTopKIndex(data);
    cache.set(data, ix);
  }
  return ix;
}

/** Build the word postings and bounds of a view (`topKIndex` caches one per view). */
export function buildTopKIndex(data: ViewData, block = BLOCK): TopKIndex {
  if (!Number.isInteger(block) || block < 1 || (block & (block - 1)) !== 0)
    throw new RangeError(`block must be a power of two (got ${block})`);
  const shift = 31 - Math.clz32(block);
  const { numWords: nw, numEntities: n, bagOff, bagWord, bagTf, docLen } = data;
  const nnz = bagOff[n];
  const wpOff = new Int32Array(nw + 1);
  for (let t = 0; t < nnz; t++) wpOff[bagWord[t] + 1]++;
  for (let w = 0; w < nw; w++) wpOff[w + 1] += wpOff[w];
  const wpBlk = new Int32Array(nw + 1);
  for (let w = 0; w < nw; w++) wpBlk[w + 1] = wpBlk[w] + ((wpOff[w + 1] - wpOff[w] + block - 1) >> shift);
  const nb = wpBlk[nw];
  const wpEnt = new Int32Array(nnz);
  const blkMaxTf = new Int32Array(nb);
  const blkMinDl = new Int32Array(nb).fill(0x7fffffff);
  const wBits = new Int32Array(4 * nw);
  for (let w = 0; w < nw; w++) wBits.set(wordBits(w), 4 * w);
  const sig = new Uint32Array(SIG_STRIDE * n);
  // Per word: where its next posting goes, and that posting's block.
  const cur = wpOff.slice(0, nw);
  const curBlk = wpBlk.slice(0, nw);
  for (let e = 0; e < n; e++) {
    const dl = docLen[e];
    let m0 = 0;
    let m1 = 0;
    let m2 = 0;
    let m3 = 0;
    for (let t = bagOff[e], end = bagOff[e + 1]; t < end; t++) {
      const w = bagWord[t];
      const tf = bagTf[t];
      const p = cur[w]++;
      wpEnt[p] = e;
      const blk = curBlk[w];
      if (((p + 1 - wpOff[w]) & (block - 1)) === 0) curBlk[w] = blk + 1;
      if (tf > blkMaxTf[blk]) blkMaxTf[blk] = tf;
      if (dl < blkMinDl[blk]) blkMinDl[blk] = dl;
      const h = 4 * w;
      m0 |= wBits[h];
      m1 |= wBits[h + 1];
      m2 |= wBits[h + 2];
      m3 |= wBits[h + 3];
    }
    const q = SIG_STRIDE * e;
    sig[q] = m0;
    sig[q + 1] = m1;
    sig[q + 2] = m2;
    sig[q + 3] = m3;
    sig[q + 4] = dl;
    sig[q + 5] = bagOff[e];
    sig[q + 6] = bagOff[e + 1];
  }
  // Per word: the extremes over its blocks.
  const maxTf = new Int32Array(nw);
  const minDl = new Int32Array(nw).fill(0x7fffffff);
  for (let w = 0; w < nw; w++) {
    for (let j = wpBlk[w]; j < wpBlk[w + 1]; j++) {
      if (blkMaxTf[j] > maxTf[w]) maxTf[w] = blkMaxTf[j];
      if (blkMinDl[j] < minDl[w]) minDl[w] = blkMinDl[j];
    }
  }
  return {
    block,
    wpOff,
    wpEnt,
    maxTf,
    minDl,
    wpBlk,
    blkMaxTf,
    blkMinDl,
    sig,
    bits: new Uint32Array((n + 31) >>> 5),
    slot: new Int32Array(nw).fill(-1),
  };
}

/** Bytes held by a top-k index (for the benchmarks' memory figures). */
export function topKIndexBytes(ix: TopKIndex): number {
  let s = 0;
  for (const a of [ix.wpOff, ix.wpEnt, ix.maxTf, ix.minDl, ix.wpBlk, ix.blkMaxTf, ix.blkMinDl, ix.sig, ix.bits, ix.slot]) s += a.byteLength;
  return s;
}

export interface TopKResult {
  /** Size of the whole matched set. */
  matched: number;
  /** Best first: entity ordinals and their exact scores. */
  ordinals: number[];
  scores: number[];
}

/**
 * The exact top k of the matched set of `keywordOrdinals` (keyword keys), ranked by BM25
 * over `wordOrdinals` (analysed words, summed in that order as `KeywordView.score`
 * does). Null when the parameters admit no bound, or when the probe's keywords hold
 * fewer than `minPostings` postings (default MIN_POSTINGS): the caller then ranks
 * exhaustively.
 */
export function rankTopK(
  data: ViewData,
  keywordOrdinals: readonly number[],
  wordOrdinals: readonly number[],
  k: number,
  params: Bm25Params,
  opts: { index?: TopKIndex; minPostings?: number } = {},
): TopKResult | null {
  const { k1, b } = params;
  if (!(k1 >= 0 && Number.isFinite(k1) && b >= 0 && b <= 1)) return null;
  const { postOff, post, bagWord, bagTf } = data;
  let postings = 0;
  for (const kw of keywordOrdinals) postings += postOff[kw + 1] - postOff[kw];
  if (postings < (opts.minPostings ?? MIN_POSTINGS)) return null;
  const ix = opts.index ?? topKIndex(data);
  const N = data.numEntities;

  // 1. Mark and count the matched set (the bitset is cleared before returning).
  const bits = ix.bits;
  let matched = 0;
  for (const kw of keywordOrdinals) {
    for (let j = postOff[kw], end = postOff[kw + 1]; j < end; j++) {
      const e = post[j];
      const m = 1 << (e & 31);
      const x = bits[e >>> 5];
      if ((x & m) === 0) {
        bits[e >>> 5] = x | m;
        matched++;
      }
    }
  }
  const clear = () => {
    if (postings * 4 < bits.length) {
      for (const kw of keywordOrdinals) for (let j = postOff[kw], end = postOff[kw + 1]; j < end; j++) bits[post[j] >>> 5] = 0;
    } else bits.fill(0);
  };
  const want = Math.min(k, matched);
  if (want <= 0) {
    clear();
    return { matched, ordinals: [], scores: [] };
  }

  // 2. The probe's words: idf (as KeywordView.idf) and list bounds; lists by bound ascending.
  const avgdl = (N === 0 ? 0 : data.totalLength / N) || 1;
  const nq = wordOrdinals.length;
  const idfs = new Float64Array(nq);
  const g = (tf: number, dl: number) => bm25Term(1, tf, k1, bm25Norm(k1, b, dl, avgdl));
  const ub = new Float64Array(nq);
  const order: number[] = [];
  for (let j = 0; j < nq; j++) {
    const w = wordOrdinals[j];
    idfs[j] = bm25Idf(N, data.wordDf[w]);
    ub[j] = idfs[j] * g(ix.maxTf[w], ix.minDl[w]) * SLACK;
    if (ix.wpOff[w + 1] > ix.wpOff[w]) order.push(j);
  }
  order.sort((x, y) => ub[x] - ub[y] || x - y);
  const L = order.length;
  // prefix[i] = Σ of the bounds of lists 0 … i−1 (those walked after list i).
  const prefix = new Float64Array(L + 1);
  for (let i = 0; i < L; i++) prefix[i + 1] = (prefix[i] + ub[order[i]]) * SLACK;
  // Per list: its signature mask, and idf·g(maxTf, dl) written as A / (B + k1·(1 − b + b·dl/avgdl)).
  const lMask = new Int32Array(4 * L);
  const lA = new Float64Array(L);
  const lB = new Float64Array(L);
  let longest = 0;
  for (let i = 0; i < L; i++) {
    const j = order[i];
    const w = wordOrdinals[j];
    lMask.set(wordBits(w), 4 * i);
    lA[i] = bm25Numerator(idfs[j], ix.maxTf[w], k1);
    lB[i] = ix.maxTf[w];
    longest = Math.max(longest, ix.wpOff[w + 1] - ix.wpOff[w]);
  }

  // 3. A heap of the best `want` (worst at the root: lowest score, then highest ordinal).
  const hOrd = new Int32Array(want);
  const hSc = new Float64Array(want);
  let hn = 0;
  const worse = (a: number, c: number) => hSc[a] < hSc[c] || (hSc[a] === hSc[c] && hOrd[a] > hOrd[c]);
  const swap = (a: number, c: number) => {
    const o = hOrd[a];
    hOrd[a] = hOrd[c];
    hOrd[c] = o;
    const s = hSc[a];
    hSc[a] = hSc[c];
    hSc[c] = s;
  };
  const push = (e: number, s: number) => {
    let i = hn++;
    hOrd[i] = e;
    hSc[i] = s;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!worse(i, p)) break;
      swap(i, p);
      i = p;
    }
  };
  const replaceRoot = (e: number, s: number) => {
    hOrd[0] = e;
    hSc[0] = s;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= hn) break;
      const r = l + 1;
      const c = r < hn && worse(r, l) ? r : l;
      if (!worse(c, i)) break;
      swap(c, i);
      i = c;
    }
  };

  // 4. Lists from the highest bound down (see the module comment).
  const slot = ix.slot;
  for (let j = 0; j < nq; j++) slot[wordOrdinals[j]] = j;
  const tfOf = new Int32Array(nq);
  const { wpEnt, wpOff, wpBlk, blkMaxTf, blkMinDl, sig, block: BLK } = ix;
  const kb = k1 * b;
  const kn = k1 * (1 - b);
  let theta = -Infinity;
  const cand = new Int32Array(Math.min(BLK, longest));
  try {
    for (let i = L - 1; i >= 0; i--) {
      if (hn === want && prefix[i + 1] < theta) break;
      const j0 = order[i];
      const w = wordOrdinals[j0];
      const below = prefix[i];
      const idfS = idfs[j0] * SLACK;
      const stop = wpOff[w + 1];
      for (let blk = wpBlk[w], p = wpOff[w]; p < stop; blk++) {
        const blockEnd = Math.min(stop, p + BLK);
        if (hn === want && (below + idfS * g(blkMaxTf[blk], blkMinDl[blk])) * SLACK < theta) {
          p = blockEnd;
          continue;
        }
        // The block's unscored matched entities; their signatures are loaded in a loop
        // without data-dependent branches (the cache misses overlap), then bounded and scored.
        let nc = 0;
        for (; p < blockEnd; p++) {
          const e = wpEnt[p];
          const m = 1 << (e & 31);
          const x = bits[e >>> 5];
          if ((x & m) !== 0) {
            bits[e >>> 5] = x & ~m;
            cand[nc++] = e;
          }
        }
        let touch = 0;
        for (let c = 0; c < nc; c++) touch += sig[SIG_STRIDE * cand[c] + 4];
        sink = (sink + touch) | 0;
        for (let c = 0; c < nc; c++) {
          const e = cand[c];
          const q = SIG_STRIDE * e;
          const dl = sig[q + 4];
          if (hn === want) {
            // The entity's bound: list i, and each remaining list its signature may hold.
            const nd = kn + (kb * dl) / avgdl;
            let bound = lA[i] / (lB[i] + nd);
            const m0 = sig[q];
            const m1 = sig[q + 1];
            const m2 = sig[q + 2];
            const m3 = sig[q + 3];
            for (let l = 0, r = 0; l < i; l++, r += 4) {
              if (
                (m0 & lMask[r]) === lMask[r] &&
                (m1 & lMask[r + 1]) === lMask[r + 1] &&
                (m2 & lMask[r + 2]) === lMask[r + 2] &&
                (m3 & lMask[r + 3]) === lMask[r + 3]
              ) {
                bound += lA[l] / (lB[l] + nd);
              }
            }
            if (bound * SLACK < theta) continue;
          }
          // The exact score: KeywordView.score's expression, in the probe's word order.
          const norm = bm25Norm(k1, b, dl, avgdl);
          for (let t = sig[q + 5], te = sig[q + 6]; t < te; t++) {
            const jj = slot[bagWord[t]];
            if (jj >= 0) tfOf[jj] = bagTf[t];
          }
          let s = 0;
          for (let jj = 0; jj < nq; jj++) {
            const tf = tfOf[jj];
            if (tf > 0) {
              s += bm25Term(idfs[jj], tf, k1, norm);
              tfOf[jj] = 0;
            }
          }
          if (hn < want) {
            push(e, s);
            if (hn === want) theta = hSc[0];
          } else if (s > theta || (s === theta && e < hOrd[0])) {
            replaceRoot(e, s);
            theta = hSc[0];
          }
        }
      }
    }
  } finally {
    for (let j = 0; j < nq; j++) slot[wordOrdinals[j]] = -1;
    clear();
  }
  // Every matched entity with a positive score is in a list; fewer than `want` found
  // means some matched entity has no probe word: the caller ranks exhaustively.
  if (hn < want) return null;
  const idx = Array.from({ length: hn }, (_, i) => i);
  idx.sort((x, y) => hSc[y] - hSc[x] || hOrd[x] - hOrd[y]);
  return { matched, ordinals: idx.map((i) => hOrd[i]), scores: idx.map((i) => hSc[i]) };
}
