/**
 * Keyword generation off the event loop: a small pool of worker threads that answer
 * "keywords for this query text" for the served generator, so that a request that needs
 * many generations (a Boolean program with 64 `text` nodes) never blocks `/health` or the
 * cached searches, and the keyword time budget can really fall back to the raw query.
 *
 * - `load(key, payload, items)` sends a generator's document (queryGenerator.ts) and the
 *   served item view's data (typed arrays on SharedArrayBuffer: shared, not copied) to every
 *   worker, which rebuilds the generator once and keeps it under `key`; it resolves when
 *   every worker has it. The items its relevance model is built over cross once per items
 *   key, and a worker reuses the model it built over them for the next generator loaded over
 *   the same key (a catalog write changes the view, not the model). `release(key)` drops it
 *   (and item lists no generator uses any more). A generator that needs a relevance model
 *   no worker has built yet, loaded while another is served, replaces the workers one at a
 *   time (each new worker builds every loaded generator while the old one keeps answering),
 *   so searches never wait for the seconds a rebuild takes.
 * - `plan(key, text, signal)` queues one request; a free worker takes the oldest. A request
 *   whose signal fires while it waits is dropped from the queue (the budget ran out: no
 *   worker spends time on it); one already running finishes and its answer is returned
 *   to whoever still waits for it. The queue is bounded: beyond `maxQueue` a request is
 *   refused at once (`KeywordPoolBusy`).
 * - A worker that dies fails its request and is replaced (with every loaded generator).
 */
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { cogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { Item } from '../../index/core/types.ts';
import type { ViewData } from '../../index/view/view.ts';
import type { SyncEmbedderOptions } from '../embeddings/syncEmbedder.ts';
import { NoSearchableTerms, type QueryGeneratorDocument, type RankedSet, type RankRequest } from './queryTypes.ts';
export type { RankedSet, RankRequest } from './queryTypes.ts';

export interface KeywordPoolOptions {
  /** Worker threads; default one less than the cores (at least 1, at most 4). */
  size?: number;
  /** Requests allowed to wait; default 256. */
  maxQueue?: number;
  logger?: Logger;
  /** The worker module (path); default this folder's keywordWorker. */
  workerEntry?: string;
  /**
   * Dense relevance features (a run fitted with `--embeddings`): the items' vectors, sent
   * to every worker with each generator, and how to get a query text's vector — awaited
   * before the request is queued and sent with it.
   */
  dense?: { vectors: DensePayload; embed: (text: string, signal?: AbortSignal) => Promise<Float32Array> };
}

/** An embeddings model's item vectors for the workers (row i is ids[i]'s). */
export interface DensePayload {
  model: string;
  dim: number;
  ids: string[];
  data: Float32Array;
  /** The endpoint a worker's planner asks, synchronously, for the keyword vectors it lacks (a run with `keywordCosine`); null: none. */
  endpoint: SyncEmbedderOptions | null;
}

export interface LoadPayload {
  doc: QueryGeneratorDocument;
  view: ViewData;
  /** The items the generator's relevance model is built over, sent once per key (`items` messages); null: none known. */
  itemsKey: string | null;
  dense?: DensePayload;
}

/** Messages to a worker. */
export type ToWorker =
  | { t: 'items'; key: string; items: readonly Item[] }
  | { t: 'dropItems'; key: string }
  | { t: 'load'; key: string; payload: LoadPayload }
  | { t: 'release'; key: string }
  | { t: 'plan'; id: number; key: string; text: string; vector?: Float32Array }
  | { t: 'rank'; id: number; key: string; req: RankRequest; vector?: Float32Array };
/** Messages from a worker. */
export type FromWorker =
  | { t: 'loaded'; key: string; error?: string }
  | { t: 'result'; id: number; keywords: string[] }
  | { t: 'ranked'; id: number; ranked: RankedSet }
  | { t: 'noTerms'; id: number }
  | { t: 'error'; id: number; message: string };

/** The queue is full: the caller falls back at once. */
export class KeywordPoolBusy extends Error {
  constructor(queued: number) {
    super(`the keyword workers are busy (${queued} requests waiting)`);
    this.name = 'KeywordPoolBusy';
  }
}

interface Task {
  id: number;
  key: string;
  text: string;
  /** A ranking request instead of a plan. */
  rank?: RankRequest;
  vector?: Float32Array;
  resolve: (out: never) => void;
  reject: (e: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | null;
}

interface Slot {
  worker: Worker;
  busy: Task | null;
  loads: Map<string, { resolve: () => void; reject: (e: unknown) => void }>;
  /** Replaced by a worker that has every generator: stops once its task is answered. */
  retiring?: boolean;
}

const OWN_EXTENSION = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const DEFAULT_WORKER = fileURLToPath(new URL(`./keywordWorker${OWN_EXTENSION}`, import.meta.url));
const TS_BOOT = fileURLToPath(new URL('./tsWorkerBoot.cjs', import.meta.url));

function execArgv(entry: string): string[] {
  if (!entry.endsWith('.ts')) return ['--enable-source-maps'];
  return ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}

export function defaultKeywordWorkers(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

export class KeywordWorkerPool {
  readonly size: number;
  private readonly maxQueue: number;
  private readonly log: Logger;
  private readonly entry: string;
  private readonly slots: Slot[] = [];
  private readonly queue: Task[] = [];
  private readonly loaded = new Map<string, LoadPayload>();
  /** Item lists the workers hold, by key (sent once, shared by every generator loaded over them). */
  private readonly itemLists = new Map<string, readonly Item[]>();
  /** (planner round, items key) pairs whose relevance model the workers have built. */
  private readonly models = new Set<string>();
  private nextId = 1;
  private closed = false;

  constructor(opts: KeywordPoolOptions = {}) {
    this.size = opts.size ?? defaultKeywordWorkers();
    if (!Number.isInteger(this.size) || this.size < 1)
      throw cogrError('INVALID_ARGUMENT', `keyword workers: expected an integer ≥ 1, got ${this.size}`);
    this.maxQueue = opts.maxQueue ?? 256;
    this.log = opts.logger ?? silentLogger;
    this.entry = opts.workerEntry ?? DEFAULT_WORKER;
    this.dense = opts.dense ?? null;
    for (let i = 0; i < this.size; i++) this.slots.push(this.spawn());
  }

  private spawn(): Slot {
    // A TypeScript entry (tests) is required from a CommonJS boot file under tsx's hooks.
    const worker = this.entry.endsWith('.ts')
      ? new Worker(TS_BOOT, { workerData: { cogrWorkerEntry: this.entry }, execArgv: execArgv(this.entry) })
      : new Worker(this.entry, { execArgv: execArgv(this.entry) });
    worker.unref();
    const slot: Slot = { worker, busy: null, loads: new Map() };
    worker.on('message', (m: FromWorker) => this.onMessage(slot, m));
    worker.on('error', (e) => this.onExit(slot, e));
    worker.on('exit', (code) => this.onExit(slot, new Error(`keyword worker exited with code ${code}`)));
    // A replacement gets every item list and generator still loaded before any request.
    for (const [key, items] of this.itemLists) worker.postMessage({ t: 'items', key, items } satisfies ToWorker);
    for (const [key, payload] of this.loaded) worker.postMessage({ t: 'load', key, payload } satisfies ToWorker);
    return slot;
  }

  private onMessage(slot: Slot, m: FromWorker): void {
    if (m.t === 'loaded') {
      const l = slot.loads.get(m.key);
      slot.loads.delete(m.key);
      if (l)
        m.error === undefined
          ? l.resolve()
          : l.reject(cogrError('WORKER_ERROR', `keyword worker: loading the generator failed: ${m.error}`));
      return;
    }
    const task = slot.busy;
    if (!task || task.id !== m.id) return;
    slot.busy = null;
    if (m.t === 'result') (task.resolve as (k: string[]) => void)(m.keywords);
    else if (m.t === 'ranked') (task.resolve as (r: RankedSet) => void)(m.ranked);
    else if (m.t === 'noTerms') task.reject(new NoSearchableTerms(task.text));
    else task.reject(new Error(m.message));
    if (slot.retiring) void slot.worker.terminate().catch(() => {});
    this.dispatch();
  }

  private onExit(slot: Slot, e: unknown): void {
    const err = cogrError('WORKER_ERROR', `keyword worker failed: ${e instanceof Error ? e.message : String(e)}`);
    slot.busy?.reject(err);
    slot.busy = null;
    for (const l of slot.loads.values()) l.reject(err);
    slot.loads.clear();
    // A retired worker, or a replacement that never took its place.
    const i = this.slots.indexOf(slot);
    if (i < 0) return;
    this.slots.splice(i, 1);
    void slot.worker.terminate().catch(() => {});
    if (this.closed) return;
    this.log.warn('keyword worker failed; starting a new one', { error: err.message });
    this.slots.push(this.spawn());
    this.dispatch();
  }

  /** Rebuild a generator in every worker under `key`; resolves when all have it. */
  private readonly dense: NonNullable<KeywordPoolOptions['dense']> | null;

  async load(key: string, given: Omit<LoadPayload, 'itemsKey'>, items: { key: string; items: readonly Item[] } | null): Promise<void> {
    if (this.closed) throw cogrError('INTERNAL', 'the keyword pool is closed');
    // The items cross to the workers once per key: a generator loaded over the same items (a
    // catalog write's new view) reuses the relevance model a worker built over them.
    if (items && !this.itemLists.has(items.key)) {
      this.itemLists.set(items.key, items.items);
      for (const slot of this.slots) slot.worker.postMessage({ t: 'items', key: items.key, items: items.items } satisfies ToWorker);
    }
    const payload: LoadPayload = { ...given, itemsKey: items?.key ?? null, ...(this.dense ? { dense: this.dense.vectors } : {}) };
    // A generator whose relevance model no worker has built (a new round, the catalog's items
    // refreshed) takes a second or more to rebuild: while one is served, each worker is
    // replaced by a new one that builds every generator loaded, the old one answering meanwhile.
    const model = `${given.doc.round}\u0000${items?.key ?? ''}`;
    const rolling = this.loaded.size > 0 && !this.models.has(model);
    this.models.add(model);
    this.loaded.set(key, payload);
    try {
      if (rolling) await this.replaceWorkers();
      else
        await Promise.all(
          this.slots.map(
            (slot) =>
              new Promise<void>((resolve, reject) => {
                slot.loads.set(key, { resolve, reject });
                slot.worker.postMessage({ t: 'load', key, payload } satisfies ToWorker);
              }),
          ),
        );
    } catch (e) {
      this.models.delete(model);
      this.release(key);
      throw e;
    }
  }

  /**
   * Replace every worker, one at a time, by a new one that has every item list and generator
   * loaded now; the old one keeps answering until its replacement is ready, then stops once
   * its task in hand is answered.
   */
  private async replaceWorkers(): Promise<void> {
    for (const old of [...this.slots]) {
      if (this.closed) return;
      const fresh = this.spawn();
      const ready = Promise.all(
        [...this.loaded.keys()].map((k) => new Promise<void>((resolve, reject) => fresh.loads.set(k, { resolve, reject }))),
      );
      try {
        await ready;
      } catch (e) {
        void fresh.worker.terminate().catch(() => {});
        throw e;
      }
      const i = this.slots.indexOf(old);
      // The old worker died meanwhile (its own replacement already took its place): the new one is not needed.
      if (i < 0 || this.closed) {
        void fresh.worker.terminate().catch(() => {});
        continue;
      }
      this.slots[i] = fresh;
      if (old.busy) old.retiring = true;
      else void old.worker.terminate().catch(() => {});
      this.dispatch();
    }
  }

  release(key: string): void {
    if (!this.loaded.delete(key)) return;
    for (const slot of this.slots) slot.worker.postMessage({ t: 'release', key } satisfies ToWorker);
    // Item lists no loaded generator uses any more are dropped too.
    const used = new Set([...this.loaded.values()].map((p) => p.itemsKey));
    for (const k of [...this.itemLists.keys()]) {
      if (used.has(k)) continue;
      this.itemLists.delete(k);
      for (const m of [...this.models]) if (m.endsWith(`\u0000${k}`)) this.models.delete(m);
      for (const slot of this.slots) slot.worker.postMessage({ t: 'dropItems', key: k } satisfies ToWorker);
    }
  }

  /** Keywords of `text` from the generator loaded as `key`. */
  async plan(key: string, text: string, signal?: AbortSignal): Promise<string[]> {
    const vector = this.dense ? await this.dense.embed(text, signal) : undefined;
    return this.enqueue<string[]>(key, text, undefined, signal, vector);
  }

  /** The served set of a query ordered by a ranker, from the generator loaded as `key` (its p and text BM25 over the served view). */
  async rank(key: string, req: RankRequest, signal?: AbortSignal): Promise<RankedSet> {
    const vector = this.dense ? await this.dense.embed(req.text, signal) : undefined;
    return this.enqueue<RankedSet>(key, req.text, req, signal, vector);
  }

  private enqueue<T>(key: string, text: string, rank: RankRequest | undefined, signal?: AbortSignal, vector?: Float32Array): Promise<T> {
    if (this.closed) return Promise.reject(cogrError('INTERNAL', 'the keyword pool is closed'));
    if (!this.loaded.has(key)) return Promise.reject(cogrError('INTERNAL', `no generator loaded as ${key}`));
    if (signal?.aborted) return Promise.reject(cogrError('ABORTED', 'keyword generation cancelled'));
    if (this.queue.length >= this.maxQueue) return Promise.reject(new KeywordPoolBusy(this.queue.length));
    return new Promise<T>((resolve, reject) => {
      const task: Task = {
        id: this.nextId++,
        key,
        text,
        ...(rank ? { rank } : {}),
        ...(vector ? { vector } : {}),
        resolve: resolve as (out: never) => void,
        reject,
        signal,
        onAbort: null,
      };
      if (signal) {
        task.onAbort = () => {
          const i = this.queue.indexOf(task);
          if (i >= 0) {
            this.queue.splice(i, 1);
            reject(cogrError('ABORTED', 'keyword generation cancelled while waiting for a worker'));
          }
        };
        signal.addEventListener('abort', task.onAbort, { once: true });
      }
      this.queue.push(task);
      this.dispatch();
    });
  }

  /** Requests waiting for a worker. */
  get queued(): number {
    return this.queue.length;
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const task = this.queue.shift();
      if (!task) return;
      if (task.signal && task.onAbort) task.signal.removeEventListener('abort', task.onAbort);
      slot.busy = task;
      const v = task.vector ? { vector: task.vector } : {};
      slot.worker.postMessage(
        (task.rank
          ? { t: 'rank', id: task.id, key: task.key, req: task.rank, ...v }
          : { t: 'plan', id: task.id, key: task.key, text: task.text, ...v }) satisfies ToWorker,
      );
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const err = cogrError('ABORTED', 'the keyword pool was closed');
    for (const t of this.queue.splice(0)) t.reject(err);
    const slots = this.slots.splice(0);
    for (const s of slots) s.busy?.reject(err);
    await Promise.all(slots.map((s) => s.worker.terminate().catch(() => 0)));
  }
}
