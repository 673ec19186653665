/**
 * The real `SnapshotLoader`: reads the generations to serve from the published
 * generation files (index/store/published.ts) into memory, never opening the LevelDB, so that
 * any number of servers run beside the one writer (the co-evolution loop, `cogr
 * import-generation`, `cogr index import`) and see each generation it commits. Every file
 * is checked on open; generations are immutable, so a view read once is reused across
 * reloads.
 *
 * Round selection: a generation's round is `meta.round` (a number) as recorded by the
 * writer. `round: 'latest'` serves the newest item generation (and the newest query
 * generation); `round: n` serves the newest item generation with meta.round = n and the
 * newest query generation with meta.round ≤ n (NOT_FOUND when no item generation has
 * round n). `round: 'best'` serves what the co-evolution run stored beside the generations
 * (its published run.json) chose on its dev queries: the best adopted step's item and query
 * generations and the query planner of that step (`bestServing`); a database without a
 * run (generations imported by hand) or without an adopted step serves the latest.
 *
 * A generation whose files fail their check (DB_CORRUPT, DB_VERSION) is never served as
 * if it were the newest: with `round: 'latest'` the newest generation that passes is
 * served and the snapshot says which one and why (`served.reason`, `/health`,
 * `/v1/generations`); with a pinned round whose generation fails, the load fails.
 */
import { readdir } from 'node:fs/promises';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { silentLogger } from '../../index/core/log.ts';
import {
  PublishedIndex,
  publishedDir,
  type GenerationManifest,
  type GenerationInfo as StoreGenerationInfo,
} from '../../index/store/published.ts';
import type { Corpus, Item, Side } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import type { KeywordGenerator, KeyValueStore } from '../../generators/types.ts';
import { publishedPolicyStore } from '../run/published.ts';
import { bestServing, readRunAt } from '../run/state.ts';
import { NO_FLOOR } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import type { GenerationProblem, QueryKeywordSource, Snapshot, SnapshotLoader } from './state.ts';

export type RoundSelector = number | 'latest' | 'best';

export interface KeywordSourceContext {
  round: number | null;
  /** The query planner round to serve, when the selection fixed it ('best'); else the round's or the newest before it. */
  plannerRound?: number;
  /** The published policies of the database (read-only). */
  policies: KeyValueStore;
  /** The served item view (its arrays on SharedArrayBuffer). */
  item: KeywordView;
  /** The dataset's items, when the server knows its dataset. */
  items: readonly Item[] | null;
}

export interface StoreLoaderOptions {
  dbPath: string;
  round: RoundSelector;
  /** Item fields and titles from the dataset the index was built from. */
  corpus?: Pick<Corpus, 'items'>;
  /** How many item generations (newest first) to hold for `/v1/items/:id`. */
  historyLimit?: number;
  /** Chooses the query-side keyword source for the served round, with the served item view. */
  keywordSource?: (ctx: KeywordSourceContext) => QueryKeywordSource | null | Promise<QueryKeywordSource | null>;
  /** How `/v1/search` ranks: 'auto' (default: the stored run's choice at SFT, keywords without one) or a ranker. */
  rank?: Ranker | 'auto';
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
  round: number | 'latest' | { best: { step: string; round: number; itemGeneration: number; queryGeneration: number } },
): { item: StoreGenerationInfo; query: StoreGenerationInfo | null; round: number | null } {
  if (items.length === 0)
    throw cogrError(
      'NOT_FOUND',
      'the database has no item generation to serve (run `cogr demo`, `cogr evolve` or `cogr index import` first)',
    );
  if (typeof round === 'object') {
    const b = round.best;
    const item = items.find((g) => g.generation === b.itemGeneration);
    if (!item)
      throw cogrError(
        'NOT_FOUND',
        `round best: the run's best step ${b.step} uses item generation ${b.itemGeneration}, which is not published`,
      );
    return { item, query: queries.find((g) => g.generation === b.queryGeneration) ?? null, round: b.round };
  }
  if (round === 'latest') {
    const item = items[items.length - 1];
    return { item, query: queries.length ? queries[queries.length - 1] : null, round: roundOf(item) };
  }
  const matching = items.filter((g) => roundOf(g) === round);
  if (matching.length === 0) {
    const known = [...new Set(items.map(roundOf).filter((r): r is number => r !== null))].sort((a, b) => a - b);
    throw cogrError(
      'NOT_FOUND',
      `round: no item generation of round ${round} (rounds: ${known.length ? known.join(', ') : 'none recorded'})`,
      { round },
    );
  }
  const qs = queries.filter((g) => {
    const r = roundOf(g);
    return r !== null && r <= round;
  });
  return { item: matching[matching.length - 1], query: qs.length ? qs[qs.length - 1] : null, round };
}

function problemOf(side: Side, generation: number, e: unknown): GenerationProblem | null {
  if (isCogrError(e, 'DB_CORRUPT') || isCogrError(e, 'DB_VERSION')) return { side, generation, code: e.code, message: e.message };
  return null;
}

export function storeSnapshotLoader(opts: StoreLoaderOptions): SnapshotLoader {
  const log = opts.log ?? silentLogger;
  const historyLimit = opts.historyLimit ?? 8;
  const fields = new Map<string, Readonly<Record<string, string>>>();
  const titles = new Map<string, string>();
  const texts = new Map<string, string>();
  for (const it of opts.corpus?.items ?? []) {
    if (it.fields && Object.keys(it.fields).length > 0) fields.set(it.id, it.fields);
    if (it.title) titles.set(it.id, it.title);
    texts.set(it.id, it.text);
  }
  const files = new PublishedIndex(opts.dbPath);
  const policies = publishedPolicyStore(opts.dbPath);
  // Generations are immutable: checked manifests and views are kept across reloads.
  const infos = new Map<string, GenerationManifest>();
  let views = new Map<string, KeywordView>();
  let last: Snapshot | null = null;
  let lastSignature = '';

  /** Checked infos of a side, and the generations whose manifests fail their check. */
  const scan = async (side: Side, problems: GenerationProblem[]): Promise<GenerationManifest[]> => {
    const out: GenerationManifest[] = [];
    for (const g of await files.numbers(side)) {
      const key = `${side}:${g}`;
      let info = infos.get(key);
      if (!info) {
        try {
          info = await files.manifest(side, g);
        } catch (e) {
          if (isCogrError(e, 'NOT_FOUND')) continue;
          const p = problemOf(side, g, e);
          if (!p) throw e;
          problems.push(p);
          continue;
        }
        infos.set(key, info);
      }
      out.push(info);
    }
    return out;
  };

  return {
    description: opts.dbPath,
    watchPath: publishedDir(opts.dbPath),
    async load(): Promise<Snapshot> {
      await files.checkExists();
      const problems: GenerationProblem[] = [];
      let items = await scan('item', problems);
      let queries = await scan('query', problems);
      const policyFiles = (await readdir(publishedDir(opts.dbPath))).filter((f) => f.startsWith('policy-')).sort();
      const next = new Map<string, KeywordView>();
      const view = async (side: Side, g: number): Promise<KeywordView> => {
        const key = `${side}:${g}`;
        // Shared memory: the off-loop keyword workers read the served view without a copy.
        const v = views.get(key) ?? (await files.openView(side, g, { shared: true }));
        next.set(key, v);
        return v;
      };
      // A selected generation whose files fail their check is set aside and the selection
      // made again (serving the latest), or the load fails (a pinned round).
      const checked = async (side: Side, g: GenerationManifest, problems: GenerationProblem[]): Promise<KeywordView | null> => {
        try {
          return await view(side, g.generation);
        } catch (e) {
          const p = problemOf(side, g.generation, e);
          if (!p || selector !== 'latest') throw e;
          problems.push(p);
          return null;
        }
      };
      // 'best': the run's choice on its dev queries (the published run state), else the latest.
      let selector: Parameters<typeof selectGenerations>[2] = opts.round === 'best' ? 'latest' : opts.round;
      let plannerRound: number | undefined;
      const run = await readRunAt(opts.dbPath);
      // The run's ranker and set floor, chosen at SFT (runs written before them: keywords, no floor).
      const sft = run?.steps.find((s) => s.phase === 'sft');
      const asked = opts.rank ?? 'auto';
      const runRanking = {
        ranker: asked === 'auto' ? (sft?.rank?.served ?? 'keywords') : asked,
        floor: sft?.floor ? { floor: sft.floor.floor, fallback: sft.floor.fallback, backfill: sft.floor.backfill ?? 0 } : NO_FLOOR,
        source: asked === 'auto' ? (sft?.rank ? 'run' : 'default') : 'flag',
      };
      if (opts.round === 'best') {
        const best = run ? bestServing(run.steps) : null;
        if (best) {
          selector = { best };
          plannerRound = best.plannerRound;
        }
      }
      for (;;) {
        const sel = selectGenerations(items, queries, selector);
        const item = await checked('item', sel.item as GenerationManifest, problems);
        if (!item) {
          items = items.filter((g) => g !== sel.item);
          continue;
        }
        const query = sel.query ? await checked('query', sel.query as GenerationManifest, problems) : null;
        if (sel.query && !query) {
          queries = queries.filter((g) => g !== sel.query);
          continue;
        }
        // A run whose set guard chose the relevance model's own sets serves them for its refit's item generation.
        const served = run?.steps.find((s) => s.phase === 'refit' && s.itemGeneration === sel.item.generation)?.refit?.served;
        const ranking =
          served?.set === 'model' && served.alpha !== undefined
            ? { ...runRanking, floor: { ...runRanking.floor, modelAlpha: served.alpha } }
            : runRanking;
        const signature = JSON.stringify([
          ranking,
          plannerRound ?? null,
          sel.item.generation,
          sel.query?.generation ?? null,
          items.map((g) => g.generation),
          queries.map((g) => g.generation),
          problems,
          policyFiles,
        ]);
        if (last && signature === lastSignature) return last;
        const older = items.filter((g) => g.generation <= sel.item.generation).slice(-historyLimit);
        const itemGenerations: KeywordView[] = [];
        for (const g of older) {
          if (g.generation === item.generation) {
            itemGenerations.push(item);
            continue;
          }
          try {
            itemGenerations.push(await view('item', g.generation));
          } catch (e) {
            const p = problemOf('item', g.generation, e);
            if (!p) throw e;
            problems.push(p);
          }
        }
        views = next;
        const keywordSource = opts.keywordSource
          ? await opts.keywordSource({
              round: sel.round,
              ...(plannerRound !== undefined ? { plannerRound } : {}),
              policies,
              item,
              items: opts.corpus?.items ?? null,
            })
          : null;
        const newer = problems.filter((p) => p.generation > (p.side === 'item' ? item.generation : (query?.generation ?? -1)));
        const reason = newer.length
          ? `${newer.map((p) => `${p.side} generation ${p.generation} failed its check (${p.message})`).join('; ')}; serving item generation ${item.generation}${query ? `, query generation ${query.generation}` : ''} instead`
          : null;
        if (reason) log.warn(reason);
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
            keywords: g.vocabulary,
          })),
          problems,
          reason,
          fields,
          titles,
          texts,
          handSet: new Map(),
          keywordSource,
          ranking,
        };
        lastSignature = signature;
        return last;
      }
    },
  };
}

/** Adapt a KeywordGenerator (embedded policy or LLM) to the search API's keyword source. */
export function generatorKeywordSource(
  gen: KeywordGenerator,
  opts: { temperature?: number; topP?: number; seed?: number } = {},
): QueryKeywordSource {
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
