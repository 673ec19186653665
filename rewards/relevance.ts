/**
 * Relevance judgements as plain, ordinal-indexed data (CSR arrays), so that reward
 * functions never touch strings on their hot path and the whole structure can be
 * posted to worker threads (optionally on SharedArrayBuffer, without copies).
 *
 * Ordinals are those of the frozen views: query ordinals of the query view, item
 * ordinals of the item view. Only *counted* queries (by default: the query-view
 * queries that have at least one judged relevant item) contribute to Σ_q F(q).
 *
 * `nRel[q]` is |rel(q)| including relevant items that are absent from the item view:
 * such items can never be retrieved, so they lower recall rather than vanish. How
 * many there were is returned in `missingItems` (and `missingQueries` counts judged
 * or counted query ids absent from the query view), never dropped silently.
 */
import { alloc, encodeStrings, i32 } from '../index/view/buffers.ts';
import type { KeywordView } from '../index/view/view.ts';

export interface RelevanceData {
  numQueries: number;
  numItems: number;
  /** query ordinal → sorted relevant item ordinals (items present in the item view). */
  qRelOff: Int32Array;
  qRel: Int32Array;
  /** item ordinal → sorted query ordinals for which the item is relevant. */
  iRelOff: Int32Array;
  iRel: Int32Array;
  /** 1 when the query's F contributes to Σ_q F(q). */
  counted: Uint8Array;
  /** |rel(q)|, relevant items missing from the item view included. */
  nRel: Int32Array;
  /** (query, item) judgements whose item is not in the item view. */
  missingItems: number;
  /** judged or counted query ids that are not in the query view. */
  missingQueries: number;
}

export function buildRelevance(
  queryView: KeywordView,
  itemView: KeywordView,
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  counted?: ReadonlySet<string>,
  opts: { shared?: boolean } = {},
): RelevanceData {
  const shared = opts.shared ?? false;
  const nq = queryView.size;
  const ni = itemView.size;
  const lists: number[][] = Array.from({ length: nq }, () => []);
  const nRel = i32(nq, shared);
  const countedArr = new Uint8Array(alloc(nq, shared), 0, nq);
  let missingItems = 0;
  let missingQueries = 0;
  for (const [qid, items] of relevant) {
    const q = queryView.ordinalOf(qid);
    if (q < 0) {
      if (items.size > 0) missingQueries++;
      continue;
    }
    nRel[q] = items.size;
    const list = lists[q];
    for (const iid of items) {
      const i = itemView.ordinalOf(iid);
      if (i < 0) missingItems++;
      else list.push(i);
    }
    list.sort((a, b) => a - b);
    if (counted === undefined && items.size > 0) countedArr[q] = 1;
  }
  if (counted !== undefined) {
    for (const qid of counted) {
      const q = queryView.ordinalOf(qid);
      if (q < 0) missingQueries++;
      else countedArr[q] = 1;
    }
  }
  const qRelOff = i32(nq + 1, shared);
  let total = 0;
  const perItem = new Int32Array(ni);
  for (let q = 0; q < nq; q++) {
    qRelOff[q] = total;
    total += lists[q].length;
    for (const i of lists[q]) perItem[i]++;
  }
  qRelOff[nq] = total;
  const qRel = i32(total, shared);
  for (let q = 0; q < nq; q++) qRel.set(lists[q], qRelOff[q]);
  const iRelOff = i32(ni + 1, shared);
  let acc = 0;
  for (let i = 0; i < ni; i++) {
    iRelOff[i] = acc;
    acc += perItem[i];
  }
  iRelOff[ni] = acc;
  const iRel = i32(acc, shared);
  const cursor = new Int32Array(ni);
  // q ascending, so each item's query list comes out sorted.
  for (let q = 0; q < nq; q++) {
    for (let j = qRelOff[q]; j < qRelOff[q + 1]; j++) {
      const i = qRel[j];
      iRel[iRelOff[i] + cursor[i]++] = q;
    }
  }
  return { numQueries: nq, numItems: ni, qRelOff, qRel, iRelOff, iRel, counted: countedArr, nRel, missingItems, missingQueries };
}

/**
 * Query-side judgements against one item view, as plain (shareable) data: for every
 * query whose reward can be asked, its id and raw text ({q}) as string tables, its
 * relevant item ordinals (sorted, distinct; items absent from the view left out) and
 * |rel(q)| with the absent ones counted (they lower recall rather than vanish).
 */
export interface QueryJudgementData {
  numQueries: number;
  idsBlob: Uint8Array;
  idsOff: Int32Array;
  textBlob: Uint8Array;
  textOff: Int32Array;
  relOff: Int32Array;
  rel: Int32Array;
  nRel: Int32Array;
  /** Per query: the keywords that do not match when it is scored (its own names, leave-one-out), joined by newlines. */
  excludeBlob: Uint8Array;
  excludeOff: Int32Array;
}

export function buildQueryJudgements(
  itemView: KeywordView,
  queryText: ReadonlyMap<string, string>,
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  opts: { shared?: boolean; exclude?: ReadonlyMap<string, readonly string[]> } = {},
): QueryJudgementData {
  const shared = opts.shared ?? false;
  const ids = [...queryText.keys()];
  const n = ids.length;
  const relOff = i32(n + 1, shared);
  const nRel = i32(n, shared);
  const lists: Int32Array[] = [];
  let total = 0;
  for (let q = 0; q < n; q++) {
    const items = relevant.get(ids[q]) ?? new Set<string>();
    nRel[q] = items.size;
    const ords: number[] = [];
    for (const iid of items) {
      const o = itemView.ordinalOf(iid);
      if (o >= 0) ords.push(o);
    }
    const sorted = Int32Array.from(ords).sort();
    lists.push(sorted);
    relOff[q] = total;
    total += sorted.length;
  }
  relOff[n] = total;
  const rel = i32(total, shared);
  lists.forEach((l, q) => rel.set(l, relOff[q]));
  const idTable = encodeStrings(ids, shared);
  const textTable = encodeStrings(
    ids.map((id) => queryText.get(id)!),
    shared,
  );
  const excludeTable = encodeStrings(
    ids.map((id) => (opts.exclude?.get(id) ?? []).join('\n')),
    shared,
  );
  return {
    numQueries: n,
    idsBlob: idTable.blob,
    idsOff: idTable.off,
    textBlob: textTable.blob,
    textOff: textTable.off,
    relOff,
    rel,
    nRel,
    excludeBlob: excludeTable.blob,
    excludeOff: excludeTable.off,
  };
}
