/**
 * The catalog writer: applies a batch of catalog operations to the served item generation
 * as one new item generation. Used by `cogr items` in its own process and, inside `cogr
 * serve --writable`, by the writer thread (writerThread.ts); either way it holds the
 * project database's lock (LevelDB is single-writer), so a second writer is refused by
 * name (DB_LOCKED), and the batches of one writer are applied one after another.
 *
 * One batch, all or nothing:
 *   1. validated whole before anything is written: an id twice in the batch, an item added
 *      that is there, changed or deleted that is not, or hand-set keywords cleared for an
 *      item without a text to generate them from, is refused naming its line or field;
 *   2. the keywords of every added or changed item (unless set by hand: those are kept until
 *      cleared) from the served round's item generator (itemKeywords.ts), from its text alone;
 *      a generator failure refuses the batch;
 *   3. the delta written (log.ts), then the item generation committed on the catalog's
 *      previous one (patch mode: one LevelDB batch, or a staged commit, all-or-nothing) with
 *      meta `{round, label: 'catalog', catalog: {root, seq, deltas}}`, its files published;
 *   4. after it is answered, before the next batch: the catalog's generations of the root
 *      beyond the newest `keep` deleted (their changes folded forward; the deltas stay).
 * A writer killed before 3's commit leaves the previous generation served; the delta it
 * wrote is deleted by the next writer (CatalogLog.reconcile) before it writes.
 */
import type { CogrDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { Corpus, Item } from '../../index/core/types.ts';
import { KeywordIndexStore, type GenerationInfo } from '../../index/store/store.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import type { GenerateInput, KeyValueStore } from '../../generators/types.ts';
import { policyStore } from '../run/policies.ts';
import { readRunAt, type StoredRun } from '../run/state.ts';
import { itemKeywordsFactory, type ItemKeywordSource } from './itemKeywords.ts';
import { CatalogLog, type CatalogDoc } from './log.ts';
import { opError, type LocatedOp, type OpSource } from './ops.ts';
import { resolveSelector, selectGenerations, servedHead, type RoundSelector } from './served.ts';
import { applyDeltas, catalogMeta, emptyCatalog, type CatalogState } from './state.ts';

/** What the served round offers for making an item generator. */
export interface ItemGeneratorContext {
  /** The project database's policies. */
  policies: KeyValueStore;
  /** The run, when the database holds one. */
  run: StoredRun | null;
  /** The catalog's root: the run's item generation it builds on. */
  root: GenerationInfo;
  /** The served query generation (the item policy's opposite side), when there is one. */
  queryView: KeywordView | null;
}

export interface CatalogWriterOptions {
  /** Which generation to write on: the served one (`cogr serve --round`). */
  round: RoundSelector;
  /** The run's dataset: the texts of items the catalog never changed (to clear hand-set keywords), and titles. */
  corpus?: Pick<Corpus, 'items'> | null;
  /** The item generator (default: the embedded item policy of the served round over the served query generation). */
  itemKeywords?: (ctx: ItemGeneratorContext) => Promise<ItemKeywordSource>;
  /** Catalog generations of a root kept (older ones deleted, their changes folded forward). */
  keep?: number;
  log?: Logger;
}

/** A committed batch. */
export interface CatalogCommit {
  generation: number;
  /** The generation it was built on. */
  base: number;
  root: number;
  seq: number;
  counts: { added: number; updated: number; deleted: number; handSet: number; cleared: number };
  /** Every item set by the batch, with its keywords now and whether they are hand-set. */
  items: { id: string; keywords: string[]; handSet: boolean }[];
  removed: string[];
  /** The item generator that made the keywords (null: none was needed). */
  generator: string | null;
}

export class CatalogWriter {
  private queue: Promise<unknown> = Promise.resolve();
  /** Batches given to `apply` that have not started yet. */
  private waiting = 0;
  private generator: Promise<ItemKeywordSource> | null = null;
  private readonly datasetItems: ReadonlyMap<string, Item>;

  private constructor(
    private readonly db: CogrDb,
    private readonly store: KeywordIndexStore,
    private readonly catalog: CatalogLog,
    private readonly opts: CatalogWriterOptions,
    private readonly ctx: ItemGeneratorContext,
    private head: GenerationInfo,
    private view: KeywordView,
    private state: CatalogState,
    private readonly log: Logger,
  ) {
    this.datasetItems = new Map((opts.corpus?.items ?? []).map((it) => [it.id, it]));
  }

  /** Open the writer on the served generation of `db` (the caller holds it open, and so its lock). */
  static async open(db: CogrDb, opts: CatalogWriterOptions): Promise<CatalogWriter> {
    const log = opts.log ?? silentLogger;
    const store = new KeywordIndexStore(db, { logger: log, keepEntries: true });
    // What a killed writer left is put right first: the store's files, then the catalog's deltas.
    await store.recover();
    const catalog = new CatalogLog(db);
    const items = await store.listGenerations('item');
    const queries = await store.listGenerations('query');
    let committed = -1;
    for (const g of items) committed = Math.max(committed, catalogMeta(g)?.seq ?? -1);
    const fixed = await catalog.reconcile(committed);
    if (fixed.dropped.length)
      log.info('deleted the catalog deltas of writes a killed writer never committed', { deltas: fixed.dropped.join(',') });
    const run = await readRunAt(db.path);
    const sel = selectGenerations(items, queries, resolveSelector(run, opts.round).selector);
    const { root, head } = servedHead(items, sel.item);
    const rootInfo = items.find((g) => g.generation === root) ?? head;
    const meta = catalogMeta(head);
    let state = emptyCatalog(root);
    if (meta) {
      const deltas = [];
      for (const seq of await catalog.numbers()) {
        if (seq > meta.seq) break;
        const d = (await catalog.read(seq))!;
        if (d.root === root) deltas.push(d);
      }
      state = applyDeltas(state, deltas);
      if (state.deltas !== meta.deltas)
        throw cogrError(
          'DB_CORRUPT',
          `item generation ${head.generation} applies ${meta.deltas} catalog deltas of root ${root}, the database holds ${state.deltas}`,
          { generation: head.generation },
        );
    }
    const queryView = sel.query ? await store.openView('query', sel.query.generation) : null;
    const view = await store.openView('item', head.generation);
    const ctx: ItemGeneratorContext = { policies: policyStore(db), run, root: rootInfo, queryView };
    log.info('catalog writer ready', { root, served: head.generation, deltas: state.deltas });
    return new CatalogWriter(db, store, catalog, opts, ctx, head, view, state, log);
  }

  /** The generation writes build on (the served one). */
  get served(): number {
    return this.head.generation;
  }

  /** The item generator, made on first use. */
  private itemKeywords(): Promise<ItemKeywordSource> {
    if (this.generator) return this.generator;
    const make =
      this.opts.itemKeywords ??
      itemKeywordsFactory('embedded', () => {
        throw cogrError('INTERNAL', 'the embedded item generator needs no LLM endpoint');
      });
    this.generator = make(this.ctx).catch((e: unknown) => {
      this.generator = null;
      throw e;
    });
    return this.generator;
  }

  /** Apply one batch (after the batches before it). */
  apply(ops: readonly LocatedOp[], source: OpSource, signal?: AbortSignal): Promise<CatalogCommit> {
    this.waiting++;
    const run = this.queue.then(() => {
      this.waiting--;
      return this.applyNow(ops, source, signal);
    });
    // Older generations are deleted after a commit is answered, before the next batch.
    this.queue = run.then(
      () =>
        this.prune().catch((e: unknown) =>
          this.log.warn('deleting older catalog generations failed; the next write tries again', {
            error: e instanceof Error ? e.message : String(e),
          }),
        ),
      () => undefined,
    );
    return run;
  }

  /** The item's document now: the catalog's, else the dataset's. */
  private docOf(id: string): CatalogDoc | null {
    const d = this.state.docs.get(id);
    if (d !== undefined) return d;
    const it = this.datasetItems.get(id);
    return it ? { id, title: it.title, text: it.text, ...(it.fields ? { fields: it.fields } : {}) } : null;
  }

  private async applyNow(ops: readonly LocatedOp[], source: OpSource, signal?: AbortSignal): Promise<CatalogCommit> {
    if (ops.length === 0) throw cogrError(source === 'file' ? 'DATA_MISSING' : 'INVALID_BODY', 'the batch holds no operation');
    if (ops.length > DEFAULTS.catalog.maxBatch)
      throw cogrError(
        source === 'file' ? 'DATA_FORMAT' : 'INVALID_BODY',
        `a batch holds at most ${DEFAULTS.catalog.maxBatch} operations, this one ${ops.length}: split it`,
      );
    // 1. Validate the whole batch against the served generation before anything is written.
    const seen = new Map<string, LocatedOp>();
    const toGenerate: { at: LocatedOp; input: GenerateInput }[] = [];
    for (const at of ops) {
      const { op } = at;
      const first = seen.get(op.id);
      if (first)
        throw opError(source, at, 'INVALID_ARGUMENT', `id ${JSON.stringify(op.id)} occurs twice in the batch (also at ${first.where})`);
      seen.set(op.id, at);
      const present = this.view.ordinalOf(op.id) >= 0;
      if (op.op === 'add' && present)
        throw opError(
          source,
          at,
          'CONFLICT',
          `item ${JSON.stringify(op.id)} is already in the catalog (update it, or PUT it to replace it)`,
        );
      if ((op.op === 'update' || op.op === 'delete' || op.op === 'keywords') && !present)
        throw opError(
          source,
          at,
          'NOT_FOUND',
          `no item ${JSON.stringify(op.id)} in the served catalog (generation ${this.head.generation})`,
        );
      if (op.op === 'add' || op.op === 'update' || op.op === 'upsert') {
        if (!this.state.handSet.has(op.id)) toGenerate.push({ at, input: { id: op.id, title: op.title, text: op.text } });
      } else if (op.op === 'keywords' && op.keywords === null) {
        const doc = this.docOf(op.id);
        if (!doc)
          throw opError(
            source,
            at,
            'NOT_FOUND',
            `item ${JSON.stringify(op.id)} has no text to generate its keywords from (serve the run's dataset, or set its keywords by hand)`,
          );
        toGenerate.push({ at, input: { id: op.id, title: doc.title, text: doc.text } });
      }
    }
    // 2. Keywords from the served round's item generator, from each item's text alone.
    let generatorName: string | null = null;
    const generated = new Map<string, string[]>();
    if (toGenerate.length > 0) {
      const gen = await this.itemKeywords();
      generatorName = gen.name;
      const t0 = performance.now();
      const lists = await gen.keywords(
        toGenerate.map((x) => x.input),
        signal,
      );
      toGenerate.forEach((x, i) => generated.set(x.input.id, lists[i]));
      this.log.debug('catalog: item keywords generated', { items: toGenerate.length, ms: Math.round(performance.now() - t0) });
    }
    if (signal?.aborted) throw cogrError('ABORTED', 'the catalog write was cancelled before anything was written');
    // 3. The delta, then the generation that applies it.
    const seq = await this.catalog.next();
    const put: CatalogDoc[] = [];
    const del: string[] = [];
    const handSet: { id: string; keywords: string[] | null }[] = [];
    const counts = { added: 0, updated: 0, deleted: 0, handSet: 0, cleared: 0 };
    const writer = this.store.writer('item', { base: this.head.generation, mode: 'patch' });
    const setItems: CatalogCommit['items'] = [];
    for (const { op } of ops) {
      if (op.op === 'delete') {
        del.push(op.id);
        writer.remove(op.id);
        counts.deleted++;
        continue;
      }
      if (op.op === 'keywords') {
        // Kept (and answered) as stored: normalised, de-duplicated.
        const given = op.keywords === null ? null : normalizeKeywordSet(op.keywords).keywords;
        handSet.push({ id: op.id, keywords: given });
        const keywords = given ?? generated.get(op.id)!;
        writer.set(op.id, this.titleOf(op.id), keywords);
        setItems.push({ id: op.id, keywords, handSet: op.keywords !== null });
        if (op.keywords === null) counts.cleared++;
        else counts.handSet++;
        continue;
      }
      const doc: CatalogDoc = { id: op.id, title: op.title, text: op.text, ...(op.fields ? { fields: op.fields } : {}) };
      put.push(doc);
      const kept = this.state.handSet.get(op.id);
      const keywords = kept ? [...kept] : generated.get(op.id)!;
      writer.set(op.id, op.title, keywords);
      setItems.push({ id: op.id, keywords, handSet: kept !== undefined });
      if (this.view.ordinalOf(op.id) >= 0) counts.updated++;
      else counts.added++;
    }
    const delta = await this.catalog.write({
      seq,
      root: this.state.root,
      base: this.head.generation,
      at: new Date().toISOString(),
      put,
      delete: del,
      handSet,
    });
    this.log.info('catalog delta written', { seq, root: delta.root });
    const next = applyDeltas(this.state, [delta]);
    const round = this.ctx.root.meta?.round;
    const generation = await writer.commit({
      ...(typeof round === 'number' ? { round } : {}),
      label: 'catalog',
      catalog: { root: next.root, seq: next.seq, deltas: next.deltas },
    });
    const base = this.head.generation;
    this.state = next;
    this.head = await this.store.generationInfo('item', generation);
    this.view = await this.store.openView('item', generation);
    this.log.info('catalog write committed', { generation, base, seq, ...counts });
    return { generation, base, root: next.root, seq, counts, items: setItems, removed: del, generator: generatorName };
  }

  /** The title of an item now (the catalog's, the dataset's, or the index's own). */
  private titleOf(id: string): string {
    const doc = this.docOf(id);
    if (doc) return doc.title;
    const e = this.view.ordinalOf(id);
    return e >= 0 ? this.view.selfOf(e) : '';
  }

  /**
   * Delete the root's catalog generations beyond the newest `keep`, oldest first, one at a
   * time (each delete scans the side's cells): while batches wait, only down to four times
   * `keep`, so a waiting write is held up by one delete at most.
   */
  private async prune(): Promise<void> {
    const keep = Math.max(1, this.opts.keep ?? DEFAULTS.catalog.keepGenerations);
    const ours = (await this.store.listGenerations('item')).filter((g) => catalogMeta(g)?.root === this.state.root);
    let deleted = 0;
    for (const g of ours.slice(0, Math.max(0, ours.length - keep))) {
      if (this.waiting > 0 && ours.length - deleted <= 4 * keep) break;
      await this.store.deleteGeneration('item', g.generation);
      deleted++;
    }
    if (deleted > 0) this.log.debug('deleted older catalog generations', { deleted, kept: ours.length - deleted });
  }

  /** The keywords the served item generator gives these inputs (what a write would give them). */
  async keywordsFor(inputs: readonly GenerateInput[], signal?: AbortSignal): Promise<string[][]> {
    return (await this.itemKeywords()).keywords(inputs, signal);
  }

  /** Wait for the batches in flight; the database stays the caller's to close. */
  async drain(): Promise<void> {
    await this.queue;
  }

  /** The database path (for logs). */
  get path(): string {
    return this.db.path;
  }
}
