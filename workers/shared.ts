/**
 * What crosses the thread boundary: the plain data of a reward scorer, with every typed
 * array on a SharedArrayBuffer so that posting it to a worker shares the memory instead
 * of copying it, and the task shapes of the reward worker.
 */
import type { ViewData } from '../index/view/view.ts';
import type { ItemRewardCache } from '../rewards/itemReward.ts';
import type { QueryJudgementData, RelevanceData } from '../rewards/relevance.ts';
import type { RewardSample, ScorerOptions } from '../rewards/scorer.ts';

/** Process-unique ids of the views; workers keep one reconstructed KeywordView per id. */
export interface ViewHandle {
  id: number;
  data: ViewData;
}

/** A registered scorer: its side's data, views as handles. */
export type ContextHandles =
  | { id: number; side: 'query'; item: ViewHandle; judgements: QueryJudgementData; options: ScorerOptions }
  | {
      id: number;
      side: 'item';
      item: ViewHandle;
      query: ViewHandle;
      relevance: RelevanceData;
      cache: ItemRewardCache;
      options: ScorerOptions;
    };

/** What building a range of the item-reward cache needs. */
export interface CacheHandles {
  item: ViewHandle;
  query: ViewHandle;
  relevance: RelevanceData;
}

export type WorkerTask =
  { kind: 'buildCache'; ctx: CacheHandles; start: number; end: number } | { kind: 'rewards'; ctx: ContextHandles; batch: RewardSample[] };

function isShared(a: ArrayBufferView): boolean {
  return typeof SharedArrayBuffer !== 'undefined' && a.buffer instanceof SharedArrayBuffer;
}

/** A typed array on a SharedArrayBuffer: the array itself when it already is. */
export function shareArray<T extends Int32Array | Uint8Array>(a: T): T {
  if (isShared(a)) return a;
  const Ctor = a.constructor as { new (buf: ArrayBufferLike, off: number, len: number): T };
  const out = new Ctor(new SharedArrayBuffer(Math.max(a.byteLength, 8)), 0, a.length);
  out.set(a as never);
  return out;
}

/** A shallow copy of a plain object whose typed arrays are all SharedArrayBuffer-backed. */
export function shareAll<T extends object>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    out[k] = v instanceof Int32Array || v instanceof Uint8Array ? shareArray(v) : v;
  }
  return out as T;
}
