/**
 * The real `SnapshotLoader`: opens the project LevelDB briefly, reads the generations
 * to serve into memory (KeywordView), and closes it again, so that the co-evolution loop
 * or `cogr import-generation` in another process can commit while we serve. A locked
 * database surfaces as DB_LOCKED, which `LiveSnapshot` turns into "keep serving, retry".
 *
 * Round selection: a generation's round is `meta.round` (a number) as recorded by the
 * writer. `round: 'latest'` serves the newest item generation (and the newest query
 * generation); `round: n` serves the newest item generation with meta.round = n and the
 * newest query generation with meta.round ≤ n (NOT_FOUND when no item generation has
 * round n).
 */
import { openDb, type CogrDb } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import type { Logger } from '../../index/log.ts';
import { silentLogger } from '../../index/log.ts';
import { KeywordIndexStore, type GenerationInfo as StoreGenerationInfo } from '../../index/store.ts';
import type { Corpus } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import type { KeywordGenerator } from '../../generators/types.ts';
import type { QueryKeywordSource, Snapshot, SnapshotLoader } from './state.ts';

export type RoundSelector = number | 'latest';

export interface KeywordSourceContext {
  round: number | null;
  db: CogrDb;
  item: KeywordView;
}

export interface StoreLoaderOptions {
  dbPath: string;
  round: RoundSelector;
  /** Item fields and titles from the dataset the index was built from. */
  corpus?: Pick<Corpus, 'items'>;
  /** How many item generations (newest first) to hold for `/v1/items/:id`. */
  historyLimit?: number;
  /**
   * Chooses the query-side keyword source for the served round; called while the
   * database is open (to load the round's policy), with the served item view.
   */
  keywordSource?: (ctx: KeywordSourceContext) => QueryKeywordSource | null | Promise<QueryKeywordSource | null>;
  log?: Logger;
}

function roundOf(g: StoreGenerationInfo): number | null {
  const r = g.meta?.round;
  return typeof r === 'number' && Number.isInteger(r) ? r : null;
}

/** Which item and query generations serve a round selector. */
export function selectGenerations(
  items: readonly StoreGenerationInfo[],
  queries: readonly StoreGenerationInfo[],
  round: RoundSelector,
): { item: StoreGenerationInfo; query: StoreGenerationInfo | null; round: number | null } {
  if (items.length === 0) throw cogrError('NOT_FOUND', 'the database has no item generation to serve (import or evolve one first)');
  if (round === 'latest') {
    const item = items[items.length - 1];
    return { item, query: queries.length ? queries[queries.length - 1] : null, round: roundOf(item) };
  }
  const matching = items.filter((g) => roundOf(g) === round);
  if (matching.length === 0) {
    const known = [...new Set(items.map(roundOf).filter((r): r is number => r !== null))].sort((a, b) => a - b);
    throw cogrError('NOT_FOUND', `round: no item generation of round ${round} (rounds: ${known.length ? known.join(', ') : 'none recorded'})`, { round });
  }
  const qs = queries.filter((g) => {
    const r = roundOf(g);
    return r !== null && r <= round;
  });
  return { item: matching[matching.length - 1], query: qs.length ? qs[qs.length - 1] : null, round };
}

export function storeSnapshotLoader(opts: StoreLoaderOptions): SnapshotLoader {
  const log = opts.log ?? silentLogger;
  const historyLimit = opts.historyLimit ?? 8;
  const fields = new Map<string, Readonly<Record<string, string>>>();
  const titles = new Map<string, string>();
  for (const it of opts.corpus?.items ?? []) {
    if (it.fields && Object.keys(it.fields).length > 0) fields.set(it.id, it.fields);
    if (it.title) titles.set(it.id, it.title);
  }
  // Views of unchanged generations are reused across reloads (generations are immutable).
  let cache = new Map<string, KeywordView>();
  let last: Snapshot | null = null;
  let lastSignature = '';
  return {
    description: opts.dbPath,
    async load(): Promise<Snapshot> {
      const db = await openDb(opts.dbPath, { createIfMissing: false, logger: log });
      try {
        const store = new KeywordIndexStore(db, { logger: log });
        const items = await store.listGenerations('item');
        const queries = await store.listGenerations('query');
        const sel = selectGenerations(items, queries, opts.round);
        const signature = JSON.stringify([sel.item.generation, sel.query?.generation ?? null, items.map((g) => g.generation), queries.map((g) => g.generation)]);
        if (last && signature === lastSignature) return last;
        const next = new Map<string, KeywordView>();
        const view = async (side: 'item' | 'query', g: number): Promise<KeywordView> => {
          const key = `${side}:${g}`;
          const v = cache.get(key) ?? (await store.openView(side, g));
          next.set(key, v);
          return v;
        };
        const item = await view('item', sel.item.generation);
        const query = sel.query ? await view('query', sel.query.generation) : null;
        const older = items.filter((g) => g.generation <= sel.item.generation).slice(-historyLimit);
        const itemGenerations: KeywordView[] = [];
        for (const g of older) itemGenerations.push(g.generation === item.generation ? item : await view('item', g.generation));
        cache = next;
        const keywordSource = opts.keywordSource ? await opts.keywordSource({ round: sel.round, db, item }) : null;
        last = {
          round: sel.round,
          item,
          query,
          itemGenerations,
          generations: [...items, ...queries].map((g) => ({
            side: g.side,
            generation: g.generation,
            round: roundOf(g),
            entities: g.size,
            keywords: next.get(`${g.side}:${g.generation}`)?.numKeywords ?? null,
          })),
          fields,
          titles,
          keywordSource,
        };
        lastSignature = signature;
        return last;
      } finally {
        await db.close();
      }
    },
  };
}

/** Adapt a KeywordGenerator (embedded policy or LLM) to the search API's keyword source. */
export function generatorKeywordSource(gen: KeywordGenerator, opts: { temperature?: number; topP?: number; seed?: number } = {}): QueryKeywordSource {
  return {
    name: gen.kind,
    async keywords(text: string, signal: AbortSignal): Promise<string[]> {
      const out = await gen.generate('query', [{ id: 'http', text }], {
        samples: 1,
        temperature: opts.temperature ?? 0,
        ...(opts.topP !== undefined ? { topP: opts.topP } : {}),
        ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
        signal,
      });
      const s = out[0]?.[0];
      if (!s || s.format !== 'ok') throw cogrError('LLM_FORMAT', 'the generator output is not a keyword list');
      return s.keywords;
    },
  };
}
