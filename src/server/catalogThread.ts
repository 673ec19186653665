/**
 * The serving thread's side of the catalog writer thread (catalogWorker.ts): start it (it
 * opens the database and takes its lock; DB_LOCKED names the path when another process
 * holds it), send it batches, get back what each committed, or its refusal as the error
 * it was (code, message naming the line or field). A thread that dies fails its batches in
 * flight (WORKER_ERROR) and every later one: the server keeps searching, writes need a restart.
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CogrError, cogrError, ERROR_CATALOGUE, type ErrorCode } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { LlmOptions } from '../../generators/llm.ts';
import type { ItemGeneratorKind } from '../catalog/itemKeywords.ts';
import type { LocatedOp, OpSource } from '../catalog/ops.ts';
import type { RoundSelector } from '../catalog/served.ts';
import type { CatalogCommit } from '../catalog/writer.ts';

export interface CatalogThreadConfig {
  dbPath: string;
  round: RoundSelector;
  /** The dataset (name or folder); absent: the stored run's. */
  dataset?: string;
  itemGenerator: ItemGeneratorKind;
  /** The LLM endpoint, for an `openai` item generator. */
  llm: LlmOptions;
  keep?: number;
}

export type ToCatalogWorker = { t: 'apply'; id: number; ops: readonly LocatedOp[]; source: OpSource } | { t: 'close' };
type WireError = { code: string; message: string; details?: Record<string, unknown> };
export type FromCatalogWorker =
  | { t: 'ready'; served: number }
  | { t: 'done'; id: number; commit: CatalogCommit }
  | { t: 'failed'; id: number; error: WireError }
  | { t: 'fatal'; error: WireError }
  | { t: 'log'; level: 'info' | 'warn' | 'debug'; msg: string; fields?: Record<string, unknown> }
  | { t: 'closed' };

const OWN_EXTENSION = import.meta.url.endsWith('.ts') ? '.ts' : '.js';
const ENTRY = fileURLToPath(new URL(`./catalogWorker${OWN_EXTENSION}`, import.meta.url));
const TS_BOOT = fileURLToPath(new URL('./tsWorkerBoot.cjs', import.meta.url));

function rehydrate(e: WireError): CogrError {
  const code = (e.code in ERROR_CATALOGUE ? e.code : 'INTERNAL') as ErrorCode;
  return cogrError(code, e.message, e.details);
}

export class CatalogThread {
  private readonly pending = new Map<number, { resolve: (c: CatalogCommit) => void; reject: (e: unknown) => void }>();
  private nextId = 1;
  private dead: CogrError | null = null;
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly worker: Worker,
    readonly served: number,
  ) {}

  /** Start the writer thread; resolves once it holds the database and is ready, rejects with its refusal. */
  static start(config: CatalogThreadConfig, log: Logger = silentLogger): Promise<CatalogThread> {
    const worker = ENTRY.endsWith('.ts')
      ? new Worker(TS_BOOT, {
          workerData: { cogrWorkerEntry: ENTRY, cogrCatalog: config },
          execArgv: ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href],
        })
      : new Worker(ENTRY, { workerData: { cogrCatalog: config }, execArgv: ['--enable-source-maps'] });
    return new Promise<CatalogThread>((resolve, reject) => {
      let thread: CatalogThread | null = null;
      const fail = (e: CogrError) => {
        if (!thread) {
          reject(e);
          void worker.terminate();
          return;
        }
        thread.dead ??= e;
        for (const p of thread.pending.values()) p.reject(e);
        thread.pending.clear();
      };
      worker.on('message', (m: FromCatalogWorker) => {
        if (m.t === 'log') log[m.level](m.msg, m.fields);
        else if (m.t === 'ready') resolve((thread = new CatalogThread(worker, m.served)));
        else if (m.t === 'fatal') fail(rehydrate(m.error));
        else if (m.t === 'done' || m.t === 'failed') {
          const p = thread?.pending.get(m.id);
          if (!p) return;
          thread!.pending.delete(m.id);
          if (m.t === 'done') p.resolve(m.commit);
          else p.reject(rehydrate(m.error));
        }
      });
      worker.on('error', (e) =>
        fail(cogrError('WORKER_ERROR', `the catalog writer thread failed: ${e.message}; catalog writes need a restart`)),
      );
      worker.on('exit', (code) => {
        if (thread?.closing) return;
        fail(cogrError('WORKER_ERROR', `the catalog writer thread exited with code ${code}; catalog writes need a restart`));
      });
    });
  }

  /** Apply one batch (after those sent before it). */
  apply(ops: readonly LocatedOp[], source: OpSource): Promise<CatalogCommit> {
    if (this.dead) return Promise.reject(this.dead);
    if (this.closing) return Promise.reject(cogrError('ABORTED', 'the server is stopping: the catalog write was not applied'));
    const id = this.nextId++;
    return new Promise<CatalogCommit>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ t: 'apply', id, ops, source } satisfies ToCatalogWorker);
    });
  }

  /** Finish the batches in flight, close the database (releasing its lock) and stop the thread. */
  close(graceMs = 30_000): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      const timer = setTimeout(() => void this.worker.terminate().then(() => resolve()), graceMs);
      timer.unref();
      this.worker.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.worker.on('message', (m: FromCatalogWorker) => {
        if (m.t === 'closed') void this.worker.terminate();
      });
      this.worker.postMessage({ t: 'close' } satisfies ToCatalogWorker);
    });
    return this.closing;
  }
}
