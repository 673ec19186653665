/**
 * What a server serves, and how it switches generations without a restart.
 *
 * A `Snapshot` is everything one request needs, fully in memory: the served item-side
 * view, the query-side view (for item rewards), every item generation (for
 * `/v1/items/:id`), the items' structured fields, and the query-side keyword source of
 * the served round. A `SnapshotLoader` builds one (it may open the LevelDB briefly and
 * must close it before returning, so that other processes can commit).
 *
 * `LiveSnapshot` holds the current snapshot in a single reference. A request reads the
 * reference once at its start and keeps that object until it answers, so a reload that
 * swaps the reference never changes what an in-flight request sees. A failed reload
 * (e.g. the database is locked by a writer) keeps the old snapshot, is reported in
 * `status()` and retried by the watch timer.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Side } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { Logger } from '../../index/core/log.ts';
import { silentLogger } from '../../index/core/log.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { Floor } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import type { RankedSet, RankRequest } from './queryTypes.ts';
import type { ServedJudgements } from '../catalog/preview.ts';

/** Produces query-side keywords for a raw query text (the served round's generator). */
export interface QueryKeywordSource {
  /** A short name reported in responses ("embedded", "openai", ...). */
  readonly name: string;
  /** The text's keywords; rejects with NoSearchableTerms when the text has no word the served data knows. */
  keywords(text: string, signal: AbortSignal): Promise<string[]>;
  /** The served set ordered by a ranker other than keywords (the embedded planner only). */
  rank?(req: RankRequest, signal: AbortSignal): Promise<RankedSet>;
}

export { NoSearchableTerms } from './queryTypes.ts';

export interface GenerationInfo {
  side: Side;
  generation: number;
  /** The co-evolution round recorded with the generation, when there is one. */
  round: number | null;
  entities: number;
  /** Vocabulary size: distinct keywords, self keywords included (from the generation's manifest). */
  keywords: number;
}

/** A generation whose files failed their check when the snapshot was loaded. */
export interface GenerationProblem {
  side: Side;
  generation: number;
  code: string;
  message: string;
}

export interface Snapshot {
  /** The served round (as resolved from `--round`), null when the store has no rounds. */
  round: number | null;
  /** The item-side generation searched by `/v1/search`. */
  item: KeywordView;
  /** The query-side generation of the same round, when there is one. */
  query: KeywordView | null;
  /** Every item-side generation held in memory, ascending (includes `item`). */
  itemGenerations: readonly KeywordView[];
  /** Every committed generation of both sides whose files pass their check (including ones not held in memory). */
  generations: readonly GenerationInfo[];
  /** Generations whose files failed their check (never served); empty when all pass. */
  problems: readonly GenerationProblem[];
  /** Why the served generation is not the newest one, null when it is. */
  reason: string | null;
  /** Structured item fields from the dataset (item id → field → value). */
  fields: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** Item titles for display, when the dataset is known (item id → title). */
  titles: ReadonlyMap<string, string>;
  /** Item texts (descriptions), when the dataset is known (item id → text): the `text` field a search may ask for. */
  texts: ReadonlyMap<string, string>;
  /** Items whose keywords were set by hand (catalog writes), with those keywords. */
  handSet: ReadonlyMap<string, readonly string[]>;
  /**
   * The catalog writes the served generation holds (src/catalog): its root generation, its
   * newest delta, and whether the query planner's relevance model still lacks some of their
   * item texts (it is rebuilt over them by a refresh load); null without catalog writes.
   */
  catalog: { root: number; seq: number; plannerStale: boolean } | null;
  /** The run's judgements as its item half-rounds count them (keyword previews), when the server knows the run and its dataset. */
  judgements: ServedJudgements | null;
  /** The query-side keyword generator of the served round; null → raw query only. */
  keywordSource: QueryKeywordSource | null;
  /**
   * What the query keywords depend on besides the text (the generator, its round, the items
   * its relevance model is built over, the query generation): the keyword cache's key, kept
   * across catalog writes, which change only the item view they are matched against.
   */
  keywordEpoch: string;
  /** How `/v1/search` ranks and floors the served set (the run's SFT choice, or `--rank`); keywords and no floor when the round has none. */
  ranking: { ranker: Ranker; floor: Floor; source: string };
}

export interface SnapshotLoader {
  /**
   * Build a snapshot of the newest (or the pinned) generation; return the previous
   * snapshot object itself when nothing changed (no swap happens then). `refresh`: rebuild
   * what a catalog write reused (the planner's relevance model over the catalog's items).
   */
  load(opts?: { refresh?: boolean }): Promise<Snapshot>;
  /** A description for logs (the database path). */
  readonly description: string;
  /** A folder whose changes may mean a new generation (watched with fs.watch besides polling). */
  readonly watchPath?: string;
}

export interface LiveStatus {
  /** Increments on every successful swap (1 after the first load). */
  version: number;
  loadedAt: string | null;
  lastAttemptAt: string | null;
  /** The last reload error, null after a success. */
  lastError: { code: string; message: string } | null;
  /** True while the last reload failed and a retry is pending. */
  stale: boolean;
}

export interface ReloadOutcome {
  swapped: boolean;
  version: number;
  item: { generation: number; previous: number | null };
  error?: { code: string; message: string };
}

export class LiveSnapshot {
  private current: Snapshot | null = null;
  private version = 0;
  private loadedAt: string | null = null;
  private lastAttemptAt: string | null = null;
  private lastError: { code: string; message: string } | null = null;
  private inFlight: Promise<ReloadOutcome> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private watcher: FSWatcher | null = null;
  private debounce: NodeJS.Timeout | null = null;
  private again = false;
  /** The next reload refreshes (a catalog's items reached the planner's relevance model). */
  private refreshWanted = false;
  private refreshQuiet: NodeJS.Timeout | null = null;
  private refreshDue: NodeJS.Timeout | null = null;
  private readonly listeners: ((s: Snapshot, version: number) => void)[] = [];
  private readonly preparers: ((s: Snapshot) => Promise<void>)[] = [];
  private readonly outcomeListeners: ((o: ReloadOutcome) => void)[] = [];

  constructor(
    private readonly loader: SnapshotLoader,
    private readonly log: Logger = silentLogger,
    private readonly refresh: { quietMs: number; maxMs: number } = {
      quietMs: DEFAULTS.catalog.refreshQuietMs,
      maxMs: DEFAULTS.catalog.refreshMaxMs,
    },
  ) {}

  /** Start from a snapshot already built (e.g. in tests or by the command). */
  static fromSnapshot(snapshot: Snapshot, loader: SnapshotLoader, log?: Logger): LiveSnapshot {
    const live = new LiveSnapshot(loader, log);
    live.swap(snapshot);
    return live;
  }

  /** The snapshot to use for one request: read once, keep until the answer is sent. */
  get(): Snapshot {
    if (!this.current) throw new Error('LiveSnapshot.get() before the first load');
    return this.current;
  }

  get currentVersion(): number {
    return this.version;
  }

  onSwap(fn: (s: Snapshot, version: number) => void): void {
    this.listeners.push(fn);
  }

  /**
   * Work to finish on a new snapshot before it is swapped in (look-up structures,
   * generators in the keyword workers), so that no request pays for it.
   */
  onPrepare(fn: (s: Snapshot) => Promise<void>): void {
    this.preparers.push(fn);
  }

  /** Called after every reload attempt that had a snapshot to fall back on. */
  onReload(fn: (o: ReloadOutcome) => void): void {
    this.outcomeListeners.push(fn);
  }

  private swap(s: Snapshot): void {
    this.current = s;
    this.version++;
    this.loadedAt = new Date().toISOString();
    this.lastError = null;
    for (const fn of this.listeners) fn(s, this.version);
    this.scheduleRefresh(s);
  }

  /**
   * A snapshot whose planner still lacks some catalog items' texts gets a refresh load
   * once writes pause for `quietMs` (each new swap restarts that wait), and at the latest
   * `maxMs` after the first such swap.
   */
  private scheduleRefresh(s: Snapshot): void {
    if (this.refreshQuiet) clearTimeout(this.refreshQuiet);
    this.refreshQuiet = null;
    if (!s.catalog?.plannerStale) {
      if (this.refreshDue) clearTimeout(this.refreshDue);
      this.refreshDue = null;
      return;
    }
    const fire = () => {
      if (this.refreshQuiet) clearTimeout(this.refreshQuiet);
      if (this.refreshDue) clearTimeout(this.refreshDue);
      this.refreshQuiet = this.refreshDue = null;
      this.refreshWanted = true;
      this.changed();
    };
    this.refreshQuiet = setTimeout(fire, this.refresh.quietMs);
    this.refreshQuiet.unref();
    if (!this.refreshDue) {
      this.refreshDue = setTimeout(fire, this.refresh.maxMs);
      this.refreshDue.unref();
    }
  }

  /**
   * Load the newest generation and swap it in. Concurrent calls share one load. The
   * first load throws on failure; later failures keep the old snapshot and are
   * returned (and reported by `status()`).
   */
  reload(): Promise<ReloadOutcome> {
    if (this.inFlight) return this.inFlight;
    const run = async (): Promise<ReloadOutcome> => {
      this.lastAttemptAt = new Date().toISOString();
      const previous = this.current ? this.current.item.generation : null;
      const refresh = this.refreshWanted;
      this.refreshWanted = false;
      try {
        const s = await this.loader.load(refresh ? { refresh } : undefined);
        if (s === this.current) {
          // The loader found nothing new: keep the snapshot (and every cache keyed on it).
          this.lastError = null;
          return { swapped: false, version: this.version, item: { generation: s.item.generation, previous } };
        }
        for (const p of this.preparers) await p(s);
        this.swap(s);
        this.log.info('serving generation', {
          item: s.item.generation,
          query: s.query?.generation ?? null,
          round: s.round,
          version: this.version,
          ...(s.reason ? { reason: s.reason } : {}),
        });
        return { swapped: true, version: this.version, item: { generation: s.item.generation, previous } };
      } catch (e) {
        const err = isCogrError(e)
          ? { code: e.code, message: e.message }
          : { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e) };
        if (!this.current) throw e;
        // A refresh that failed is asked for again by the next reload.
        if (refresh) this.refreshWanted = true;
        this.lastError = err;
        this.log.warn('reload failed; keeping the current generation', { ...err, db: this.loader.description });
        return { swapped: false, version: this.version, item: { generation: this.current.item.generation, previous }, error: err };
      }
    };
    this.inFlight = run()
      .then((o) => {
        for (const fn of this.outcomeListeners) fn(o);
        return o;
      })
      .finally(() => {
        this.inFlight = null;
        // A change seen while this reload ran: look again.
        if (this.again) {
          this.again = false;
          this.changed();
        }
      });
    return this.inFlight;
  }

  /**
   * Poll for a newer generation every `seconds` (also retries a failed reload), and
   * reload as soon as the loader's folder changes (fs.watch), so that each generation a
   * writer commits is served within moments. A change during a reload triggers one more.
   */
  watch(seconds: number): void {
    this.stopWatch();
    this.timer = setInterval(
      () => {
        this.watchFolder();
        void this.reload().catch(() => {});
      },
      Math.max(1, seconds) * 1000,
    );
    this.timer.unref();
    this.watchFolder();
    // Catch up with whatever was committed while the first snapshot loaded.
    this.changed();
  }

  private watchFolder(): void {
    const path = this.loader.watchPath;
    if (!path || this.watcher) return;
    try {
      const w = watch(path, { persistent: false }, () => this.changed());
      // The folder went away (a run started over with --fresh): polling watches it again once it is back.
      w.on('error', () => {
        w.close();
        if (this.watcher === w) this.watcher = null;
      });
      this.watcher = w;
    } catch {
      /* not there yet: the next poll tries again */
    }
  }

  private changed(): void {
    if (this.debounce) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      if (this.inFlight) {
        this.again = true;
        return;
      }
      void this.reload().catch(() => {});
    }, 20);
    this.debounce.unref();
  }

  stopWatch(): void {
    if (this.refreshQuiet) clearTimeout(this.refreshQuiet);
    if (this.refreshDue) clearTimeout(this.refreshDue);
    this.refreshQuiet = this.refreshDue = null;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.watcher?.close();
    this.watcher = null;
    if (this.debounce) clearTimeout(this.debounce);
    this.debounce = null;
  }

  status(): LiveStatus {
    return {
      version: this.version,
      loadedAt: this.loadedAt,
      lastAttemptAt: this.lastAttemptAt,
      lastError: this.lastError,
      stale: this.lastError !== null,
    };
  }
}
