/**
 * The keyword inverted index on LevelDB: numbered, immutable generations per side,
 * a writer that commits one atomic batch per generation, and frozen read views.
 *
 * Storage: the `kwi` sublevel of the project database (db.ts), utf8 keys, JSON values.
 * Every key is a list of components joined by "\0"; strings inside components are
 * escaped ("\x01" → "\x01\x02", "\0" → "\x01\x01") so that no component contains the
 * separator. `<g>` is the generation number as 8 lower-case hex digits.
 *
 *   m \0 <side> \0 <g>                  manifest of generation g (GenerationManifest)
 *   n \0 <side>                         next generation number (numbers are never reused)
 *   r \0 <side> \0 <id> \0 <g>          entity record {s: self, k: keywords, l: doc length}
 *                                       (surface forms, one per match key) or a
 *                                       tombstone {x: 1} (removed in g)
 *   p \0 <side> \0 <key> \0 <id> \0 <g>   posting cell: 1 (id posted under the keyword's
 *                                       match key from g on) or 0 (no longer posted from
 *                                       g on); self keywords are posted like any keyword
 *   w \0 <side> \0 <word> \0 <g>        BM25 document frequency of an analysed word from g on
 *   s \0 <side>                         generation number of a staged commit in progress
 *
 * Analyzer: every generation's manifest records how its match keys are made (`none` |
 * `english`, analyzer.ts). A lineage keeps one analyzer (its cells are keyed by it): a
 * build from empty takes the writer's `analyzer` option (default `english`), a build on
 * a base inherits the base's and refuses another.
 *
 * Records, posting cells and df cells are copy-on-write "versioned cells": generation g
 * only writes the cells that change relative to its base, and the value of a cell in g
 * is the cell with the highest generation number in g's lineage (g, its chain parent,
 * that one's chain parent, ...). The manifest holds the integer statistics of the whole
 * generation (number of entities, total document length in words), the logical parent
 * (the base it was built from), the chain parent used for reading and the caller's
 * metadata. A commit of up to `maxBatchOps` operations writes the manifest, the counter
 * and all cells in one LevelDB batch. A bigger one (millions of entities) is staged: it
 * first reserves its number (counter and `s` marker in one batch), then writes its cells
 * in batches as they fill, and the manifest last (deleting the marker). Readers only
 * follow generations that have a manifest, so either way a generation is entirely
 * visible or absent, also after a crash; the cells a killed staged commit leaves behind
 * belong to a number no manifest will name, and the next writer deletes them (the
 * marker says which) before its first write. Deleting a generation g folds each of its cells into every child generation
 * (chain parent = g) that has no cell of its own under that key, re-points the
 * children's chain parent to g's, and deletes g's cells and manifest: again one batch,
 * so later generations read exactly as before.
 *
 * Reads (views, entries, postings, df, diff) run on an explicit LevelDB snapshot; writes
 * (commit, delete) are serialised per store instance. A database is held by one process
 * at a time (LevelDB's lock, see db.ts). Readers in other processes use the generation
 * files each commit publishes (published.ts: written after the batch; a delete removes
 * them before its batch), never the LevelDB.
 */
import type { AbstractSnapshot } from 'abstract-level';
import { z } from 'zod';
import type { CogrDb, JsonSublevel } from './db.ts';
import { cogrError, schemaError } from '../core/errors.ts';
import { silentLogger, type Logger } from '../core/log.ts';
import { makeKeywordNormalizer } from '../text/normalize.ts';
import { ANALYZERS, DEFAULT_ANALYZER, getAnalyzer, type AnalyzerName } from '../text/analyzer.ts';
import { SIDES, type IndexEntry, type Side } from '../core/types.ts';
import { KeywordView } from '../view/view.ts';
import { buildViewData, type ViewData } from '../view/viewBuild.ts';
import { DB_FORMAT_VERSION } from './db.ts';
import {
  diffEntries,
  fileStem,
  PublishedIndex,
  publicInfo,
  publishedNumbers,
  publishGeneration,
  unpublishGeneration,
  type GenerationDiff,
  type GenerationInfo,
} from './published.ts';

export type { GenerationDiff, GenerationInfo } from './published.ts';
import {
  analysed,
  checkGeneration,
  checkSide,
  esc,
  genHex,
  isLive,
  KWI_SUBLEVEL,
  LONE_SURROGATE,
  postedKeys,
  sameRecord,
  SEP,
  unesc,
  type GenerationManifest,
  type LiveRecord,
  type StoredRecord,
} from './layout.ts';
import { MAX_BATCH_OPS, StagedBatch } from './staged.ts';
import { WordCounter } from './dfCounter.ts';
import { failpoint } from '../core/failpoint.ts';

export interface WriterOptions {
  /** Generation to build from: a number, null for empty, or omitted for the latest (empty when none). */
  base?: number | null;
  /**
   * 'patch' (default): entities not mentioned keep their base record.
   * 'replace': the new generation holds exactly the entities set in this writer.
   */
  mode?: 'patch' | 'replace';
  /**
   * Analyzer of a build from empty (default `english`); a build on a base inherits the
   * base's, and naming another one is refused.
   */
  analyzer?: AnalyzerName;
}

export interface CommitResult {
  generation: number;
  /** Entities whose stored record changed (set to new content or removed). */
  changed: number;
  /** Keywords dropped by normalisation (empty or over the limits) across all set() calls. */
  rejectedKeywords: number;
}

const writerOptionsSchema = z
  .object({
    base: z.number().int().nonnegative().nullable().optional(),
    mode: z.enum(['patch', 'replace']).optional(),
    analyzer: z.enum(ANALYZERS).optional(),
  })
  .strict();
const viewOptionsSchema = z.object({ shared: z.boolean().optional() }).strict();

const PER_KEY_LOOKUP_LIMIT = 256;
/** Entities one writer holds before commit (a JavaScript Map holds at most 2^24 entries). */
export const MAX_WRITER_ENTITIES = 2 ** 24 - 1;

/** Set, replace or remove entities; `commit()` writes one new generation atomically. */
export class IndexWriter {
  private readonly changes = new Map<string, LiveRecord | null>();
  private readonly norm = makeKeywordNormalizer({ memo: 1_000_000 });
  private rejected = 0;
  private committed = false;

  constructor(
    private readonly store: KeywordIndexStore,
    readonly side: Side,
    readonly options: Readonly<WriterOptions>,
  ) {}

  /** Number of entities set or removed so far. */
  get pending(): number {
    return this.changes.size;
  }

  /**
   * Set or replace an entity's keyword set. `self` is its own string (item title or raw
   * query text); keywords are normalised and de-duplicated, over-limit ones dropped.
   */
  set(id: string, self: string, keywords: readonly string[]): this {
    this.checkOpen();
    checkId(id);
    if (typeof self !== 'string') throw cogrError('INVALID_ARGUMENT', `self of ${JSON.stringify(id)} must be a string`);
    if (!Array.isArray(keywords) || keywords.some((k) => typeof k !== 'string')) {
      throw cogrError('INVALID_ARGUMENT', `keywords of ${JSON.stringify(id)} must be an array of strings`);
    }
    // Keyword strings repeat across entities: the writer's normaliser remembers them.
    // Surface forms are de-duplicated here; by match key (and the document length) at
    // commit, once the generation's analyzer is known.
    const { keywords: k, rejected } = this.norm.set(keywords);
    this.rejected += rejected;
    const s = this.norm.self(self);
    if (this.changes.size >= MAX_WRITER_ENTITIES && !this.changes.has(id)) {
      throw cogrError(
        'INVALID_ARGUMENT',
        `a writer holds at most ${MAX_WRITER_ENTITIES} entities (a JavaScript Map's limit); commit them in several generations (patch mode)`,
      );
    }
    this.changes.set(id, { s, k, l: 0 });
    return this;
  }

  /** Remove an entity (a no-op at commit when the base does not hold it). */
  remove(id: string): this {
    this.checkOpen();
    checkId(id);
    if (this.changes.size >= MAX_WRITER_ENTITIES && !this.changes.has(id)) {
      throw cogrError(
        'INVALID_ARGUMENT',
        `a writer holds at most ${MAX_WRITER_ENTITIES} entities (a JavaScript Map's limit); commit them in several generations (patch mode)`,
      );
    }
    this.changes.set(id, null);
    return this;
  }

  /** Commit a new generation (last + 1) in one atomic batch; returns its number. */
  async commit(meta: Record<string, unknown> = {}): Promise<number> {
    return (await this.commitWithStats(meta)).generation;
  }

  async commitWithStats(meta: Record<string, unknown> = {}): Promise<CommitResult> {
    this.checkOpen();
    if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) {
      throw cogrError('INVALID_ARGUMENT', 'commit meta must be a plain object');
    }
    this.committed = true;
    // The changes are let go once they are in the database (before the generation's
    // view and files are built: at millions of entities that memory counts).
    const res = await this.store._commit(this.side, this.options, this.changes, meta, () => this.changes.clear());
    return { ...res, rejectedKeywords: this.rejected };
  }

  private checkOpen(): void {
    if (this.committed) throw cogrError('INVALID_ARGUMENT', 'this writer has already committed; take a new writer');
  }
}

/** A generation's entries with a patch applied (removed ones dropped, changed ones replaced, new ones added). */
function patchEntries(entries: readonly IndexEntry[], patched: ReadonlyMap<string, LiveRecord | null>): IndexEntry[] {
  const out: IndexEntry[] = [];
  for (const e of entries) {
    if (!patched.has(e.id)) out.push(e);
  }
  for (const [id, rec] of patched) if (rec) out.push({ id, self: rec.s, keywords: rec.k });
  return out;
}

function checkId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0)
    throw cogrError('INVALID_ARGUMENT', `entity id must be a non-empty string (got ${JSON.stringify(id)})`);
  if (LONE_SURROGATE.test(id)) throw cogrError('INVALID_ARGUMENT', `entity id ${JSON.stringify(id)} is not well-formed Unicode`);
}

type Snap = AbstractSnapshot;

/** Generation-aware keyword index over a CogrDb (both sides). */
export class KeywordIndexStore {
  readonly db: CogrDb;
  private readonly sub: JsonSublevel<unknown>;
  private readonly logger: Logger;
  private queue: Promise<unknown> = Promise.resolve();
  /** The view data each side published last: opening that generation again needs no scan. */
  private readonly lastPublished = new Map<Side, ViewData>();
  private reconciled = false;

  /** Operations per LevelDB batch before a commit is staged (see StagedBatch). */
  readonly maxBatchOps: number;

  /** The entries each side published last (with `keepEntries`): a patch on that generation derives its entries from them. */
  private readonly lastEntries = new Map<Side, { generation: number; entries: IndexEntry[] }>();
  private readonly keepEntries: boolean;

  constructor(db: CogrDb, opts: { logger?: Logger; maxBatchOps?: number; keepEntries?: boolean } = {}) {
    this.db = db;
    this.keepEntries = opts.keepEntries ?? false;
    this.sub = db.sublevel<unknown>(KWI_SUBLEVEL);
    this.logger = opts.logger ?? db.logger ?? silentLogger;
    const m = opts.maxBatchOps ?? MAX_BATCH_OPS;
    if (!Number.isInteger(m) || m < 1)
      throw cogrError('INVALID_ARGUMENT', `maxBatchOps must be a positive integer (got ${JSON.stringify(m)})`);
    this.maxBatchOps = m;
  }

  /** Every committed generation of a side, oldest first. */
  async listGenerations(side: Side): Promise<GenerationInfo[]> {
    checkSide(side);
    return this.withSnapshot(async (snap) => (await this.manifests(side, snap)).map(publicInfo));
  }

  /** One generation's info; NOT_FOUND when it does not exist. */
  async generationInfo(side: Side, generation: number | 'latest'): Promise<GenerationInfo> {
    checkSide(side);
    return this.withSnapshot(async (snap) => publicInfo(await this.resolve(side, generation, snap)));
  }

  /** The highest committed generation number, or null when the side has none. */
  async latest(side: Side): Promise<number | null> {
    const list = await this.listGenerations(side);
    return list.length === 0 ? null : list[list.length - 1].generation;
  }

  writer(side: Side, opts: WriterOptions = {}): IndexWriter {
    checkSide(side);
    const parsed = writerOptionsSchema.safeParse(opts);
    if (!parsed.success) throw schemaError('INVALID_ARGUMENT', parsed.error, { what: 'writer options' });
    return new IndexWriter(this, side, { ...parsed.data });
  }

  /** The entries of a generation, sorted by id (keywords in their stored order). */
  async entries(side: Side, generation: number | 'latest'): Promise<IndexEntry[]> {
    checkSide(side);
    return this.withSnapshot(async (snap) => {
      const man = await this.resolve(side, generation, snap);
      return this.entriesAt(side, man, snap);
    });
  }

  /** A frozen view of one generation (arrays on SharedArrayBuffer with `shared: true`). */
  async openView(side: Side, generation: number | 'latest', opts: { shared?: boolean } = {}): Promise<KeywordView> {
    checkSide(side);
    const parsed = viewOptionsSchema.safeParse(opts);
    if (!parsed.success) throw schemaError('INVALID_ARGUMENT', parsed.error, { what: 'view options' });
    const published = this.lastPublished.get(side);
    if (published && published.generation === generation) return new KeywordView(published);
    return this.withSnapshot(async (snap) => {
      const man = await this.resolve(side, generation, snap);
      const entries = await this.entriesAt(side, man, snap);
      if (entries.length !== man.size) {
        throw cogrError('DB_CORRUPT', `${side} generation ${man.generation} has ${entries.length} entities, its manifest says ${man.size}`);
      }
      const view = new KeywordView(
        buildViewData(side, man.generation, entries, { shared: parsed.data.shared ?? false, analyzer: man.analyzer }),
      );
      this.logger.debug('opened keyword view', { side, generation: man.generation, size: view.size });
      return view;
    });
  }

  /** Stored postings of a normalised keyword (analysed with the generation's analyzer) in a generation: sorted entity ids. */
  async postings(side: Side, generation: number | 'latest', keyword: string): Promise<string[]> {
    checkSide(side);
    return this.withSnapshot(async (snap) => {
      const man = await this.resolve(side, generation, snap);
      const lineage = await this.lineage(side, man, snap);
      const prefix = ['p', side, esc(getAnalyzer(man.analyzer).key(keyword))].join(SEP) + SEP;
      const out: string[] = [];
      await this.scanLatest(prefix, lineage, snap, (rest, v) => {
        if (v === 1) out.push(unesc(rest));
      });
      return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    });
  }

  /** Stored BM25 statistics of a generation: integer sums and the df of the given words (analysed with the generation's analyzer, keyed as given). */
  async statistics(
    side: Side,
    generation: number | 'latest',
    words: readonly string[] = [],
  ): Promise<{ numEntities: number; totalLength: number; df: Map<string, number> }> {
    checkSide(side);
    return this.withSnapshot(async (snap) => {
      const man = await this.resolve(side, generation, snap);
      const lineage = await this.lineage(side, man, snap);
      const df = new Map<string, number>();
      const an = getAnalyzer(man.analyzer);
      for (const w of words)
        df.set(w, ((await this.latestCell(['w', side, esc(an.word(w))].join(SEP), lineage, snap)) as number | undefined) ?? 0);
      return { numEntities: man.size, totalLength: man.totalLength, df };
    });
  }

  /** What changed from generation a to generation b of a side. */
  async diff(side: Side, a: number, b: number): Promise<GenerationDiff> {
    checkSide(side);
    checkGeneration(a, 'from');
    checkGeneration(b, 'to');
    return this.withSnapshot(async (snap) => {
      const ea = await this.entriesAt(side, await this.resolve(side, a, snap), snap);
      const eb = await this.entriesAt(side, await this.resolve(side, b, snap), snap);
      return diffEntries(side, a, b, ea, eb);
    });
  }

  /**
   * Delete one generation; every other generation reads exactly as before. Its files
   * are removed first (readers stop seeing it), then its cells.
   */
  async deleteGeneration(side: Side, generation: number): Promise<void> {
    checkSide(side);
    checkGeneration(generation);
    await this.exclusive(async () => {
      await this.reconcile();
      await this.withSnapshot((snap) => this.resolve(side, generation, snap));
      await unpublishGeneration(this.db.path, side, generation);
      if (this.lastPublished.get(side)?.generation === generation) this.lastPublished.delete(side);
      await this.withSnapshot((snap) => this.deleteLocked(side, generation, snap));
    });
  }

  /**
   * Write the files of a committed generation again from the database (`cogr verify
   * --repair`); the commit writes them in the first place.
   */
  async republish(side: Side, generation: number): Promise<void> {
    checkSide(side);
    checkGeneration(generation);
    await this.exclusive(() => this.publish(side, generation));
  }

  /**
   * Complete what a writer killed mid-commit left, as the first write of a store does
   * (`reconcile`): the cells of an interrupted staged commit dropped, every committed
   * generation without files published, the database checked against the files. For a
   * writer that may commit nothing (an idempotent re-run finding its generation already
   * committed) and must still leave it published, or that wants it done before its first
   * write (the catalog writer).
   */
  async recover(): Promise<void> {
    await this.exclusive(() => this.reconcile());
  }

  // ---- internals -------------------------------------------------------------------

  /** @internal Called by IndexWriter.commit: one LevelDB batch, then the generation's files. */
  async _commit(
    side: Side,
    opts: Readonly<WriterOptions>,
    changes: ReadonlyMap<string, LiveRecord | null>,
    meta: Record<string, unknown>,
    release: () => void = () => {},
  ): Promise<Omit<CommitResult, 'rejectedKeywords'>> {
    return this.exclusive(async () => {
      await this.reconcile();
      const { entries, patched, base, ...res } = await this.withSnapshot((snap) => this.commitLocked(side, opts, changes, meta, snap));
      release();
      failpoint('store.commit:before-publish');
      // A patch on the generation published last (a store that keeps its entries, the
      // catalog writer's): its entries are those with the patch applied, not read back.
      const last = this.lastEntries.get(side);
      const given = entries ?? (last && base !== null && last.generation === base ? patchEntries(last.entries, patched) : undefined);
      await this.publish(side, res.generation, given);
      return res;
    });
  }

  /**
   * Build a committed generation's view and write its files (published.ts). The entries
   * are read from its cells, or given by the commit that wrote them (a build from empty:
   * its records are the whole generation; no read-back of millions of records).
   */
  private async publish(side: Side, generation: number, given?: IndexEntry[]): Promise<void> {
    await this.withSnapshot(async (snap) => {
      const man = await this.resolve(side, generation, snap);
      const entries = given ? given.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)) : await this.entriesAt(side, man, snap);
      if (entries.length !== man.size) {
        throw cogrError('DB_CORRUPT', `${side} generation ${man.generation} has ${entries.length} entities, its manifest says ${man.size}`);
      }
      const data = buildViewData(side, generation, entries, { shared: true, analyzer: man.analyzer });
      await publishGeneration(this.db.path, publicInfo(man), data, entries, DB_FORMAT_VERSION);
      this.lastPublished.set(side, data);
      if (this.keepEntries) this.lastEntries.set(side, { generation, entries });
    });
  }

  /**
   * Before the first write of this store: every committed generation has its files (a
   * process killed between a commit and its files, or a database written before files
   * existed, gets them now), and no published generation is missing from the database
   * (that would mean the database lost committed data; a writer must not go on and
   * reuse its number).
   */
  private async reconcile(): Promise<void> {
    if (this.reconciled) return;
    for (const side of SIDES) await this.dropStaged(side);
    const published = await publishedNumbers(this.db.path);
    const missing: [Side, number][] = [];
    await this.withSnapshot(async (snap) => {
      for (const side of SIDES) {
        const stored = new Set((await this.manifests(side, snap)).map((m) => m.generation));
        const files = new Set(published[side]);
        for (const g of files) {
          if (!stored.has(g)) {
            throw cogrError(
              'DB_CORRUPT',
              `${side} generation ${g} is published (${fileStem(side, g)}.json in ${new PublishedIndex(this.db.path).dir}) but the database ${this.db.path} does not hold it: the database lost committed data (a damaged or deleted write-ahead log?); \`cogr verify\` says what is intact, \`cogr verify --repair\` makes the files agree with the database`,
              { side, generation: g },
            );
          }
        }
        for (const g of stored) if (!files.has(g)) missing.push([side, g]);
      }
    });
    for (const [side, g] of missing) {
      this.logger.info('publishing the files of a committed generation', { side, generation: g });
      await this.publish(side, g);
    }
    this.reconciled = true;
  }

  private async commitLocked(
    side: Side,
    opts: Readonly<WriterOptions>,
    changes: ReadonlyMap<string, LiveRecord | null>,
    meta: Record<string, unknown>,
    snap: Snap,
  ): Promise<
    Omit<CommitResult, 'rejectedKeywords'> & {
      entries: IndexEntry[] | null;
      /** The records the commit changed, as stored (analysed; null: removed). */
      patched: Map<string, LiveRecord | null>;
      base: number | null;
    }
  > {
    const mans = await this.manifests(side, snap);
    let base: GenerationManifest | null = null;
    if (opts.base === undefined) base = mans.length ? mans[mans.length - 1] : null;
    else if (opts.base !== null) {
      base = mans.find((m) => m.generation === opts.base) ?? null;
      if (!base) throw cogrError('NOT_FOUND', `base ${side} generation ${opts.base} does not exist`, { side, generation: opts.base });
    }
    const next = ((await this.sub.get(['n', side].join(SEP), { snapshot: snap })) as number | undefined) ?? 0;
    const lineage = base ? await this.lineage(side, base, snap) : new Set<string>();
    // Before anything is written: metadata that cannot be stored fails here.
    const metaCopy = JSON.parse(JSON.stringify(meta)) as Record<string, unknown>;
    const analyzerName: AnalyzerName = base ? base.analyzer : (opts.analyzer ?? DEFAULT_ANALYZER);
    if (base && opts.analyzer !== undefined && opts.analyzer !== base.analyzer) {
      throw cogrError(
        'INVALID_ARGUMENT',
        `${side} generation ${base.generation} uses the ${base.analyzer} analyzer; a generation built on it cannot use ${opts.analyzer} (build from empty with base: null instead)`,
      );
    }
    const an = getAnalyzer(analyzerName);

    // Old records of the affected entities (all of them in replace mode); a scan keeps
    // only those, so a big base is not held in memory whole for a patch.
    const old = new Map<string, LiveRecord>();
    const replace = opts.mode === 'replace';
    if (base && (replace || changes.size > PER_KEY_LOOKUP_LIMIT)) {
      for (const e of await this.recordsAt(side, lineage, snap, replace ? undefined : (id) => changes.has(id))) old.set(e[0], e[1]);
    } else if (base) {
      for (const id of changes.keys()) {
        const r = (await this.latestCell(['r', side, esc(id)].join(SEP), lineage, snap)) as StoredRecord | undefined;
        if (isLive(r)) old.set(id, r);
      }
    }
    // The changes (analysed), then (replace mode) the removal of every base entity not set again.
    function* effective(): Generator<[string, LiveRecord | null]> {
      for (const [id, rec] of changes) yield [id, rec === null ? null : analysed(rec, an)];
      if (replace) for (const id of old.keys()) if (!changes.has(id)) yield [id, null];
    }
    const total = changes.size + (replace ? old.size : 0);

    const g = genHex(next);
    const started = performance.now();
    let done = 0;
    const out = new StagedBatch(
      this.db.level,
      this.sub.prefix,
      this.maxBatchOps,
      async () => {
        // A staged commit reserves its number first, so cells left by a crash belong to
        // a number no manifest will ever name (never read, never reused); the marker
        // tells the next writer which cells to delete.
        await this.db.level
          .batch()
          .put(this.sub.prefix + ['n', side].join(SEP), JSON.stringify(next + 1))
          .put(this.sub.prefix + ['s', side].join(SEP), JSON.stringify(next))
          .write();
        this.logger.debug('writing keyword index batch (staged)', { side, generation: next });
      },
      (operations) => {
        const s = (performance.now() - started) / 1000;
        this.logger.info('staged commit', {
          side,
          generation: next,
          entities: `${done}/${total}`,
          operations,
          rate: `${Math.round(done / Math.max(s, 1e-3))}/s`,
        });
      },
    );
    let size = base ? base.size : 0;
    let totalLength = base ? base.totalLength : 0;
    let changed = 0;
    // A build from empty: its records are the generation's entries (for publish()).
    const fresh: IndexEntry[] | null = base === null ? [] : null;
    const patched = new Map<string, LiveRecord | null>();
    try {
      const dfWords = new WordCounter();
      const pKey = `p${SEP}${side}${SEP}`;
      const rKey = `r${SEP}${side}${SEP}`;
      for (const [id, rec] of effective()) {
        done++;
        if (out.full) await out.flush();
        const before = old.get(id);
        if (rec === null && !before) continue;
        if (rec !== null && before && sameRecord(before, rec)) continue;
        changed++;
        if (this.keepEntries) patched.set(id, rec);
        const eid = esc(id);
        out.put(`${rKey}${eid}${SEP}${g}`, rec === null ? { x: 1 } : rec);
        if (fresh && rec) fresh.push({ id, self: rec.s, keywords: rec.k });
        const pb = postedKeys(before, an);
        const pa = postedKeys(rec ?? undefined, an);
        for (const k of pa) if (!pb.has(k)) out.putEncoded(`${pKey}${esc(k)}${SEP}${eid}${SEP}${g}`, '1');
        for (const k of pb) if (!pa.has(k)) out.putEncoded(`${pKey}${esc(k)}${SEP}${eid}${SEP}${g}`, '0');
        dfWords.add(pa, 1);
        dfWords.add(pb, -1);
        if (before) {
          size--;
          totalLength -= before.l;
        }
        if (rec) {
          size++;
          totalLength += rec.l;
        }
      }
      const touched = dfWords.changes();
      let baseDf: Map<string, number>;
      if (!base || touched.length === 0) baseDf = new Map();
      else if (touched.length > PER_KEY_LOOKUP_LIMIT) baseDf = await this.dfAt(side, lineage, snap);
      else {
        baseDf = new Map();
        for (const [w] of touched) {
          const v = (await this.latestCell(['w', side, esc(w)].join(SEP), lineage, snap)) as number | undefined;
          if (v !== undefined) baseDf.set(w, v);
        }
      }
      for (const [w, d] of touched) {
        if (out.full) await out.flush();
        const v = (baseDf.get(w) ?? 0) + d;
        if (v < 0) throw cogrError('DB_CORRUPT', `${side} index: document frequency of ${JSON.stringify(w)} would become ${v}`);
        out.put(['w', side, esc(w), g].join(SEP), v);
      }
      const manifest: GenerationManifest = {
        side,
        generation: next,
        parent: base ? base.generation : null,
        chainParent: base ? base.generation : null,
        createdAt: new Date().toISOString(),
        size,
        totalLength,
        changed,
        meta: metaCopy,
        analyzer: analyzerName,
      };
      out.put(['m', side, g].join(SEP), manifest);
      out.put(['n', side].join(SEP), next + 1);
      if (out.staged) out.del(['s', side].join(SEP));
      this.logger.debug('writing keyword index batch', { side, generation: next, operations: out.length });
      await out.finish();
    } catch (e) {
      await out.abort();
      // A staged commit that failed here (not killed) removes what it wrote now; when
      // that fails too, the next writer does it (the marker stays).
      if (out.staged)
        await this.dropStaged(side).catch((e2: unknown) =>
          this.logger.warn('could not delete the cells of the failed staged commit; the next writer will', {
            side,
            generation: next,
            error: String(e2),
          }),
        );
      throw e;
    }
    this.logger.info('committed keyword index generation', { side, generation: next, size, changed, staged: out.staged });
    return { generation: next, changed, entries: fresh, patched, base: base ? base.generation : null };
  }

  /**
   * Delete the cells a killed staged commit left behind (its number is in the side's
   * `s` marker and no manifest names it), in batches, then the marker.
   */
  private async dropStaged(side: Side, dryRun = false): Promise<{ generation: number; cells: number } | null> {
    const markerKey = ['s', side].join(SEP);
    const marker = (await this.sub.get(markerKey)) as number | undefined;
    if (marker === undefined) return null;
    const named = await this.withSnapshot(async (snap) => (await this.manifests(side, snap)).some((m) => m.generation === marker));
    const g = genHex(marker);
    // Deleted in batches like a commit's cells (no reservation, no progress lines), the marker with the last one.
    const out = dryRun
      ? null
      : new StagedBatch(
          this.db.level,
          this.sub.prefix,
          this.maxBatchOps,
          async () => {},
          () => {},
        );
    let cells = 0;
    if (!named) {
      for (const kind of ['r', 'p', 'w']) {
        const lo = [kind, side].join(SEP) + SEP;
        for await (const key of this.sub.keys({ gte: lo, lt: [kind, side].join(SEP) + '\x01' })) {
          if (!key.endsWith(g) || key.charCodeAt(key.length - 9) !== 0) continue;
          cells++;
          if (!out) continue;
          if (out.full) await out.flush();
          out.del(key);
        }
      }
    }
    if (!out) return { generation: marker, cells };
    out.del(markerKey);
    await out.finish();
    this.logger.info('deleted the cells of an unfinished staged commit', { side, generation: marker, cells });
    return { generation: marker, cells };
  }

  /**
   * What killed staged commits left (never read; the next write deletes it): per side,
   * the generation number and its cells. With `drop`, deletes them now (`cogr verify --repair`).
   */
  async unfinishedStaged(opts: { drop?: boolean } = {}): Promise<{ side: Side; generation: number; cells: number }[]> {
    return this.exclusive(async () => {
      const out: { side: Side; generation: number; cells: number }[] = [];
      for (const side of SIDES) {
        const r = await this.dropStaged(side, !opts.drop);
        if (r) out.push({ side, ...r });
      }
      return out;
    });
  }

  private async deleteLocked(side: Side, generation: number, snap: Snap): Promise<void> {
    const mans = await this.manifests(side, snap);
    const target = mans.find((m) => m.generation === generation);
    if (!target) throw cogrError('NOT_FOUND', `${side} generation ${generation} does not exist`, { side, generation });
    const children = mans.filter((m) => m.chainParent === generation);
    const g = genHex(generation);
    const childHex = children.map((c) => genHex(c.generation));
    const batch = this.db.level.batch();
    const pfx = this.sub.prefix;
    const put = (key: string, value: unknown) => batch.put(pfx + key, JSON.stringify(value));
    const del = (key: string) => batch.del(pfx + key);
    let folded = 0;
    for (const kind of ['r', 'p', 'w']) {
      const lo = [kind, side].join(SEP) + SEP;
      let groupPrefix = '';
      let gens = new Set<string>();
      let pending: { key: string; value: unknown } | null = null;
      const flush = () => {
        if (pending) {
          for (const ch of childHex) {
            if (!gens.has(ch)) {
              put(groupPrefix + ch, pending.value);
              folded++;
            }
          }
          del(pending.key);
        }
        pending = null;
        gens = new Set();
      };
      for await (const [key, value] of this.sub.iterator({ gte: lo, lt: [kind, side].join(SEP) + '\x01', snapshot: snap })) {
        const prefix = key.slice(0, key.length - 8);
        const gh = key.slice(key.length - 8);
        if (prefix !== groupPrefix) {
          flush();
          groupPrefix = prefix;
        }
        gens.add(gh);
        if (gh === g) pending = { key, value };
      }
      flush();
    }
    for (const c of children) put(['m', side, genHex(c.generation)].join(SEP), { ...c, chainParent: target.chainParent });
    del(['m', side, g].join(SEP));
    await batch.write();
    this.logger.info('deleted keyword index generation', { side, generation, folded, children: children.map((c) => c.generation) });
  }

  private async manifests(side: Side, snap: Snap): Promise<GenerationManifest[]> {
    const lo = ['m', side].join(SEP) + SEP;
    const out: GenerationManifest[] = [];
    for await (const v of this.sub.values({ gte: lo, lt: ['m', side].join(SEP) + '\x01', snapshot: snap }))
      out.push(v as GenerationManifest);
    return out;
  }

  private async resolve(side: Side, generation: number | 'latest', snap: Snap): Promise<GenerationManifest> {
    const mans = await this.manifests(side, snap);
    if (generation === 'latest') {
      if (mans.length === 0) throw cogrError('NOT_FOUND', `the ${side} index in ${this.db.path} has no generation yet`, { side });
      return mans[mans.length - 1];
    }
    checkGeneration(generation);
    const m = mans.find((x) => x.generation === generation);
    if (!m) throw cogrError('NOT_FOUND', `${side} generation ${generation} does not exist in ${this.db.path}`, { side, generation });
    return m;
  }

  private async lineage(side: Side, man: GenerationManifest, snap: Snap): Promise<Set<string>> {
    const byGen = new Map((await this.manifests(side, snap)).map((m) => [m.generation, m]));
    const out = new Set<string>();
    let cur: GenerationManifest | undefined = man;
    while (cur) {
      if (out.has(genHex(cur.generation)))
        throw cogrError('DB_CORRUPT', `${side} index: a cycle in the generation chain at ${cur.generation}`);
      out.add(genHex(cur.generation));
      if (cur.chainParent === null) break;
      const p = byGen.get(cur.chainParent);
      if (!p) throw cogrError('DB_CORRUPT', `${side} generation ${cur.generation} inherits from missing generation ${cur.chainParent}`);
      cur = p;
    }
    return out;
  }

  /** The value of one versioned cell (key without the generation) in a lineage. */
  private async latestCell(prefix: string, lineage: Set<string>, snap: Snap): Promise<unknown> {
    for await (const [key, value] of this.sub.iterator({ gt: prefix + SEP, lt: prefix + '\x01', reverse: true, snapshot: snap })) {
      if (lineage.has(key.slice(key.length - 8))) return value;
    }
    return undefined;
  }

  /**
   * Scan every versioned cell under `prefix` and call `fn(rest, value)` once per distinct
   * cell key with its value in the lineage (rest = the key between prefix and generation).
   */
  private async scanLatest(prefix: string, lineage: Set<string>, snap: Snap, fn: (rest: string, value: unknown) => void): Promise<void> {
    let cur = '';
    let best: unknown = undefined;
    let has = false;
    const upper = prefix.slice(0, -1) + '\x01';
    for await (const [key, value] of this.sub.iterator({ gte: prefix, lt: upper, snapshot: snap })) {
      const rest = key.slice(prefix.length, key.length - 9);
      if (rest !== cur) {
        if (has) fn(cur, best);
        cur = rest;
        has = false;
      }
      // Ascending generation order within a cell key: the last one in the lineage wins.
      if (lineage.has(key.slice(key.length - 8))) {
        best = value;
        has = true;
      }
    }
    if (has) fn(cur, best);
  }

  private async recordsAt(side: Side, lineage: Set<string>, snap: Snap, keep?: (id: string) => boolean): Promise<[string, LiveRecord][]> {
    const out: [string, LiveRecord][] = [];
    await this.scanLatest(['r', side].join(SEP) + SEP, lineage, snap, (rest, v) => {
      if (!isLive(v as StoredRecord)) return;
      const id = unesc(rest);
      if (!keep || keep(id)) out.push([id, v as LiveRecord]);
    });
    return out;
  }

  private async dfAt(side: Side, lineage: Set<string>, snap: Snap): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    await this.scanLatest(['w', side].join(SEP) + SEP, lineage, snap, (rest, v) => out.set(unesc(rest), v as number));
    return out;
  }

  private async entriesAt(side: Side, man: GenerationManifest, snap: Snap): Promise<IndexEntry[]> {
    const lineage = await this.lineage(side, man, snap);
    const recs = await this.recordsAt(side, lineage, snap);
    const out = recs.map(([id, r]) => ({ id, self: r.s, keywords: r.k }));
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  private async withSnapshot<T>(fn: (snap: Snap) => Promise<T>): Promise<T> {
    const snap = this.db.level.snapshot();
    try {
      return await fn(snap);
    } finally {
      await snap.close();
    }
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
