/**
 * Embeddings for code that cannot wait: the query planner decides its candidates
 * synchronously (generators/planner/queryContext.ts), and under `keywordCosine` it needs
 * the vectors of keywords it has not seen before. `SyncEmbedder` keeps an embeddings client
 * (client.ts: its deadline per attempt, retries and answer checks) in a worker thread of its
 * own (syncEmbedderWorker.ts) and blocks the calling thread on a shared flag until that
 * thread has answered or the deadline over the whole call has passed.
 *
 * The calling thread's event loop is blocked meanwhile, so the endpoint must not be served
 * from that same thread (a separate process, as `cogr embeddings serve` is, or another thread).
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError, type CogrError } from '../../index/core/errors.ts';

/** What a sync embedder needs of an endpoint (plain data: it is sent to a thread). */
export interface SyncEmbedderOptions {
  baseURL: string;
  /** The model to ask for (the run's); the endpoint must serve it. */
  model: string;
  /** The client's deadline per attempt (milliseconds). */
  timeoutMs: number;
}

/** A request to the embedder thread, and its answer. */
export type ToSyncEmbedder = { texts: string[] };
export type FromSyncEmbedder = { ok: true; dim: number; data: Float32Array } | { ok: false; code: string; message: string };

const OWN_EXTENSION = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const ENTRY = fileURLToPath(new URL(`./syncEmbedderWorker${OWN_EXTENSION}`, import.meta.url));
const TS_BOOT = fileURLToPath(new URL('../server/tsWorkerBoot.cjs', import.meta.url));

/** Attempts the client makes per batch (its first and its retries) and the back-off between them, bounded. */
const ATTEMPTS = 1 + DEFAULTS.embeddings.maxRetries;
const BACKOFF_ALLOWANCE_MS = 10_000;

export class SyncEmbedder {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));
  private dead: CogrError | null = null;

  constructor(readonly options: SyncEmbedderOptions) {
    const { port1, port2 } = new MessageChannel();
    const workerData = { cogrSyncEmbedder: { options, port: port2, flag: this.flag } };
    this.worker = ENTRY.endsWith('.ts')
      ? new Worker(TS_BOOT, {
          workerData: { ...workerData, cogrWorkerEntry: ENTRY },
          transferList: [port2],
          execArgv: ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href],
        })
      : new Worker(ENTRY, { workerData, transferList: [port2], execArgv: ['--enable-source-maps'] });
    this.worker.unref();
    this.worker.on('error', (e) => {
      this.dead ??= cogrError('EMBEDDINGS_ERROR', `the embeddings thread for ${options.baseURL} failed: ${e.message}`);
    });
    this.port = port1;
    this.port.unref();
  }

  /** The deadline of a call on `n` texts: every attempt's on each of its batches, with back-off between them. */
  deadlineMs(n: number): number {
    const batches = Math.max(1, Math.ceil(n / DEFAULTS.embeddings.batchSize));
    return batches * (ATTEMPTS * this.options.timeoutMs + BACKOFF_ALLOWANCE_MS);
  }

  /** The vectors of `texts`, in order (one request per client batch); EMBEDDINGS_ERROR past the deadline. */
  embed(texts: readonly string[]): Float32Array[] {
    if (texts.length === 0) return [];
    if (this.dead) throw this.dead;
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage({ texts: [...texts] } satisfies ToSyncEmbedder);
    const deadline = this.deadlineMs(texts.length);
    const waited = Atomics.wait(this.flag, 0, 0, deadline);
    const m = receiveMessageOnPort(this.port)?.message as FromSyncEmbedder | undefined;
    if (!m) {
      this.dead = cogrError(
        'EMBEDDINGS_ERROR',
        waited === 'timed-out'
          ? `embeddings endpoint ${this.options.baseURL}: no answer for ${texts.length} texts within ${deadline} ms`
          : `embeddings endpoint ${this.options.baseURL}: the embeddings thread answered nothing`,
        { endpoint: this.options.baseURL },
      );
      void this.worker.terminate();
      throw this.dead;
    }
    if (!m.ok)
      throw cogrError(m.code === 'EMBEDDINGS_FORMAT' ? 'EMBEDDINGS_FORMAT' : 'EMBEDDINGS_ERROR', m.message, {
        endpoint: this.options.baseURL,
      });
    if (m.data.length !== texts.length * m.dim)
      throw cogrError(
        'EMBEDDINGS_FORMAT',
        `embeddings endpoint ${this.options.baseURL}: ${m.data.length / m.dim} vectors for ${texts.length} texts`,
      );
    return texts.map((_, i) => m.data.subarray(i * m.dim, (i + 1) * m.dim));
  }

  close(): Promise<number> {
    this.port.close();
    return this.worker.terminate();
  }
}
