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
 *
 * Before LevelDB sees a folder, `checkDbFiles` looks at it: a folder holding table
 * (`.ldb`/`.sst`), log or MANIFEST files must have its CURRENT and the MANIFEST that
 * CURRENT names, else it is DB_CORRUPT (with the next step) and nothing is opened; LevelDB
 * is asked to create a database only in a folder that holds none of its files, so it never
 * makes a new database over existing ones. A folder that cannot be written is READ_ONLY
 * and a full disk DISK_FULL (index/core/errors.ts), never DB_CORRUPT.
 */
import { accessSync, constants as fsConstants, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { cogrError, levelError, systemError } from '../core/errors.ts';
import { silentLogger, type Logger } from '../core/log.ts';
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
  /**
   * Clear the database right after taking its lock, before reading anything (what
   * `--fresh` does): a database of another format version, or one whose cells cannot be
   * read, is cleared too (CogrDb.clear).
   */
  fresh?: boolean;
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
    private current: RootLevel,
    readonly logger: Logger,
  ) {}

  get level(): RootLevel {
    return this.current;
  }

  sublevel<V = unknown>(name: string): JsonSublevel<V> {
    if (typeof name !== 'string' || name.length === 0 || name.includes('!')) {
      throw cogrError('INVALID_ARGUMENT', `sublevel name must be a non-empty string without "!" (got ${JSON.stringify(name)})`);
    }
    let s = this.subs.get(name);
    if (!s) {
      s = this.current.sublevel<string, unknown>(name, { keyEncoding: 'utf8', valueEncoding: 'json' });
      this.subs.set(name, s);
    }
    return s as JsonSublevel<V>;
  }

  async clear(): Promise<void> {
    await rm(join(this.path, PUBLISHED_DIR), { recursive: true, force: true });
    try {
      await this.current.clear();
    } catch (e) {
      const named = levelError(e, this.path);
      if (!named || named.code !== 'DB_CORRUPT') throw named ?? e;
      // A database that cannot be read is cleared by its files: deleted while this process
      // holds the open database (and its lock), then a new one is made in the folder.
      this.logger.warn('the database cannot be read: deleting its files to start over', { path: this.path, error: causeMessage(e) });
      for (const name of await readdir(this.path)) {
        if (name !== 'LOCK') await rm(join(this.path, name), { recursive: true, force: true });
      }
      await this.current.close().catch(() => {});
      this.subs.clear();
      this.current = await openLevel(this.path, false);
    }
    const rec: FormatRecord = { version: DB_FORMAT_VERSION, createdAt: new Date().toISOString() };
    await this.current.put(DB_META_KEY, JSON.stringify(rec));
    this.logger.info('cleared the database', { path: this.path });
  }

  async close(): Promise<void> {
    await this.current.close();
  }
}

/** LevelDB's own files: tables, logs and manifests (LOCK, LOG and LOG.old are not data). */
const TABLE_OR_LOG = /^\d+\.(ldb|sst|log)$/;
const MANIFEST = /^MANIFEST-\d+$/;

/** What a database folder holds, as LevelDB would see it. */
export interface DbFiles {
  /** The folder does not exist. */
  missing: boolean;
  /** Table (.ldb/.sst) and log files. */
  tablesAndLogs: string[];
  manifests: string[];
  /** The MANIFEST named by CURRENT (null without CURRENT). */
  current: string | null;
}

export function dbFiles(abs: string): DbFiles {
  let names: string[];
  try {
    names = readdirSync(abs);
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') return { missing: true, tablesAndLogs: [], manifests: [], current: null };
    if ((e as { code?: string }).code === 'ENOTDIR') throw cogrError('IO_ERROR', `database ${abs}: not a folder`, { path: abs });
    throw systemError(e, abs, `database ${abs}`) ?? e;
  }
  let current: string | null = null;
  if (names.includes('CURRENT')) {
    try {
      current = readFileSync(join(abs, 'CURRENT'), 'utf8').trim();
    } catch (e) {
      throw systemError(e, join(abs, 'CURRENT'), `database ${abs}`) ?? e;
    }
  }
  return {
    missing: false,
    tablesAndLogs: names.filter((n) => TABLE_OR_LOG.test(n)).sort(),
    manifests: names.filter((n) => MANIFEST.test(n)).sort(),
    current,
  };
}

/**
 * Whether LevelDB's own files of a folder are sound enough to open it: a folder with
 * table, log or MANIFEST files has a CURRENT that names a MANIFEST that exists. Returns
 * whether the folder holds a database at all (false: missing or without LevelDB files);
 * throws DB_CORRUPT naming what is missing and the next step otherwise.
 */
export function checkDbFiles(abs: string): boolean {
  const f = dbFiles(abs);
  if (f.missing) return false;
  const has = f.tablesAndLogs.length + f.manifests.length > 0;
  if (f.current === null) {
    if (!has) return false;
    const restore =
      f.manifests.length >= 1
        ? `if only CURRENT was lost, \`printf '${f.manifests[f.manifests.length - 1]}\\n' > ${join(abs, 'CURRENT')}\` restores it (then \`cogr verify\`); `
        : '';
    throw cogrError(
      'DB_CORRUPT',
      `database ${abs} holds LevelDB files (${[...f.manifests, ...f.tablesAndLogs].slice(0, 6).join(', ')}${f.tablesAndLogs.length + f.manifests.length > 6 ? ', ...' : ''}) but no CURRENT file: it cannot be opened, and nothing was written to it; ${restore}to start over, remove the folder ${abs}`,
      { path: abs, missing: 'CURRENT' },
    );
  }
  if (!MANIFEST.test(f.current) || !f.manifests.includes(f.current)) {
    throw cogrError(
      'DB_CORRUPT',
      `database ${abs}: CURRENT names ${JSON.stringify(f.current)}, which ${MANIFEST.test(f.current) ? 'does not exist' : 'is not a MANIFEST file'} (manifests: ${f.manifests.join(', ') || 'none'}): it cannot be opened, and nothing was written to it; to start over, remove the folder ${abs}`,
      { path: abs, missing: f.current },
    );
  }
  return true;
}

/** A folder a writer is about to use: made when missing, and writable (else READ_ONLY / DISK_FULL naming it). */
function checkWritable(abs: string): void {
  try {
    mkdirSync(abs, { recursive: true });
    accessSync(abs, fsConstants.W_OK);
  } catch (e) {
    throw systemError(e, abs, `database ${abs}`) ?? e;
  }
}

/**
 * Open (or create) the project database at `path`.
 * Errors: DB_LOCKED (held by another process), DB_VERSION (another format version),
 * NOT_FOUND (missing and createIfMissing is false), DB_CORRUPT (LevelDB's own files
 * incomplete, or unreadable), READ_ONLY / DISK_FULL / IO_ERROR (the folder).
 */
export async function openDb(path: string, opts: OpenDbOptions = {}): Promise<CogrDb> {
  if (typeof path !== 'string' || path.length === 0) throw cogrError('INVALID_ARGUMENT', 'db path must be a non-empty string');
  const abs = resolve(path);
  const logger = opts.logger ?? silentLogger;
  const createIfMissing = opts.createIfMissing ?? true;
  const exists = checkDbFiles(abs);
  if (!exists && !createIfMissing) {
    throw cogrError('NOT_FOUND', `database ${abs} does not exist`, { path: abs });
  }
  // LevelDB writes its LOCK (and, for a new database, every file) in the folder.
  checkWritable(abs);
  const level = await openLevel(abs, exists);
  if (opts.fresh) {
    const db = new LevelCogrDb(abs, level, logger);
    try {
      await db.clear();
    } catch (e) {
      await db.close().catch(() => {});
      throw levelError(e, abs) ?? systemError(e, abs, `clearing database ${abs}`) ?? e;
    }
    return db;
  }
  try {
    await checkFormat(level, abs, logger);
  } catch (e) {
    await level.close().catch(() => {});
    throw levelError(e, abs) ?? e;
  }
  return new LevelCogrDb(abs, level, logger);
}

/** Open LevelDB at a checked folder: creating a database only when it holds none (`exists` false). */
async function openLevel(abs: string, exists: boolean): Promise<RootLevel> {
  const level: RootLevel = new Level<string, string>(abs, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  try {
    await level.open({ createIfMissing: !exists, errorIfExists: !exists });
  } catch (e) {
    if (hasCode(e, 'LEVEL_LOCKED')) {
      throw cogrError(
        'DB_LOCKED',
        `database ${abs} is in use by another process (LevelDB lock held); stop that process or use another --db`,
        { path: abs },
        e,
      );
    }
    const msg = causeMessage(e);
    if (/No space left on device|Disk quota exceeded/i.test(msg))
      throw cogrError(
        'DISK_FULL',
        `database ${abs}: no space left on the device (${msg}); free some space and run the command again`,
        { path: abs },
        e,
      );
    if (/Read-only file system|Permission denied|Operation not permitted/i.test(msg)) {
      throw cogrError(
        'READ_ONLY',
        `database ${abs} cannot be written (${msg}); LevelDB writes its LOCK even to read: give a writable COGR_HOME or --db, or fix the folder's permissions`,
        { path: abs },
        e,
      );
    }
    throw cogrError(
      'DB_CORRUPT',
      `database ${abs} cannot be opened: ${msg}; nothing was written to it; \`cogr verify\` says what the published files still hold; to start over, remove the folder ${abs} (--fresh cannot clear it: LevelDB must open a database to lock it)`,
      { path: abs },
      e,
    );
  }
  return level;
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
