/**
 * A run opened for work: the one place that turns a project database and its dataset into
 * what a step, a rollout or an import works with.
 *
 *   runContext       the run's store, policy store, state, split and the queries and
 *                    judgements of each part of it (core training, dev, held-out); the loop
 *                    builds it once it has checked or written the config and the split
 *   openRun          the same for a stored run (config, split and steps read back, its data
 *                    checked against the run's fingerprint first)
 *   runPlanner       a saved query planner of the run over its items, all planners of one
 *                    run sharing one relevance model (same training judgements)
 *   frozenHalfRound  what half-round `r<round>-<side>` trains against: the frozen
 *                    generations of the step it builds on, the generators it starts from
 *                    (the item policy with the query side's offers), and the side's reward
 *                    scorer over the core training queries
 *
 * Leakage: only the core training queries (outside the dev split) and their judgements
 * reach the generators, the offers and the scorers built here; dev and held-out queries are
 * handed out for evaluation only.
 */
import type { CogrDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { normalizeKeyword } from '../../index/text/normalize.ts';
import type { Corpus, Item, Query, Side } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { EmbeddedPolicy } from '../../generators/policy/model.ts';
import type { QueryOffer, QuerySide } from '../../generators/policy/candidates.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import { topByP } from '../../generators/planner/queryContext.ts';
import type { RelevanceModel } from '../../generators/planner/relevance.ts';
import { queryInput } from '../../generators/sft.ts';
import type { KeyValueStore } from '../../generators/types.ts';
import { createItemScorer, createQueryScorer, type ItemScorer, type QueryScorer } from '../../rewards/scorer.ts';
import { scorerOptions, type RunConfig } from './config.ts';
import { loadPlanner, loadPolicy, policyStore } from './policies.ts';
import {
  checkStoredRunData,
  coreIds,
  frozenFor,
  readStoredRun,
  RunState,
  type RunSplit,
  type StepRecord,
  type StoredRun,
} from './state.ts';

/** A run's data and stores, as every path that works on a run sees them. */
export interface RunContext {
  db: CogrDb;
  store: KeywordIndexStore;
  policies: KeyValueStore;
  state: RunState;
  corpus: Corpus;
  config: RunConfig;
  split: RunSplit;
  /** Training queries outside the dev split: the only queries anything is trained on. */
  coreQueries: Query[];
  devQueries: Query[];
  evalQueries: Query[];
  /** Judgements of the core training queries only. */
  coreRelevant: Map<string, Set<string>>;
  /** The relevance model of the planners loaded through `runPlanner` (one set of training judgements: its indexes and features are reused). */
  relevance: RelevanceModel | null;
}

/** A stored run opened: its context and its committed steps. */
export interface OpenRun extends RunContext {
  steps: StepRecord[];
}

/** The context of a run whose config and split are known (the loop checked or wrote them). */
export function runContext(
  db: CogrDb,
  corpus: Corpus,
  config: RunConfig,
  split: RunSplit,
  opts: { state?: RunState; logger?: Logger } = {},
): RunContext {
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  const pick = (ids: readonly string[]) => ids.map((id) => byId.get(id)).filter((q): q is Query => q !== undefined);
  const coreQueries = pick(coreIds(split));
  const devQueries = pick(split.dev);
  const evalQueries = pick(split.eval);
  if (coreQueries.length + devQueries.length !== split.train.length || evalQueries.length !== split.eval.length) {
    throw cogrError('DB_CORRUPT', `the stored split of ${db.path} names queries that dataset ${corpus.name} does not have`);
  }
  const coreRelevant = new Map<string, Set<string>>();
  for (const q of coreQueries) coreRelevant.set(q.id, new Set(corpus.relevant.get(q.id) ?? []));
  return {
    db,
    store: new KeywordIndexStore(db, opts.logger ? { logger: opts.logger } : {}),
    policies: policyStore(db),
    state: opts.state ?? new RunState(db),
    corpus,
    config,
    split,
    coreQueries,
    devQueries,
    evalQueries,
    coreRelevant,
    relevance: null,
  };
}

/**
 * The co-evolution run stored in `db` over `corpus`: NOT_FOUND when the database holds none,
 * INVALID_ARGUMENT when the data differs from the run's (fingerprint.ts), before anything is
 * written. `stored`: the run as `readStoredRun(db)` already read it (a caller that needed its
 * config to load the corpus), so it is not read twice.
 */
export async function openRun(db: CogrDb, corpus: Corpus, stored?: StoredRun): Promise<OpenRun> {
  const run = stored ?? (await readStoredRun(db));
  await checkStoredRunData(db, run, corpus);
  return { ...runContext(db, corpus, run.config, run.split), steps: run.steps };
}

/** A saved planner of the run (`'latest'`: the highest saved round), reusing the run's relevance model. */
export async function runPlanner(run: RunContext, round: number | 'latest'): Promise<KeywordPlanner> {
  const planner = await loadPlanner(run.policies, round, run.corpus.items, run.relevance);
  run.relevance = planner.relevance as RelevanceModel;
  return planner;
}

/** What a half-round of a stored run trains against, and starts from. */
export interface FrozenHalfRound {
  /** The step it builds on (the last adopted one before it). */
  base: string;
  /** The frozen item generation. */
  itemView: KeywordView;
  /** The frozen query generation (item side; null on the query side). */
  queryView: KeywordView | null;
  /** The query planner it starts from (query side) or that made the frozen query side (item side), attached to `itemView`. */
  planner: KeywordPlanner;
  /** The item policy it starts from, attached to `queryView` with the query side's offers (item side only). */
  itemPolicy(): Promise<EmbeddedPolicy>;
  /** The side's layered reward against the frozen generations, over the core training queries (each scored as held out on the query side). */
  scorer: QueryScorer | ItemScorer;
}

/** Half-round `r<round>-<side>` of a stored run: its frozen generations, generators and scorer. */
export async function frozenHalfRound(run: OpenRun, side: Side, round: number): Promise<FrozenHalfRound> {
  const frozen = frozenFor(run, side, round);
  const itemView = await run.store.openView('item', frozen.itemGeneration);
  const queryView = frozen.queryGeneration === null ? null : await run.store.openView('query', frozen.queryGeneration);
  const planner = await runPlanner(run, frozen.plannerRound);
  planner.attachOpposite(itemView);
  const scorer =
    queryView === null
      ? heldOutQueryScorer(itemView, run.coreQueries, run.coreRelevant, planner, run.config)
      : createItemScorer(
          itemView,
          queryView,
          { relevant: run.coreRelevant, counted: new Set(run.coreQueries.map((q) => q.id)) },
          scorerOptions(run.config),
        );
  return {
    base: frozen.base,
    itemView,
    queryView,
    planner,
    async itemPolicy() {
      if (queryView === null) throw cogrError('INTERNAL', 'a query half-round starts from no item policy');
      const policy = await loadPolicy(run.policies, 'item', frozen.itemPolicyRound);
      policy.attachOpposite(queryView);
      policy.attachQuerySide(queryOffers(offerSource(run), planner, queryView));
      return policy;
    },
    scorer,
  };
}

/** What `queryOffers` needs of a run. */
export interface OfferSource {
  items: readonly Item[];
  /** The training queries the query generation holds (outside the dev split) and their judgements. */
  queries: readonly Query[];
  relevant: ReadonlyMap<string, ReadonlySet<string>>;
  config: Pick<RunConfig, 'itemQuerySide' | 'itemRankDepth'>;
}

/** A run's offer source: its items, and its core training queries (or `queries`, a part of them) with their judgements. */
export function offerSource(run: RunContext, queries: readonly Query[] = run.coreQueries): OfferSource {
  return { items: run.corpus.items, queries, relevant: run.coreRelevant, config: run.config };
}

/**
 * What the frozen query generation offers each item: for every training query that judges
 * the item relevant or ranks it among its top `itemRankDepth` items by relevance (the
 * planner's p, the query planned as held out), the query's name (its string when within
 * the keyword limits, else its label) or, with itemQuerySide 'keywords', every keyword of
 * its set; with how many judging and high-ranking queries offer each keyword and the share
 * of the keyword's carriers in the query generation that judge the item relevant.
 */
export function queryOffers(src: OfferSource, planner: KeywordPlanner, queryView: KeywordView): QuerySide {
  const { config } = src;
  const offered = new Map<string, Map<string, QueryOffer>>();
  const carriers = (keyword: string) => {
    const o = queryView.ordinalOfKeyword(keyword);
    return o < 0 ? 0 : queryView.keywordDf(o);
  };
  const offer = (itemId: string, q: Query, field: 'judged' | 'ranked') => {
    let keywords: string[];
    if (config.itemQuerySide === 'labels') {
      const name = planner.label(q.text) ?? normalizeKeyword(q.text);
      keywords = name === null ? [] : [name];
    } else {
      const o = queryView.ordinalOf(q.id);
      keywords = o < 0 ? [] : queryView.keywordsOf(o);
    }
    let m = offered.get(itemId);
    if (!m) offered.set(itemId, (m = new Map()));
    for (const k of keywords) {
      const key = queryView.keyOf(k);
      if (key === null) continue;
      let x = m.get(key);
      if (!x) m.set(key, (x = { keyword: k, judged: 0, ranked: 0, precision: 0 }));
      x[field]++;
    }
  };
  const itemIds = new Set(src.items.map((it) => it.id));
  const view = planner.attached;
  for (const q of src.queries) {
    for (const id of src.relevant.get(q.id) ?? []) if (itemIds.has(id)) offer(id, q, 'judged');
    if (config.itemRankDepth > 0 && view) {
      const p = planner.probabilities(queryInput(q));
      for (const e of topByP(p, config.itemRankDepth)) offer(view.id(e), q, 'ranked');
    }
  }
  const lists = new Map<string, QueryOffer[]>();
  for (const [id, m] of offered) {
    const list = [...m.values()];
    for (const x of list) x.precision = x.judged / Math.max(1, carriers(x.keyword));
    list.sort((a, b) => b.judged - a.judged || b.ranked - a.ranked || (a.keyword < b.keyword ? -1 : a.keyword > b.keyword ? 1 : 0));
    lists.set(id, list);
  }
  return { offers: (id) => lists.get(id) ?? [] };
}

/**
 * The query-side reward scorer of a training half-round (and its rollouts): F1 of the
 * matched set with each training query scored as held out — no {q}, and its own names
 * (its text and label) left out of its keywords.
 */
export function heldOutQueryScorer(
  itemView: KeywordView,
  queries: readonly { id: string; text: string }[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  planner: KeywordPlanner,
  config: RunConfig,
): QueryScorer {
  return createQueryScorer(
    itemView,
    {
      relevant,
      queryText: new Map(queries.map((q) => [q.id, q.text])),
      exclude: new Map(queries.map((q) => [q.id, ownNames(planner, q.text)])),
    },
    { ...scorerOptions(config), matchSelf: false },
  );
}

/**
 * A training query's own names — its string and its label — which a reward that scores it
 * as held out leaves out of its keywords (items may have adopted them).
 */
export function ownNames(planner: KeywordPlanner | null, text: string): string[] {
  const out: string[] = [];
  const label = planner?.label(text) ?? null;
  if (label) out.push(label);
  const self = normalizeKeyword(text);
  if (self) out.push(self);
  return out;
}
