/**
 * A Piscina pool of reward workers.
 *
 * - The frozen views, the relevance data and the per-round cache are shared with the
 *   workers through SharedArrayBuffer: a context is registered once (`setContext`),
 *   every task carries only small handles to the same shared memory, and each worker
 *   reconstructs a `KeywordView` once per view and keeps it.
 * - Work is sent as batches (contiguous chunks of the caller's batch, a few per
 *   worker); results come back as plain arrays, in the caller's order.
 * - A worker that throws fails the call with CogrError('WORKER_ERROR') naming the chunk
 *   (first and last item ordinal or query index, size); the remaining chunks of that
 *   call are cancelled. An abort signal cancels outstanding work (CogrError('ABORTED')).
 *   A worker that dies (process.exit, crash) fails its chunk the same way and Piscina
 *   starts a replacement, so a round never hangs on it.
 */
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { z } from 'zod';
import { cogrError, isCogrError, schemaError, type CogrError } from '../index/core/errors.ts';
import { silentLogger, type Logger } from '../index/core/log.ts';
import type { KeywordView, ViewData } from '../index/view/view.ts';
import { mergeItemRewardCaches, type ItemRewardCache } from '../rewards/itemReward.ts';
import type { RelevanceData } from '../rewards/relevance.ts';
import type { RewardSample, ScoredBatch, ScorerData } from '../rewards/scorer.ts';
import { shareAll, type CacheHandles, type ContextHandles, type ViewHandle, type WorkerTask } from './shared.ts';

export interface RewardPoolOptions {
  /** Number of worker threads; default os.availableParallelism(). */
  size?: number;
  logger?: Logger;
  /** Chunks per worker a batch is cut into (load balancing); default 4. */
  chunksPerWorker?: number;
  /**
   * The worker module (path or file URL) whose default export handles the tasks; default
   * this folder's rewardWorker. Tests wrap the real worker here to inject faults.
   */
  workerEntry?: string;
}

const OptionsSchema = z.object({
  size: z.number().int('size must be an integer').min(1, 'size must be at least 1').optional(),
  chunksPerWorker: z.number().int('chunksPerWorker must be an integer').min(1, 'chunksPerWorker must be at least 1').optional(),
  logger: z.any().optional(),
  workerEntry: z.string().min(1, 'workerEntry must not be empty').optional(),
});

/** What building the item-reward cache needs: both views and the judgements in them. */
export interface CacheContext {
  itemView: KeywordView;
  queryView: KeywordView;
  relevance: RelevanceData;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** A context id from setContext; default the latest one. */
  contextId?: number;
}

/** The worker entry next to this module: TypeScript under a TypeScript loader (tests, tsx), JavaScript when compiled. */
const OWN_EXTENSION = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const DEFAULT_WORKER = fileURLToPath(new URL(`./rewardWorker${OWN_EXTENSION}`, import.meta.url));

/**
 * Node flags for a worker entry: compiled JavaScript with source maps on (stack traces
 * name the .ts lines); a TypeScript entry (tests, tsx) through tsx's loader.
 */
function workerExecArgv(entry: string): string[] {
  if (!entry.endsWith('.ts')) return ['--enable-source-maps'];
  return ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}

/** Registered contexts kept per pool; older ones are dropped (calls naming them get NOT_FOUND). */
export const MAX_CONTEXTS = 8;

let nextId = 1;
const sharedViews = new WeakMap<KeywordView, ViewHandle>();
/** The view's data on SharedArrayBuffer (copied once per view when it is not) and a stable id. */
function sharedView(v: KeywordView): ViewHandle {
  let d = sharedViews.get(v);
  if (!d) {
    d = { id: nextId++, data: shareAll(v.data) as ViewData };
    sharedViews.set(v, d);
  }
  return d;
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class RewardPool {
  readonly size: number;
  private readonly piscina: Piscina;
  private readonly logger: Logger;
  private readonly chunksPerWorker: number;
  private readonly contexts = new Map<number, ContextHandles>();
  private current: number | null = null;
  private destroyed = false;

  private constructor(opts: RewardPoolOptions) {
    this.size = opts.size ?? availableParallelism();
    this.logger = opts.logger ?? silentLogger;
    this.chunksPerWorker = opts.chunksPerWorker ?? 4;
    const entry = opts.workerEntry
      ? opts.workerEntry.startsWith('file:')
        ? fileURLToPath(opts.workerEntry)
        : opts.workerEntry
      : DEFAULT_WORKER;
    this.piscina = new Piscina({
      filename: entry,
      minThreads: this.size,
      maxThreads: this.size,
      idleTimeout: 60_000,
      // Two tasks in flight per worker: the next chunk is cloned and queued while the
      // worker computes the current one (the handler is synchronous, so they run in turn).
      concurrentTasksPerWorker: 2,
      execArgv: workerExecArgv(entry),
    });
    this.piscina.on('error', (e: unknown) => this.logger.warn('reward worker error', { error: describe(e) }));
  }

  static create(opts: RewardPoolOptions = {}): RewardPool {
    const parsed = OptionsSchema.safeParse(opts);
    if (!parsed.success) throw schemaError('INVALID_ARGUMENT', parsed.error, { what: 'reward pool options' });
    return new RewardPool(opts);
  }

  /**
   * Register a scorer's data (typed arrays are moved to SharedArrayBuffer once when they
   * are not there yet) and make it the current context. Returns its id.
   */
  setContext(data: ScorerData): number {
    this.checkAlive();
    const id = nextId++;
    const item = sharedView(data.itemView);
    const handles: ContextHandles =
      data.side === 'query'
        ? { id, side: 'query', item, judgements: shareAll(data.judgements), options: data.options }
        : {
            id,
            side: 'item',
            item,
            query: sharedView(data.queryView),
            relevance: shareAll(data.relevance),
            cache: shareAll(data.cache),
            options: data.options,
          };
    this.contexts.set(id, handles);
    this.current = id;
    // Contexts are per round; keep the last few so that a long run does not pin old rounds.
    while (this.contexts.size > MAX_CONTEXTS) {
      const oldest = this.contexts.keys().next().value as number;
      this.contexts.delete(oldest);
      this.logger.debug('reward context dropped (oldest)', { id: oldest });
    }
    this.logger.debug('reward context registered', { id, side: data.side, items: data.itemView.size });
    return id;
  }

  /** Forget a context (the workers drop their scorers of it as newer ones arrive). */
  dropContext(id: number): void {
    this.contexts.delete(id);
    if (this.current === id) this.current = null;
  }

  /** Build the per-round item-reward cache in parallel over item ranges and merge it (on SharedArrayBuffer). */
  async buildItemCache(ctx: CacheContext, opts: { signal?: AbortSignal } = {}): Promise<ItemRewardCache> {
    this.checkAlive();
    const handles: CacheHandles = { item: sharedView(ctx.itemView), query: sharedView(ctx.queryView), relevance: shareAll(ctx.relevance) };
    const n = ctx.itemView.size;
    const parts = Math.max(1, Math.min(n, this.size * this.chunksPerWorker));
    const ranges: { start: number; end: number }[] = [];
    for (let p = 0; p < parts; p++) ranges.push({ start: Math.floor((p * n) / parts), end: Math.floor(((p + 1) * n) / parts) });
    const results = await this.runAll<ItemRewardCache>(
      ranges.map((r) => ({ kind: 'buildCache', ctx: handles, start: r.start, end: r.end })),
      ranges.map((r) => `cache items ${r.start}..${r.end - 1} (size ${r.end - r.start})`),
      opts.signal,
    );
    return mergeItemRewardCaches(results, { shared: true });
  }

  /** Rewards of a batch of samples by the context's scorer (rewards/scorer.ts), in the batch's order. */
  async rewards(batch: readonly RewardSample[], opts: CallOptions = {}): Promise<ScoredBatch<unknown>> {
    const handles = this.handles(opts.contextId);
    const chunks = this.chunk(batch);
    let first = 0;
    const labels = chunks.map((c) => {
      const l = `${handles.side} reward batch items ${first}..${first + c.length - 1} (size ${c.length}, ids ${c[0].id}..${c[c.length - 1].id})`;
      first += c.length;
      return l;
    });
    const parts = await this.runAll<ScoredBatch<unknown>>(
      chunks.map((c) => ({ kind: 'rewards', ctx: handles, batch: c })),
      labels,
      opts.signal,
    );
    return { rewards: parts.flatMap((p) => p.rewards), reasons: parts.flatMap((p) => p.reasons) };
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    this.contexts.clear();
    await this.piscina.destroy();
  }

  private checkAlive(): void {
    if (this.destroyed) throw cogrError('INVALID_ARGUMENT', 'the reward pool has been destroyed');
  }

  private handles(contextId: number | undefined): ContextHandles {
    this.checkAlive();
    const id = contextId ?? this.current;
    const h = id === null ? undefined : this.contexts.get(id);
    if (!h) throw cogrError('NOT_FOUND', id === null ? 'no reward context: call setContext first' : `reward context ${id} does not exist`);
    return h;
  }

  private chunk<T>(batch: readonly T[]): T[][] {
    if (batch.length === 0) return [];
    const n = Math.min(batch.length, this.size * this.chunksPerWorker);
    const out: T[][] = [];
    for (let p = 0; p < n; p++) out.push(batch.slice(Math.floor((p * batch.length) / n), Math.floor(((p + 1) * batch.length) / n)));
    return out;
  }

  /** Run tasks; the first failure cancels the rest and is reported with its label. */
  private async runAll<R>(tasks: WorkerTask[], labels: string[], signal?: AbortSignal): Promise<R[]> {
    if (signal?.aborted) throw cogrError('ABORTED', 'reward batch cancelled before it started');
    const internal = new AbortController();
    const combined = signal ? AbortSignal.any([signal, internal.signal]) : internal.signal;
    let failure: CogrError | null = null;
    const runs = tasks.map((t, k) =>
      (this.piscina.run(t, { signal: combined }) as Promise<R>).catch((e: unknown) => {
        let err: CogrError;
        if (signal?.aborted) {
          err = cogrError('ABORTED', `reward batch cancelled (${labels[k]})`, { batch: labels[k] }, e);
        } else if (failure !== null) {
          err = failure; // cancelled because another chunk failed
        } else {
          const code = isCogrError(e) ? e.code : (e as { code?: unknown })?.code;
          err = cogrError(
            'WORKER_ERROR',
            `reward worker failed on ${labels[k]}: ${describe(e)}`,
            { batch: labels[k], cause: code ?? null },
            e,
          );
          this.logger.warn('reward worker failed', { batch: labels[k], error: describe(e) });
        }
        if (failure === null) {
          failure = err;
          internal.abort();
        }
        throw err;
      }),
    );
    const settled = await Promise.allSettled(runs);
    if (failure !== null) throw failure;
    return settled.map((s) => (s as PromiseFulfilledResult<R>).value);
  }
}
