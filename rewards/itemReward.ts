/**
 * The item-side reward of CoGR: the counterfactual marginal contribution of one item's
 * candidate keyword set to Σ_q F(q) over the counted training queries, with every
 * other item keeping its reference keywords.
 *
 *   R_i(S_i) = Σ_q F_β(q | S_i replaces S_i_ref) − Σ_q F_β(q | reference index),
 *   R_i(S_i) = −1 when |S_i| > K_max (|S_i| after normalisation and de-duplication).
 *
 * Item i is retrieved for query q iff (S_q ∪ {q}) ∩ (S_i ∪ {i}) ≠ ∅; the rule is
 * symmetric, so the queries that retrieve i are one look-up of S_i ∪ {i} in the
 * (frozen) query-side index: Q(i) = queryView.match({self: title_i, keywords: S_i}).
 *
 * Incremental form (paper, Appendix B.3): a per-round cache holds, under the reference
 * index, n_ret(q) and n_tp(q) for every query and the reference query set Q_ref(i) of
 * every item (CSR). For a candidate, one query-index look-up gives Q_cand(i); only the
 * queries in Q_cand △ Q_ref change, each by ±1 in n_ret and ±[i ∈ rel(q)] in n_tp, and
 * the reward is the sum of those F differences. Both sets and rel⁻¹(i) are sorted, so
 * the symmetric difference is one linear merge with no hashing.
 *
 * `itemRewardFull` recomputes every query's counts from scratch (optionally reusing
 * the reference counts, which do not depend on the candidate) and is the reference
 * the incremental form is tested and benchmarked against. Both sum the per-query
 * differences in ascending query order, so they agree to the last bit in practice.
 */
import { DEFAULTS } from '../index/core/defaults.ts';
import { cogrError } from '../index/core/errors.ts';
import { sharedKeywordNormalizer } from '../index/text/normalize.ts';
import type { AnalyzerName } from '../index/text/analyzer.ts';
import { budgetPenalty } from './layered.ts';
import { GrowableI32 } from '../index/core/growable.ts';
import { i32 } from '../index/view/buffers.ts';
import type { KeywordView } from '../index/view/view.ts';
import { fBetaFromCounts } from './setMetrics.ts';
import type { RelevanceData } from './relevance.ts';

export interface ItemRewardContext {
  /** Item index of the reference generation: S_i_ref ∪ {title_i} per item. */
  itemView: KeywordView;
  /** Frozen query index: S_q ∪ {q} per training query. */
  queryView: KeywordView;
  relevance: RelevanceData;
  /** Keyword budget, default 30. */
  kMax?: number;
  /** F-beta's beta, default 1 (F1). */
  beta?: number;
}

/**
 * The per-round cache, possibly for a range [start, end) of items only (ranges are
 * built in parallel and merged). nRet / nTp count the range's items per query.
 */
export interface ItemRewardCache {
  numQueries: number;
  numItems: number;
  start: number;
  end: number;
  nRet: Int32Array;
  nTp: Int32Array;
  /** item (ordinal − start) → sorted reference query ordinals Q_ref(i). */
  qrefOff: Int32Array;
  qref: Int32Array;
}

/** Per-query counts of a whole index state. */
export interface QueryCounts {
  nRet: Int32Array;
  nTp: Int32Array;
}

const bridges = new WeakMap<KeywordView, WeakMap<KeywordView, Int32Array>>();

/**
 * item-view keyword ordinal → query-view keyword ordinal (−1 when the query index does
 * not know the keyword). Computed once per (item view, query view) pair and thread.
 */
export function keywordBridge(itemView: KeywordView, queryView: KeywordView): Int32Array {
  if (itemView.data.analyzer !== queryView.data.analyzer) {
    throw cogrError(
      'INVALID_ARGUMENT',
      `the item index (${itemView.data.analyzer} analyzer) and the query index (${queryView.data.analyzer} analyzer) match keywords differently; build both with one analyzer`,
    );
  }
  let inner = bridges.get(itemView);
  if (!inner) {
    inner = new WeakMap();
    bridges.set(itemView, inner);
  }
  let map = inner.get(queryView);
  if (!map) {
    const vocab = itemView.vocabulary();
    map = new Int32Array(vocab.length);
    for (let k = 0; k < vocab.length; k++) map[k] = queryView.keywordOrdinal(vocab[k]);
    inner.set(queryView, map);
  }
  return map;
}

function checkItem(ctx: ItemRewardContext, item: number): void {
  if (!Number.isInteger(item) || item < 0 || item >= ctx.itemView.size) {
    throw cogrError('INVALID_ARGUMENT', `item ordinal ${item} is out of range [0, ${ctx.itemView.size})`, { item });
  }
}

/** Query-view keyword ordinals of item i's reference keywords and title. */
function referenceKeywordOrdinals(ctx: ItemRewardContext, bridge: Int32Array, item: number, out: number[]): number[] {
  out.length = 0;
  const { fwdOff, fwd, self } = ctx.itemView.data;
  for (let j = fwdOff[item]; j < fwdOff[item + 1]; j++) {
    const o = bridge[fwd[j]];
    if (o >= 0) out.push(o);
  }
  const s = self[item];
  if (s >= 0 && bridge[s] >= 0) out.push(bridge[s]);
  return out;
}

/**
 * Sorted query ordinals that would retrieve item i with the (already normalised)
 * candidate keywords instead of its reference ones; the title stays.
 */
export function candidateQueries(ctx: ItemRewardContext, item: number, keywords: readonly string[]): Int32Array {
  const qv = ctx.queryView;
  const ords: number[] = [];
  for (const k of keywords) {
    const o = qv.ordinalOfKeyword(k);
    if (o >= 0) ords.push(o);
  }
  const s = ctx.itemView.data.self[item];
  if (s >= 0) {
    const o = keywordBridge(ctx.itemView, qv)[s];
    if (o >= 0) ords.push(o);
  }
  return qv.matchOrdinals(ords);
}

// Policies sample from a limited vocabulary, so the same raw keywords recur across
// rewards: one normaliser (with its memo) per thread and analyzer.

/**
 * A candidate's keywords normalised and de-duplicated by match key under the query
 * view's analyzer (first surface form of each key kept, keywords over the normalisation
 * limits dropped), through the thread's memoised normaliser.
 */
export function normalizeCandidate(list: readonly string[], analyzer: AnalyzerName = 'none'): string[] {
  return sharedKeywordNormalizer(analyzer).set(list).keywords;
}

/**
 * A candidate resolved against one query view: its distinct keywords (by match key, the
 * first surface form kept) and the query-view ordinals of those the view knows.
 */
export interface ResolvedCandidate {
  keywords: string[];
  ordinals: number[];
}

/** Normalise a candidate (through the thread's memo) and resolve it in the context's query view. */
export function resolveCandidate(ctx: Pick<ItemRewardContext, 'queryView'>, list: readonly string[]): ResolvedCandidate {
  const qv = ctx.queryView;
  const normalizer = sharedKeywordNormalizer(qv.data.analyzer);
  const keywords: string[] = [];
  const keys: string[] = [];
  const ordinals: number[] = [];
  // Linear scans beat a Set for the usual ≤ 30 keywords; long lists use a Set.
  const seen = list.length > 32 ? new Set<string>() : null;
  for (const raw of list) {
    const key = normalizer.key(raw);
    if (key === null) continue;
    if (seen) {
      if (seen.has(key)) continue;
      seen.add(key);
    } else if (keys.includes(key)) continue;
    keys.push(key);
    keywords.push(normalizer.keyword(raw)!);
    const o = qv.keywordOrdinal(key);
    if (o >= 0) ordinals.push(o);
  }
  return { keywords, ordinals };
}

/** Query ordinals retrieving item i with a resolved candidate (title included). */
function resolvedQueries(ctx: ItemRewardContext, item: number, resolved: ResolvedCandidate): Int32Array {
  const qv = ctx.queryView;
  const ords = [...resolved.ordinals];
  const s = ctx.itemView.data.self[item];
  if (s >= 0) {
    const o = keywordBridge(ctx.itemView, qv)[s];
    if (o >= 0) ords.push(o);
  }
  return qv.matchOrdinals(ords);
}

/**
 * The look-up part of the incremental reward alone: normalise the candidate and find
 * the queries that would retrieve the item with it (what the benchmark calls the
 * unavoidable cost).
 */
export function candidateLookup(ctx: ItemRewardContext, item: number, candidate: readonly string[]): Int32Array {
  return resolvedQueries(ctx, item, resolveCandidate(ctx, candidate));
}

/** Adds item i's retrieval (query set qs, sorted) to per-query counts. */
function addItemCounts(rel: RelevanceData, item: number, qs: Int32Array, nRet: Int32Array, nTp: Int32Array): void {
  const { iRelOff, iRel } = rel;
  let r = iRelOff[item];
  const rEnd = iRelOff[item + 1];
  for (let j = 0; j < qs.length; j++) {
    const q = qs[j];
    nRet[q]++;
    while (r < rEnd && iRel[r] < q) r++;
    if (r < rEnd && iRel[r] === q) nTp[q]++;
  }
}

/**
 * Build the cache for items [start, end) (default: all items). Ranges can be built
 * independently (e.g. in workers) and merged with `mergeItemRewardCaches`.
 */
export function buildItemRewardCache(
  ctx: ItemRewardContext,
  range?: { start: number; end: number },
  opts: { shared?: boolean } = {},
): ItemRewardCache {
  const shared = opts.shared ?? false;
  const ni = ctx.itemView.size;
  const nq = ctx.queryView.size;
  const start = range?.start ?? 0;
  const end = range?.end ?? ni;
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > ni || start > end) {
    throw cogrError('INVALID_ARGUMENT', `cache range [${start}, ${end}) is not within [0, ${ni}]`, { start, end });
  }
  const bridge = keywordBridge(ctx.itemView, ctx.queryView);
  const nRet = i32(nq, shared);
  const nTp = i32(nq, shared);
  const qrefOff = i32(end - start + 1, shared);
  const acc = new GrowableI32();
  const scratch: number[] = [];
  for (let i = start; i < end; i++) {
    qrefOff[i - start] = acc.length;
    const qs = ctx.queryView.matchOrdinals(referenceKeywordOrdinals(ctx, bridge, i, scratch));
    acc.pushAll(qs);
    addItemCounts(ctx.relevance, i, qs, nRet, nTp);
  }
  qrefOff[end - start] = acc.length;
  const qref = i32(acc.length, shared);
  qref.set(acc.view());
  return { numQueries: nq, numItems: ni, start, end, nRet, nTp, qrefOff, qref };
}

/** Merge range caches that together cover [0, numItems) exactly once. */
export function mergeItemRewardCaches(parts: readonly ItemRewardCache[], opts: { shared?: boolean } = {}): ItemRewardCache {
  const shared = opts.shared ?? false;
  if (parts.length === 0) throw cogrError('INVALID_ARGUMENT', 'no cache parts to merge');
  const sorted = [...parts].sort((a, b) => a.start - b.start || a.end - b.end);
  const { numQueries: nq, numItems: ni } = sorted[0];
  let expect = 0;
  let total = 0;
  for (const p of sorted) {
    if (p.numQueries !== nq || p.numItems !== ni || p.start !== expect) {
      throw cogrError('INVALID_ARGUMENT', `cache parts do not tile the items: part [${p.start}, ${p.end}) where ${expect} was expected`);
    }
    expect = p.end;
    total += p.qref.length;
  }
  if (expect !== ni) throw cogrError('INVALID_ARGUMENT', `cache parts end at ${expect}, not at ${ni}`);
  const nRet = i32(nq, shared);
  const nTp = i32(nq, shared);
  const qrefOff = i32(ni + 1, shared);
  const qref = i32(total, shared);
  let pos = 0;
  for (const p of sorted) {
    for (let q = 0; q < nq; q++) {
      nRet[q] += p.nRet[q];
      nTp[q] += p.nTp[q];
    }
    const n = p.end - p.start;
    for (let k = 0; k < n; k++) qrefOff[p.start + k] = pos + p.qrefOff[k];
    qref.set(p.qref, pos);
    pos += p.qref.length;
  }
  qrefOff[ni] = pos;
  return { numQueries: nq, numItems: ni, start: 0, end: ni, nRet, nTp, qrefOff, qref };
}

/** Q_ref(i) from a cache (a view on the CSR array). */
export function cachedReferenceQueries(cache: ItemRewardCache, item: number): Int32Array {
  const k = item - cache.start;
  return cache.qref.subarray(cache.qrefOff[k], cache.qrefOff[k + 1]);
}

/** Incremental counterfactual item reward (Appendix B.3); −1 over the budget. */
export function itemRewardIncremental(ctx: ItemRewardContext, cache: ItemRewardCache, item: number, candidate: readonly string[]): number {
  checkCacheItem(ctx, cache, item);
  const resolved = resolveCandidate(ctx, candidate);
  const penalty = budgetPenalty(resolved.keywords.length, { side: 'item', kMax: ctx.kMax });
  return penalty !== null ? penalty : incrementalReward(ctx, cache, item, resolved);
}

function checkCacheItem(ctx: ItemRewardContext, cache: ItemRewardCache, item: number): void {
  checkItem(ctx, item);
  if (item < cache.start || item >= cache.end) {
    throw cogrError('INVALID_ARGUMENT', `item ordinal ${item} is outside the cache range [${cache.start}, ${cache.end})`, { item });
  }
}

/** How a candidate changes the retrieval of its item: |Q_cand| and |Q_cand △ Q_ref|. */
export interface CandidateCounts {
  matched: number;
  affected: number;
}

/**
 * One query whose matched set a candidate changes: it gains the item (dir 1) or loses it
 * (−1); for a counted query, whether the item is relevant to it and its F_β before and after.
 */
export interface QueryChange {
  query: number;
  dir: 1 | -1;
  counted: boolean;
  relevant: boolean;
  before: number;
  after: number;
}

/**
 * The result layer of the incremental reward for a resolved candidate (no budget check):
 * Σ over Q_cand △ Q_ref of the F_β change, in one merge of sorted lists. With `counts`,
 * also reports |Q_cand| and the size of the symmetric difference; with `changes`, every
 * query of that difference in query order (the reward is the sum of the counted ones'
 * after − before, added in the same order).
 */
export function incrementalReward(
  ctx: ItemRewardContext,
  cache: ItemRewardCache,
  item: number,
  resolved: ResolvedCandidate,
  counts?: CandidateCounts,
  changes?: QueryChange[],
): number {
  const beta = ctx.beta ?? DEFAULTS.run.beta;
  const qc = resolvedQueries(ctx, item, resolved);
  const k = item - cache.start;
  const qref = cache.qref;
  let a = 0;
  let b = cache.qrefOff[k];
  const bEnd = cache.qrefOff[k + 1];
  const { iRelOff, iRel, counted, nRel } = ctx.relevance;
  let r = iRelOff[item];
  const rEnd = iRelOff[item + 1];
  const { nRet, nTp } = cache;
  let sum = 0;
  let affected = 0;
  while (a < qc.length || b < bEnd) {
    let q: number;
    let dir: number;
    if (b >= bEnd || (a < qc.length && qc[a] < qref[b])) {
      q = qc[a++];
      dir = 1;
    } else if (a >= qc.length || qref[b] < qc[a]) {
      q = qref[b++];
      dir = -1;
    } else {
      a++;
      b++;
      continue;
    }
    affected++;
    if (counted[q] === 0) {
      changes?.push({ query: q, dir: dir as 1 | -1, counted: false, relevant: false, before: 0, after: 0 });
      continue;
    }
    while (r < rEnd && iRel[r] < q) r++;
    const isRel = r < rEnd && iRel[r] === q ? 1 : 0;
    const ret = nRet[q];
    const tp = nTp[q];
    const nr = nRel[q];
    const after = fBetaFromCounts(ret + dir, nr, tp + dir * isRel, beta);
    const before = fBetaFromCounts(ret, nr, tp, beta);
    sum += after - before;
    changes?.push({ query: q, dir: dir as 1 | -1, counted: true, relevant: isRel === 1, before, after });
  }
  if (counts) {
    counts.matched = qc.length;
    counts.affected = affected;
  }
  return sum;
}

/**
 * Per-query counts of the index state where item `replace.item` retrieves exactly the
 * queries `replace.queries` (default: no replacement, the reference state), recomputed
 * from scratch over every item.
 */
export function fullQueryCounts(ctx: ItemRewardContext, replace?: { item: number; queries: Int32Array }): QueryCounts {
  const nq = ctx.queryView.size;
  const nRet = new Int32Array(nq);
  const nTp = new Int32Array(nq);
  const bridge = keywordBridge(ctx.itemView, ctx.queryView);
  const scratch: number[] = [];
  for (let i = 0; i < ctx.itemView.size; i++) {
    const qs =
      replace !== undefined && replace.item === i
        ? replace.queries
        : ctx.queryView.matchOrdinals(referenceKeywordOrdinals(ctx, bridge, i, scratch));
    addItemCounts(ctx.relevance, i, qs, nRet, nTp);
  }
  return { nRet, nTp };
}

/**
 * Full-recompute reference of the item reward: every query's counts are recomputed
 * from scratch with item i's keywords replaced by the candidate. `reference` (the
 * counts of the unmodified index, `fullQueryCounts(ctx)`) may be passed to avoid
 * recomputing them; it does not depend on the candidate.
 */
export function itemRewardFull(ctx: ItemRewardContext, item: number, candidate: readonly string[], reference?: QueryCounts): number {
  checkItem(ctx, item);
  const penalty = budgetPenalty(normalizeCandidate(candidate, ctx.queryView.data.analyzer).length, { side: 'item', kMax: ctx.kMax });
  if (penalty !== null) return penalty;
  const beta = ctx.beta ?? DEFAULTS.run.beta;
  const ref = reference ?? fullQueryCounts(ctx);
  const next = fullQueryCounts(ctx, {
    item,
    queries: candidateQueries(ctx, item, normalizeCandidate(candidate, ctx.queryView.data.analyzer)),
  });
  const { counted, nRel } = ctx.relevance;
  let sum = 0;
  for (let q = 0; q < next.nRet.length; q++) {
    if (!counted[q]) continue;
    sum += fBetaFromCounts(next.nRet[q], nRel[q], next.nTp[q], beta) - fBetaFromCounts(ref.nRet[q], nRel[q], ref.nTp[q], beta);
  }
  return sum;
}
