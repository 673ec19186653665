/**
 * The writes of one commit (`StagedBatch`): one atomic LevelDB batch up to its limit, a
 * staged commit beyond it (see store.ts's file comment).
 */
import type { CogrDb } from './db.ts';

/** Default operations per LevelDB batch; a bigger commit is staged (StagedBatch). */
export const MAX_BATCH_OPS = 250_000;

export type LevelBatch = ReturnType<CogrDb['level']['batch']>;

/**
 * The writes of one commit. Up to `limit` operations it is one LevelDB batch, written
 * atomically by `finish()`. Beyond that the commit is staged (see the file comment):
 * `reserve()` runs once before the first batch, full batches are written as they fill
 * (one in flight while the next is built) and the last one carries the manifest.
 */
export class StagedBatch {
  private batch: LevelBatch;
  private inFlight: Promise<void> | null = null;
  staged = false;
  /** Operations written or pending so far. */
  length = 0;

  constructor(
    private readonly level: CogrDb['level'],
    private readonly prefix: string,
    private readonly limit: number,
    private readonly reserve: () => Promise<void>,
    private readonly progress: (operations: number) => void,
  ) {
    this.batch = level.batch();
  }

  // Keys are prefixed and values JSON-encoded here rather than through the batch's
  // `sublevel` option, which costs several µs per operation on big commits.
  put(key: string, value: unknown): void {
    this.putEncoded(key, JSON.stringify(value));
  }

  /** Put with a value already JSON-encoded. */
  putEncoded(key: string, json: string): void {
    this.batch.put(this.prefix + key, json);
    this.length++;
  }

  del(key: string): void {
    this.batch.del(this.prefix + key);
    this.length++;
  }

  get full(): boolean {
    return this.batch.length >= this.limit;
  }

  /** Write the pending operations as one batch (staging the commit on first use). */
  async flush(): Promise<void> {
    if (!this.staged) {
      this.staged = true;
      await this.reserve();
    }
    if (this.inFlight) await this.inFlight;
    const b = this.batch;
    this.batch = this.level.batch();
    const written = this.length;
    this.inFlight = b.write().then(() => this.progress(written));
  }

  /** Give up: wait for a write in flight (its error is not ours to report) and drop the rest. */
  async abort(): Promise<void> {
    if (this.inFlight) await this.inFlight.catch(() => undefined);
    this.inFlight = null;
    await this.batch.close();
  }

  /** Write the rest; the manifest is in it, so the generation appears with it. */
  async finish(): Promise<void> {
    if (this.inFlight) await this.inFlight;
    this.inFlight = null;
    await this.batch.write();
  }
}
