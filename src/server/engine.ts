/**
 * One search-and-write interface for the engines a search server answers with, so that
 * every route of app.ts is written once:
 *
 *   memoryEngine   the served snapshot's item view in this process (the CoGR rule, the
 *                  run's ranker and floor from the query planner in the keyword workers)
 *   backendEngine  a search backend holding an exported generation (OpenSearch,
 *                  src/opensearch/backend.ts): the matched set and BM25 from it, the run's
 *                  floor and explanations from the in-memory view of the same generation
 *
 * Both answer a query text's keywords (`search`) and a Boolean program (`program`) with
 * the same shape, and make a committed catalog write searchable (`publish`): the memory
 * engine swaps in the snapshot of the new generation; the backend applies the same write
 * to its index first.
 */
import { cogrError } from '../../index/core/errors.ts';
import { topKIndex } from '../../index/view/topk.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { normalizeSelf } from '../../index/text/normalize.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import { explainJson, type ExplainJson, type RankingInfo } from './api.ts';
import {
  buildFieldIndex,
  explainProgramHits,
  fieldSets,
  positiveTerms,
  runProgram,
  type FieldIndex,
  type FieldPredicate,
  type ProgramNode,
  type ProgramTerms,
  type WorkMeter,
} from './program.ts';
import { LruCache } from './queryKeywords.ts';
import type { LiveSnapshot, Snapshot } from './state.ts';
import { VocabularyIndex } from './vocab.ts';

/** A matched set's size and its first items, best first. */
export interface RankedHits {
  matched: number;
  items: { id: string; score: number }[];
}

/**
 * A search engine holding an exported item generation (src/opensearch/backend.ts). The
 * query's keywords are still planned here; the engine applies the match rule and BM25 to them.
 */
export interface SearchBackend {
  /** Named in `ranking.chosen`. */
  readonly name: string;
  /** The item generation the engine serves (its index's record). */
  generation(): number;
  search(probe: { self: string; keywords: readonly string[] }, k: number): Promise<RankedHits>;
  /** POST /v1/search: a Boolean program's matched set and top k (src/opensearch/program.ts). */
  searchProgram(node: ProgramNode, terms: ProgramTerms, k: number): Promise<RankedHits>;
  /**
   * Apply a committed catalog write to the backend's index (atomically: searches see the
   * generation before it or the whole of it); absent → the backend cannot follow writes.
   */
  applyCatalog?(commit: CatalogPublish, source: Pick<Snapshot, 'item' | 'titles' | 'fields'>): Promise<void>;
}

/** A committed catalog write to make searchable: its generation, the one it was built on, and what it changed. */
export interface CatalogPublish {
  generation: number;
  base: number;
  /** Ids set to new keywords (added, updated or hand-set). */
  set: readonly string[];
  /** Ids removed. */
  removed: readonly string[];
}

/** A hit before the route adds the item's title and fields. */
export interface EngineHit {
  id: string;
  score: number;
  explain?: ExplainJson;
}

/** A query text's search: its resolved keywords and what to return. */
export interface TextSearch {
  snap: Snapshot;
  /** The live snapshot's version (caches are keyed by it). */
  version: number;
  text: string;
  keywords: string[];
  /** The text has no searchable term: nothing matches. */
  noTerms: boolean;
  k: number;
  explain: boolean;
}

export interface TextAnswer {
  generation: number;
  ranking?: RankingInfo;
  matched: number;
  items: EngineHit[];
}

/** A Boolean program's search: the program with its texts' keywords. */
export interface ProgramSearch {
  snap: Snapshot;
  program: ProgramNode;
  texts: string[];
  textKeywords: ReadonlyMap<string, readonly string[]>;
  noTerms: ReadonlySet<string>;
  k: number;
  explain: boolean;
  meter: WorkMeter;
}

export interface ProgramAnswer {
  generation: number;
  matched: number;
  rankingKeywords: string[];
  items: EngineHit[];
}

export interface SearchEngine {
  readonly name: string;
  search(q: TextSearch): Promise<TextAnswer>;
  program(q: ProgramSearch): Promise<ProgramAnswer>;
  /**
   * Make a committed catalog generation searchable: resolves once searches answer from it
   * (the memory engine's snapshot swapped in; a backend's index updated first), with the
   * item generation searches now use.
   */
  publish(commit: CatalogPublish): Promise<PublishOutcome>;
}

/** The item generation searches use after a publish, and why the snapshot could not be swapped when it could not. */
export interface PublishOutcome {
  generation: number;
  error?: { code: string; message: string };
}

/**
 * Per-snapshot look-up structures (vocabulary and field indexes, the top-k index), built when a snapshot
 * is loaded (before it is swapped in; the first one before the server is ready to listen),
 * never by the first request that needs them. The vocabulary look-up of a catalog write's
 * snapshot is built when `/v1/keywords` first asks for it instead (it takes longer than the
 * rest of a swap): until it is ready, `/v1/keywords` answers from the newest one that is, and
 * says which generation that is.
 */
export class SnapshotCaches {
  private readonly vocab = new WeakMap<KeywordView, Promise<VocabularyIndex>>();
  private readonly fields = new WeakMap<Snapshot, FieldIndex>();
  private readonly ready = new WeakMap<KeywordView, VocabularyIndex>();
  private latest: { view: KeywordView; index: VocabularyIndex } | null = null;
  async prepare(s: Snapshot): Promise<void> {
    this.fieldIndex(s);
    // Decode the string tables once now (ids, keywords, words), not in a request.
    s.item.ids();
    s.item.vocabulary();
    // The word postings and bounds of the pruned top k (index/view/topk.ts).
    topKIndex(s.item.data);
    // A catalog write's look-up is built when first asked for (a write stream would
    // otherwise rebuild it on the serving thread for every generation).
    if (!s.catalog || !this.latest) await this.vocabulary(s.item);
  }
  vocabulary(view: KeywordView): Promise<VocabularyIndex> {
    let v = this.vocab.get(view);
    if (!v) {
      this.vocab.set(
        view,
        (v = VocabularyIndex.build(view).then((index) => {
          this.ready.set(view, index);
          if (!this.latest || this.latest.view.generation <= view.generation) this.latest = { view, index };
          return index;
        })),
      );
    }
    return v;
  }
  /** The vocabulary look-up to answer with for a served view: its own, or while that is built, the newest one ready. */
  async lookupFor(view: KeywordView): Promise<{ generation: number; index: VocabularyIndex }> {
    const own = this.vocabulary(view);
    const done = this.ready.get(view);
    if (done) return { generation: view.generation, index: done };
    if (this.latest) return { generation: this.latest.view.generation, index: this.latest.index };
    return { generation: view.generation, index: await own };
  }
  fieldIndex(s: Snapshot): FieldIndex {
    let f = this.fields.get(s);
    if (!f) this.fields.set(s, (f = buildFieldIndex(s.item, s.fields)));
    return f;
  }
}

type Ranked = { set: RankedHits | null; info: RankingInfo };

/**
 * The served set ordered by the snapshot's ranker, with its floor (generators/planner/
 * ranking.ts), computed by the query planner in the keyword workers under the keyword
 * budget; `set` null (keyword-bag BM25 of the matched set, no floor) when the ranker is
 * keywords without a floor, the source cannot rank (LLM, none) or the budget ran out —
 * `info` says which ranker answered and why. Answers are cached per snapshot version,
 * text, keywords and k.
 */
export class ServedRanking {
  private readonly cache: LruCache<Ranked>;
  constructor(
    private readonly budgetMs: number,
    cacheSize: number,
  ) {
    this.cache = new LruCache<Ranked>(cacheSize);
  }

  async rank(snap: Snapshot, version: number, text: string, keywords: string[], k: number): Promise<Ranked> {
    // The same snapshot, text, keywords and k always rank the same: answers are cached like the keywords.
    const key = `${version}\u0000${normalizeSelf(text)}\u0000${keywords.join('\u0001')}\u0000${k}`;
    const hit = this.cache.get(key);
    if (hit) return hit;
    const out = await this.uncached(snap, text, keywords, k);
    if (out.set) this.cache.set(key, out);
    return out;
  }

  private async uncached(snap: Snapshot, text: string, keywords: string[], k: number): Promise<Ranked> {
    const r = snap.ranking;
    const info = (ranker: Ranker, fallback: string | null, reason: string | null): RankingInfo => ({
      ranker,
      chosen: r.source,
      floor: r.floor.floor,
      ...(r.floor.backfill ? { backfill: r.floor.backfill } : {}),
      fallback,
      ...(r.floor.modelAlpha !== undefined && reason === null ? { modelAlpha: r.floor.modelAlpha } : {}),
      ...(r.floor.cut && r.floor.modelAlpha === undefined && reason === null ? { cut: true } : {}),
      ...(reason ? { reason } : {}),
    });
    const src = snap.keywordSource;
    if (r.ranker === 'keywords' && r.floor.floor === 0 && r.floor.fallback === 0 && r.floor.modelAlpha === undefined && !r.floor.cut)
      return { set: null, info: info('keywords', null, null) };
    if (!src?.rank)
      return {
        set: null,
        info: info('keywords', null, `the ${src?.name ?? 'raw-query'} keyword source cannot rank by ${r.ranker}: keyword-bag BM25`),
      };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.budgetMs);
    try {
      const out = await src.rank({ text, keywords, ranker: r.ranker, floor: r.floor, limit: k }, controller.signal);
      const items = out.ordinals.map((o, i) => ({ id: snap.item.id(o), score: out.scores[i] }));
      return { set: { matched: out.matched, items }, info: info(r.ranker, out.fallback, null) };
    } catch (e) {
      return {
        set: null,
        info: info('keywords', null, `ranking by ${r.ranker} failed (${e instanceof Error ? e.message : String(e)}): keyword-bag BM25`),
      };
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * Reload the live snapshot until it serves `generation` or a newer one (a reload already in
 * flight when the generation was committed may not have seen it; the next one does): the item
 * generation it serves after, and why a reload failed when one did.
 */
async function reloadServed(live: LiveSnapshot, generation: number): Promise<PublishOutcome> {
  for (let i = 0; i < 3 && live.get().item.generation < generation; i++) {
    const out = await live.reload();
    if (out.error) return { generation: live.get().item.generation, error: out.error };
  }
  return { generation: live.get().item.generation };
}

/** The snapshot's item view answers: the in-memory engine. */
export function memoryEngine(live: LiveSnapshot, ranking: ServedRanking, caches: SnapshotCaches): SearchEngine {
  return {
    name: 'memory',
    async search(q) {
      const { snap } = q;
      const probe = { self: q.text, keywords: q.keywords };
      // The served set's order and floor (the run's choice): from the planner in the keyword workers, else keyword-bag BM25.
      const ranked = q.noTerms ? null : await ranking.rank(snap, q.version, q.text, q.keywords, q.k);
      const res: RankedHits = ranked === null ? { matched: 0, items: [] } : (ranked.set ?? snap.item.search(probe, { k: q.k }));
      return {
        generation: snap.item.generation,
        ...(ranked ? { ranking: ranked.info } : {}),
        matched: res.matched,
        items: res.items.map((h) => {
          const ex = q.explain ? snap.item.explain(probe, h.id) : null;
          if (!ex) return h;
          const ranker = ranked ? { ranking: { ranker: ranked.info.ranker, score: h.score, keywordScore: ex.score } } : {};
          return { ...h, explain: { ...explainJson(ex), ...ranker } };
        }),
      };
    },
    async program(q) {
      const { snap } = q;
      const result = await runProgram(
        q.program,
        { view: snap.item, fieldIndex: caches.fieldIndex(snap), textKeywords: q.textKeywords, noTerms: q.noTerms },
        q.k,
        q.meter,
      );
      const explained = q.explain ? await explainProgramHits(snap.item, result, q.meter) : null;
      return {
        generation: snap.item.generation,
        matched: result.matched,
        rankingKeywords: result.rankingKeywords,
        items: result.items.map((h, i) => {
          const ex = explained ? explained[i] : null;
          return { id: h.id, score: h.score, ...(ex ? { explain: explainJson(ex) } : {}) };
        }),
      };
    },
    publish: (commit) => reloadServed(live, commit.generation),
  };
}

/**
 * A search backend answers the matched sets and their BM25 (the same response shape);
 * the run's empty-plan floor, the relevance model's own sets and explanations come from
 * the in-memory view when it holds the backend's generation.
 */
export function backendEngine(backend: SearchBackend, live: LiveSnapshot, ranking: ServedRanking, caches: SnapshotCaches): SearchEngine {
  return {
    name: backend.name,
    async search(q) {
      const { snap } = q;
      const probe = { self: q.text, keywords: q.keywords };
      let res: RankedHits = q.noTerms ? { matched: 0, items: [] } : await backend.search(probe, q.k);
      const generation = backend.generation();
      const local = generation === snap.item.generation;
      let info: RankingInfo = { ranker: 'keywords', chosen: backend.name, floor: 0, fallback: null };
      // Keywords that match nothing: the run's empty-plan floor (the top c items by p, in the
      // run's ranker order), computed here from the same generation, as cogr serve serves it.
      // A run whose set guard chose the relevance model's own sets serves them the same way, and
      // so does a run that cuts its matched sets (--cut).
      const modelSets = snap.ranking.floor.modelAlpha !== undefined || snap.ranking.floor.cut === true;
      if ((res.matched === 0 || modelSets) && !q.noTerms && local && (snap.ranking.floor.fallback > 0 || modelSets)) {
        const floor = await ranking.rank(snap, q.version, q.text, q.keywords, q.k);
        if (floor.set && (floor.info.fallback === 'empty_plan' || floor.info.modelAlpha !== undefined || floor.info.cut)) {
          res = floor.set;
          const what =
            floor.info.modelAlpha !== undefined
              ? "the relevance model's own sets"
              : floor.info.fallback === 'empty_plan'
                ? 'empty-plan floor'
                : 'matched sets cut by p';
          info = { ...floor.info, chosen: `${backend.name} (${what}: ${floor.info.chosen})` };
        }
      }
      return {
        generation,
        ranking: local
          ? info
          : {
              ...info,
              reason: `the backend serves item generation ${generation}, this server's planner generation ${snap.item.generation}`,
            },
        matched: res.matched,
        items: res.items.map((h) => {
          const ex = q.explain && local ? snap.item.explain(probe, h.id) : null;
          return ex ? { ...h, explain: explainJson(ex) } : h;
        }),
      };
    },
    async program(q) {
      const { snap } = q;
      // Field predicates are evaluated on the served dataset's fields here and sent as ids.
      const fieldIndex = caches.fieldIndex(snap);
      const fieldIds = (f: FieldPredicate, path: string): string[] => {
        const ids = new Set<string>();
        for (const s of fieldSets(fieldIndex, f, path).sets) for (const o of s) ids.add(snap.item.id(o));
        return [...ids];
      };
      const res = await backend.searchProgram(q.program, { textKeywords: q.textKeywords, noTerms: q.noTerms, fieldIds }, q.k);
      const { keywords: rankingKeywords } = positiveTerms(q.program, { textKeywords: q.textKeywords });
      const local = backend.generation() === snap.item.generation;
      const explained =
        q.explain && local
          ? await explainProgramHits(
              snap.item,
              {
                matched: res.matched,
                items: res.items.map((h) => ({ ...h, ordinal: snap.item.ordinalOf(h.id) })),
                rankingKeywords,
                rankingTexts: q.texts,
              },
              q.meter,
            )
          : null;
      return {
        generation: backend.generation(),
        matched: res.matched,
        rankingKeywords,
        items: res.items.map((h, i) => {
          const ex = explained ? explained[i] : null;
          return ex ? { ...h, explain: explainJson(ex) } : h;
        }),
      };
    },
    async publish(commit) {
      if (!backend.applyCatalog) throw cogrError('NOT_IMPLEMENTED', `the ${backend.name} backend cannot follow catalog writes`);
      // The in-memory snapshot first (the query planner plans on it, and it holds the new
      // generation's view and items), then the backend's index, swapped in one step.
      const local = await reloadServed(live, commit.generation);
      if (local.error || local.generation !== commit.generation) return local;
      await backend.applyCatalog(commit, live.get());
      return { generation: backend.generation() };
    },
  };
}
