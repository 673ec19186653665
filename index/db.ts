/**
 * The one LevelDB database of a project (package `level`, classic-level on Node).
 *
 * Every component keeps its state in its own sublevel of this database: the keyword
 * index (`kwi`, see store.ts), the LLM generation cache, the co-evolution run state,
 * policies and metrics. `CogrDb.sublevel(name)` hands out a sublevel with utf8 keys and
 * JSON values; writing to several sublevels atomically is possible through
 * `db.level.batch([...{ sublevel }])`.
 *
 * The format version is stored under the root key `meta:format` (outside every
 * sublevel) when the database is created. Opening a database of another version, or a
 * non-empty LevelDB without the key, fails with CogrError('DB_VERSION'); a database
 * whose LOCK is held by another process (or another open instance) fails with
 * CogrError('DB_LOCKED'). Neither case reads or writes anything else.
 */
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { cogrError } from './errors.ts';
import { silentLogger, type Logger } from './log.ts';
import { PUBLISHED_DIR } from './published.ts';

/**
 * Version of the on-disk layout of every sublevel this project writes.
 *   1  the first layout;
 *   2  keyword analyzers: postings and df cells are keyed by analysed match keys and each
 *      generation's manifest names its analyzer. A version-1 database is refused (its
 *      cells are keyed by surface forms); rebuild it (see DB_UPGRADE_HINT).
 */
export const DB_FORMAT_VERSION = 2;
/** What to do with a database of an older version. */
export const DB_UPGRADE_HINT =
  'it was written by an older cogr; rebuild it: `cogr demo --fresh` or `cogr evolve --fresh` re-run a run from the dataset, `cogr index import` re-imports keyword files into a new --db';
/** Root key (outside every sublevel) holding `{ version, createdAt }`. */
export const DB_META_KEY = 'meta:format';

export type RootLevel = Level<string, string>;
/** A sublevel with utf8 keys and JSON values of type V. */
export type JsonSublevel<V = unknown> = AbstractSublevel<RootLevel, string | Buffer | Uint8Array, string, V>;

export interface OpenDbOptions {
  logger?: Logger;
  /** Create the database when the folder does not exist (default true). */
  createIfMissing?: boolean;
}

export interface CogrDb {
  /** Absolute path of the LevelDB folder. */
  readonly path: string;
  /** The open Level instance (utf8 keys and values by default). */
  readonly level: RootLevel;
  readonly logger: Logger;
  /** A sublevel with utf8 keys and JSON values; the same name gives the same instance. */
  sublevel<V = unknown>(name: string): JsonSublevel<V>;
  /**
   * Delete everything this database holds, under its lock (the caller has it open): the
   * published files first (readers stop seeing them), then every cell; the format record
   * is written again. What `--fresh` does.
   */
  clear(): Promise<void>;
  close(): Promise<void>;
}

interface FormatRecord {
  version: number;
  createdAt: string;
}

function hasCode(e: unknown, code: string): boolean {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 8; depth++) {
    if ((cur as { code?: unknown }).code === code) return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}

function causeMessage(e: unknown): string {
  let cur: unknown = e;
  let last = '';
  for (let depth = 0; cur && depth < 8; depth++) {
    const m = (cur as { message?: unknown }).message;
    if (typeof m === 'string') last = m;
    cur = (cur as { cause?: unknown }).cause;
  }
  return last;
}

class LevelCogrDb implements CogrDb {
  private readonly subs = new Map<string, JsonSublevel<unknown>>();
  constructor(
    readonly path: string,
    readonly level: RootLevel,
    readonly logger: Logger,
  ) {}

  sublevel<V = unknown>(name: string): JsonSublevel<V> {
    if (typeof name !== 'string' || name.length === 0 || name.includes('!')) {
      throw cogrError('INVALID_ARGUMENT', `sublevel name must be a non-empty string without "!" (got ${JSON.stringify(name)})`);
    }
    let s = this.subs.get(name);
    if (!s) {
      s = this.level.sublevel<string, unknown>(name, { keyEncoding: 'utf8', valueEncoding: 'json' });
      this.subs.set(name, s);
    }
    return s as JsonSublevel<V>;
  }

  async clear(): Promise<void> {
    await rm(join(this.path, PUBLISHED_DIR), { recursive: true, force: true });
    await this.level.clear();
    const rec: FormatRecord = { version: DB_FORMAT_VERSION, createdAt: new Date().toISOString() };
    await this.level.put(DB_META_KEY, JSON.stringify(rec));
    this.logger.info('cleared the database', { path: this.path });
  }

  async close(): Promise<void> {
    await this.level.close();
  }
}

/**
 * Open (or create) the project database at `path`.
 * Errors: DB_LOCKED (held by another process), DB_VERSION (another format version),
 * NOT_FOUND (missing and createIfMissing is false), DB_CORRUPT (unreadable meta).
 */
export async function openDb(path: string, opts: OpenDbOptions = {}): Promise<CogrDb> {
  if (typeof path !== 'string' || path.length === 0) throw cogrError('INVALID_ARGUMENT', 'db path must be a non-empty string');
  const abs = resolve(path);
  const logger = opts.logger ?? silentLogger;
  const createIfMissing = opts.createIfMissing ?? true;
  if (!createIfMissing && !existsSync(abs)) {
    throw cogrError('NOT_FOUND', `database ${abs} does not exist`, { path: abs });
  }
  const level: RootLevel = new Level<string, string>(abs, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  try {
    await level.open({ createIfMissing });
  } catch (e) {
    if (hasCode(e, 'LEVEL_LOCKED')) {
      throw cogrError(
        'DB_LOCKED',
        `database ${abs} is in use by another process (LevelDB lock held); stop that process or use another --db`,
        { path: abs },
        e,
      );
    }
    if (!createIfMissing && /does not exist/.test(causeMessage(e))) {
      throw cogrError('NOT_FOUND', `database ${abs} does not exist`, { path: abs }, e);
    }
    throw cogrError('DB_CORRUPT', `database ${abs} cannot be opened: ${causeMessage(e)}`, { path: abs }, e);
  }
  try {
    await checkFormat(level, abs, logger);
  } catch (e) {
    await level.close().catch(() => {});
    throw e;
  }
  return new LevelCogrDb(abs, level, logger);
}

async function checkFormat(level: RootLevel, abs: string, logger: Logger): Promise<void> {
  const raw = await level.get(DB_META_KEY);
  if (raw === undefined) {
    // A fresh database has no key at all; anything else is not ours (or pre-versioning).
    let empty = true;
    for await (const _k of level.keys({ limit: 1 })) {
      empty = false;
    }
    if (!empty) {
      throw cogrError(
        'DB_VERSION',
        `database ${abs} has no cogr format version (found none, expected ${DB_FORMAT_VERSION}); refusing to read it`,
        { path: abs, found: null, expected: DB_FORMAT_VERSION },
      );
    }
    const rec: FormatRecord = { version: DB_FORMAT_VERSION, createdAt: new Date().toISOString() };
    await level.put(DB_META_KEY, JSON.stringify(rec));
    logger.debug('created database', { path: abs, version: DB_FORMAT_VERSION });
    return;
  }
  let rec: FormatRecord;
  try {
    rec = JSON.parse(raw) as FormatRecord;
  } catch (e) {
    throw cogrError('DB_CORRUPT', `database ${abs} has an unreadable format record ${JSON.stringify(raw)}`, { path: abs }, e);
  }
  if (rec.version !== DB_FORMAT_VERSION) {
    const older = typeof rec.version === 'number' && rec.version < DB_FORMAT_VERSION;
    throw cogrError(
      'DB_VERSION',
      `database ${abs} has format version ${JSON.stringify(rec.version)}, expected ${DB_FORMAT_VERSION}; refusing to read it${older ? `: ${DB_UPGRADE_HINT}` : ' (it was written by a newer cogr)'}`,
      { path: abs, found: rec.version, expected: DB_FORMAT_VERSION },
    );
  }
}

/** Run `fn` with a database opened at `path`, closing it afterwards. */
export async function withDb<T>(path: string, fn: (db: CogrDb) => Promise<T>, opts: OpenDbOptions = {}): Promise<T> {
  const db = await openDb(path, opts);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

