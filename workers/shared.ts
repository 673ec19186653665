/**
 * What crosses the thread boundary: the plain data of a reward context, with every
 * typed array on a SharedArrayBuffer so that posting it to a worker shares the memory
 * instead of copying it, and the task shapes of the reward worker.
 */
import type { ViewData } from '../index/view.ts';
import type { ItemRewardCache, ItemRewardTask } from '../rewards/itemReward.ts';
import type { RelevanceData } from '../rewards/relevance.ts';

export interface ContextHandles {
  /** Process-unique id of the context. */
  id: number;
  /** Process-unique ids of the views; workers keep one reconstructed KeywordView per id. */
  itemViewId: number;
  itemData: ViewData;
  queryViewId: number;
  queryData: ViewData | null;
  relevance: RelevanceData | null;
  cache: ItemRewardCache | null;
  kMax: number;
  beta: number;
}

export interface QueryRewardTask {
  /** The raw query text ({q}). */
  self: string;
  /** Relevant item ordinals in the item view. */
  relevant: Int32Array | number[];
  /** |rel(q)| when it exceeds the ordinals given (relevant items missing from the view). */
  nRel?: number;
  candidates: string[][];
}

export interface QueryRewardOutcome {
  reward: number;
  nRet: number;
  tp: number;
}

export type WorkerTask =
  | { kind: 'buildCache'; ctx: ContextHandles; start: number; end: number }
  | { kind: 'itemRewards'; ctx: ContextHandles; batch: ItemRewardTask[] }
  | { kind: 'queryRewards'; ctx: ContextHandles; batch: QueryRewardTask[] };

/** Test-only behaviour of the worker, set through the pool's `testHooks` option. */
export interface WorkerTestHooks {
  /** process.exit(1) inside the worker when an item-reward batch contains this ordinal. */
  exitOnItem?: number;
}

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

/** True when every typed array of the object lives on a SharedArrayBuffer. */
export function allShared(obj: object): boolean {
  for (const v of Object.values(obj)) {
    if ((v instanceof Int32Array || v instanceof Uint8Array) && !isShared(v)) return false;
  }
  return true;
}
