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
import { cogrError, isCogrError, type CogrError } from '../index/errors.ts';
import { silentLogger, type Logger } from '../index/log.ts';
import type { KeywordView, ViewData } from '../index/view.ts';
import { DEFAULT_K_MAX, mergeItemRewardCaches, type ItemRewardCache, type ItemRewardTask } from '../rewards/itemReward.ts';
import type { RelevanceData } from '../rewards/relevance.ts';
import {
  shareAll,
  type ContextHandles,
  type QueryRewardOutcome,
  type QueryRewardTask,
  type WorkerTask,
  type WorkerTestHooks,
} from './shared.ts';

export type { QueryRewardOutcome, QueryRewardTask } from './shared.ts';

export interface RewardPoolOptions {
  /** Number of worker threads; default os.availableParallelism(). */
  size?: number;
  logger?: Logger;
  /** Chunks per worker a batch is cut into (load balancing); default 4. */
  chunksPerWorker?: number;
  /** Test-only worker behaviour (e.g. exit on a given item ordinal). */
  testHooks?: WorkerTestHooks;
}

const OptionsSchema = z.object({
  size: z.number().int('size must be an integer').min(1, 'size must be at least 1').optional(),
  chunksPerWorker: z.number().int('chunksPerWorker must be an integer').min(1, 'chunksPerWorker must be at least 1').optional(),
  logger: z.any().optional(),
  testHooks: z.object({ exitOnItem: z.number().int().optional() }).optional(),
});

/** The reward context the pool serves: views, relevance and (item side) the cache. */
export interface PoolContext {
  itemView: KeywordView;
  /** Needed for item rewards and the cache. */
  queryView?: KeywordView;
  relevance?: RelevanceData;
  cache?: ItemRewardCache;
  kMax?: number;
  beta?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** A context id from setContext; default the latest one. */
  contextId?: number;
}

const WORKER_FILE = fileURLToPath(new URL('./rewardWorker.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** Registered contexts kept per pool; older ones are dropped (calls naming them get NOT_FOUND). */
export const MAX_CONTEXTS = 8;

let nextId = 1;
const sharedViews = new WeakMap<KeywordView, { id: number; data: ViewData }>();
/** The view's data on SharedArrayBuffer (copied once per view when it is not) and a stable id. */
function sharedView(v: KeywordView): { id: number; data: ViewData } {
  let d = sharedViews.get(v);
  if (!d) {
    d = { id: nextId++, data: shareAll(v.data) };
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
    this.piscina = new Piscina({
      filename: WORKER_FILE,
      minThreads: this.size,
      maxThreads: this.size,
      idleTimeout: 60_000,
      // Two tasks in flight per worker: the next chunk is cloned and queued while the
      // worker computes the current one (the handler is synchronous, so they run in turn).
      concurrentTasksPerWorker: 2,
      execArgv: ['--import', TSX_LOADER],
      workerData: { testHooks: opts.testHooks ?? {} },
    });
    this.piscina.on('error', (e: unknown) => this.logger.warn('reward worker error', { error: describe(e) }));
  }

  static create(opts: RewardPoolOptions = {}): RewardPool {
    const parsed = OptionsSchema.safeParse(opts);
    if (!parsed.success) {
      const msg = parsed.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ');
      throw cogrError('INVALID_ARGUMENT', `reward pool options: ${msg}`);
    }
    return new RewardPool(opts);
  }

  /**
   * Register a context (typed arrays are moved to SharedArrayBuffer once when they are
   * not there yet) and make it the current one. Returns its id.
   */
  setContext(ctx: PoolContext): number {
    this.checkAlive();
    const id = nextId++;
    const item = sharedView(ctx.itemView);
    const query = ctx.queryView ? sharedView(ctx.queryView) : null;
    const handles: ContextHandles = {
      id,
      itemViewId: item.id,
      itemData: item.data,
      queryViewId: query?.id ?? 0,
      queryData: query?.data ?? null,
      relevance: ctx.relevance ? shareAll(ctx.relevance) : null,
      cache: ctx.cache ? shareAll(ctx.cache) : null,
      kMax: ctx.kMax ?? DEFAULT_K_MAX,
      beta: ctx.beta ?? 1,
    };
    this.contexts.set(id, handles);
    this.current = id;
    // Contexts are per round; keep the last few so that a long run does not pin old rounds.
    while (this.contexts.size > MAX_CONTEXTS) {
      const oldest = this.contexts.keys().next().value as number;
      this.contexts.delete(oldest);
      this.logger.debug('reward context dropped (oldest)', { id: oldest });
    }
    this.logger.debug('reward context registered', { id, items: ctx.itemView.size, queries: ctx.queryView?.size ?? 0 });
    return id;
  }

  /** Forget a context (the workers drop their views of it as newer ones arrive). */
  dropContext(id: number): void {
    this.contexts.delete(id);
    if (this.current === id) this.current = null;
  }

  /**
   * Build the per-round item-reward cache in parallel over item ranges and merge it
   * (on SharedArrayBuffer). Register it with `setContext({...ctx, cache})`.
   */
  async buildItemCache(ctx: PoolContext, opts: { signal?: AbortSignal } = {}): Promise<ItemRewardCache> {
    this.checkAlive();
    if (!ctx.queryView || !ctx.relevance) throw cogrError('INVALID_ARGUMENT', 'buildItemCache: the context needs queryView and relevance');
    const prev = this.current;
    const id = this.setContext({ ...ctx, cache: undefined });
    this.current = prev;
    const handles = this.contexts.get(id)!;
    try {
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
    } finally {
      this.dropContext(id);
    }
  }

  /** Incremental item rewards: one array per batch entry, one reward per candidate. */
  async itemRewards(batch: readonly ItemRewardTask[], opts: CallOptions = {}): Promise<number[][]> {
    const handles = this.handles(opts.contextId);
    if (!handles.cache || !handles.queryData || !handles.relevance) {
      throw cogrError('INVALID_ARGUMENT', 'itemRewards: the context needs queryView, relevance and cache');
    }
    const chunks = this.chunk(batch);
    const out = await this.runAll<number[][]>(
      chunks.map((c) => ({ kind: 'itemRewards', ctx: handles, batch: c })),
      chunks.map((c) => `item batch items ${c[0].item}..${c[c.length - 1].item} (size ${c.length})`),
      opts.signal,
    );
    return out.flat();
  }

  /** Query rewards against the context's item view: per entry, per candidate. */
  async queryRewards(batch: readonly QueryRewardTask[], opts: CallOptions = {}): Promise<QueryRewardOutcome[][]> {
    const handles = this.handles(opts.contextId);
    const chunks = this.chunk(batch);
    let first = 0;
    const labels = chunks.map((c) => {
      const l = `query batch entries ${first}..${first + c.length - 1} (size ${c.length})`;
      first += c.length;
      return l;
    });
    const out = await this.runAll<QueryRewardOutcome[][]>(
      chunks.map((c) => ({ kind: 'queryRewards', ctx: handles, batch: c })),
      labels,
      opts.signal,
    );
    return out.flat();
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
          err = cogrError('WORKER_ERROR', `reward worker failed on ${labels[k]}: ${describe(e)}`, { batch: labels[k], cause: code ?? null }, e);
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
