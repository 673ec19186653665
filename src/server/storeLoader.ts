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
 * run (generations imported by hand) or without an adopted step serves the latest
 * (src/catalog/served.ts). Of the selected item generation, the catalog's newest generation
 * on it is served, with the catalog's documents over the dataset's and its hand-set
 * keywords (src/catalog/state.ts); one whose files or catalog fail their check is set aside
 * for the one before it.
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
import { coreIds, readRunAt, servedFloor, type StoredRun } from '../run/state.ts';
import type { ServedJudgements } from '../catalog/preview.ts';
import { resolveSelector, selectGenerations, servedHead, type RoundSelector } from '../catalog/served.ts';
import { catalogItems, OverlayMap, PublishedCatalog, type CatalogState } from '../catalog/state.ts';
import { NO_FLOOR } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import type { GenerationProblem, QueryKeywordSource, Snapshot, SnapshotLoader } from './state.ts';

export interface KeywordSourceContext {
  round: number | null;
  /** The query planner round to serve, when the selection fixed it ('best'); else the round's or the newest before it. */
  plannerRound?: number;
  /** The published policies of the database (read-only). */
  policies: KeyValueStore;
  /** The served item view (its arrays on SharedArrayBuffer). */
  item: KeywordView;
  /** The items the planner's relevance model is built over (the dataset's, as the catalog had them), when the server knows its dataset. */
  items: readonly Item[] | null;
  /** Names those items: the same key, the same items (a relevance model built over them is reused). */
  itemsKey: string;
}

export interface StoreLoaderOptions {
  dbPath: string;
  round: RoundSelector;
  /** Item fields, titles and texts from the dataset the index was built from, and its judgements (keyword previews). */
  corpus?: Pick<Corpus, 'items'> & Partial<Pick<Corpus, 'relevant'>>;
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

function problemOf(side: Side, generation: number, e: unknown): GenerationProblem | null {
  if (isCogrError(e, 'DB_CORRUPT') || isCogrError(e, 'DB_VERSION')) return { side, generation, code: e.code, message: e.message };
  return null;
}

/** The dataset's maps of item titles, fields and texts with the catalog's changes on top. */
function catalogMaps(
  base: {
    titles: ReadonlyMap<string, string>;
    fields: ReadonlyMap<string, Readonly<Record<string, string>>>;
    texts: ReadonlyMap<string, string>;
  },
  state: CatalogState,
): Pick<Snapshot, 'titles' | 'fields' | 'texts' | 'handSet'> {
  if (state.docs.size === 0) return { ...base, handSet: state.handSet };
  const titles = new Map<string, string | undefined>();
  const fields = new Map<string, Readonly<Record<string, string>> | undefined>();
  const texts = new Map<string, string | undefined>();
  for (const [id, d] of state.docs) {
    titles.set(id, d?.title || undefined);
    fields.set(id, d?.fields && Object.keys(d.fields).length > 0 ? d.fields : undefined);
    texts.set(id, d?.text);
  }
  return {
    titles: new OverlayMap(base.titles, titles),
    fields: new OverlayMap(base.fields, fields),
    texts: new OverlayMap(base.texts, texts),
    handSet: state.handSet,
  };
}

/** The run's core training queries' judgements (what its item half-rounds count), when the dataset's judgements are known. */
function runJudgements(run: StoredRun | null, relevant: Corpus['relevant'] | undefined): ServedJudgements | null {
  if (!run || !relevant) return null;
  const counted = new Set(coreIds(run.split));
  const core = new Map<string, ReadonlySet<string>>();
  for (const id of counted) core.set(id, relevant.get(id) ?? new Set());
  return { relevant: core, counted, kMax: run.config.kMax, beta: run.config.beta };
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
  const catalog = new PublishedCatalog(opts.dbPath);
  /** The items the planner's relevance model is built over, as of the catalog's delta `docsSeq` of `root`. */
  let plannerItems: { root: number; docsSeq: number; items: readonly Item[] | null; key: string } | null = null;
  let judged: { key: string; judgements: ServedJudgements | null } | null = null;
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
    async load(loadOpts: { refresh?: boolean } = {}): Promise<Snapshot> {
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
      const checked = async (
        side: Side,
        g: GenerationManifest,
        problems: GenerationProblem[],
        catalogGeneration = false,
      ): Promise<KeywordView | null> => {
        try {
          return await view(side, g.generation);
        } catch (e) {
          const p = problemOf(side, g.generation, e);
          if (!p || (selector !== 'latest' && !catalogGeneration)) throw e;
          problems.push(p);
          return null;
        }
      };
      const run = await readRunAt(opts.dbPath);
      // 'best': the run's choice on its dev queries (the published run state), else the latest.
      const { selector, plannerRound } = resolveSelector(run, opts.round);
      // The run's ranker and set floor, chosen at SFT (runs written before them: keywords, no floor).
      const sft = run?.steps.find((s) => s.phase === 'sft');
      const asked = opts.rank ?? 'auto';
      const runRanking = {
        ranker: asked === 'auto' ? (sft?.rank?.served ?? 'keywords') : asked,
        // The SFT step's floor, depth and cut; the set guard's α is added below, per item generation.
        floor: run ? servedFloor(run.steps, null) : NO_FLOOR,
        source: asked === 'auto' ? (sft?.rank ? 'run' : 'default') : 'flag',
      };
      for (;;) {
        const sel = selectGenerations(items, queries, selector);
        // The catalog's newest generation on the selected one is served; one whose files or
        // catalog fail their check is set aside for the one before it.
        const { root, head } = servedHead(items, sel.item);
        let state: CatalogState | null = null;
        const item = head === sel.item ? await checked('item', head, problems) : await checked('item', head, problems, true);
        if (item) {
          try {
            state = await catalog.stateOf(head);
          } catch (e) {
            const p = problemOf('item', head.generation, e);
            if (!p) throw e;
            problems.push(p);
          }
        }
        if (!item || !state) {
          items = items.filter((g) => g !== head);
          continue;
        }
        const query = sel.query ? await checked('query', sel.query as GenerationManifest, problems) : null;
        if (sel.query && !query) {
          queries = queries.filter((g) => g !== sel.query);
          continue;
        }
        // A run whose set guard chose the relevance model's own sets serves them for its refit's item generation.
        const served = run?.steps.find((s) => s.phase === 'refit' && s.itemGeneration === root)?.refit?.served;
        const ranking =
          served?.set === 'model' && served.alpha !== undefined
            ? { ...runRanking, floor: { ...runRanking.floor, modelAlpha: served.alpha } }
            : runRanking;
        const signature = JSON.stringify([
          ranking,
          plannerRound ?? null,
          head.generation,
          loadOpts.refresh === true && plannerItems !== null && plannerItems.docsSeq < state.docsSeq,
          sel.query?.generation ?? null,
          items.map((g) => g.generation),
          queries.map((g) => g.generation),
          problems,
          policyFiles,
        ]);
        if (last && signature === lastSignature) return last;
        const older = items.filter((g) => g.generation <= head.generation).slice(-historyLimit);
        const itemGenerations: KeywordView[] = [];
        for (const g of older) {
          if (g.generation === item.generation) {
            itemGenerations.push(item);
            continue;
          }
          try {
            itemGenerations.push(await view('item', g.generation));
          } catch (e) {
            // An older generation deleted since the scan (a catalog writer prunes its own) is left out.
            if (isCogrError(e, 'NOT_FOUND')) continue;
            const p = problemOf('item', g.generation, e);
            if (!p) throw e;
            problems.push(p);
          }
        }
        views = next;
        // The planner's relevance model is rebuilt over the catalog's items on a new root, on
        // the first load and on a refresh; a catalog write alone keeps the items it has (the
        // model is reused, so the write is served at once) and the snapshot says they lag.
        const dataset = opts.corpus?.items ?? null;
        if (!plannerItems || plannerItems.root !== root || !last || loadOpts.refresh)
          plannerItems = {
            root,
            docsSeq: state.docsSeq,
            items: dataset ? catalogItems(dataset, state) : null,
            key: `${root}:${state.docsSeq}`,
          };
        const keywordSource = opts.keywordSource
          ? await opts.keywordSource({
              round: sel.round,
              ...(plannerRound !== undefined ? { plannerRound } : {}),
              policies,
              item,
              items: plannerItems.items,
              itemsKey: plannerItems.key,
            })
          : null;
        const judgedKey = run ? JSON.stringify([run.split, run.config.kMax, run.config.beta]) : '';
        if (!judged || judged.key !== judgedKey) judged = { key: judgedKey, judgements: runJudgements(run, opts.corpus?.relevant) };
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
          ...catalogMaps({ titles, fields, texts }, state),
          catalog:
            state.deltas > 0 ? { root, seq: state.seq, plannerStale: dataset !== null && plannerItems.docsSeq < state.docsSeq } : null,
          keywordSource,
          keywordEpoch: JSON.stringify([
            ranking,
            plannerRound ?? null,
            sel.round,
            root,
            query?.generation ?? null,
            policyFiles,
            plannerItems.key,
          ]),
          ranking,
          judgements: judged.judgements,
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
