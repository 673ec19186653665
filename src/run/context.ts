/**
 * A run opened for work: the one place that turns a project database and its dataset into
 * what a step, a rollout, an import or a reward server works with.
 *
 *   runContext       the run's store, policy store, state, split and the queries and
 *                    judgements of each part of it (core training, dev, held-out); the loop
 *                    builds it once it has checked or written the config and the split
 *   openRun          the same for a stored run (config, split, steps and imports read back,
 *                    its data checked against the run's fingerprint first)
 *   openPublishedRun a stored run read from its published files alone (run.json, the
 *                    generation and policy files), never taking the database's lock: what
 *                    a reader beside the writer opens (`cogr reward-server`); the same
 *                    `RunReader` as openRun's, so a half-round is built one way from either
 *   runPlanner       a saved query planner of the run over its items, all planners of one
 *                    run sharing one relevance model (same training judgements)
 *   frozenHalfRound  half-round `r<round>-<side>`: the frozen generations of the step it
 *                    builds on (state.ts frozenFor), the generators it starts from (the item
 *                    policy with the query side's offers) and THE scorer of its rewards
 *   halfRoundScorerData  the one function that builds a half-round's reward scorer: the
 *                    run's β and K_max, the core training judgements, on the query side each
 *                    query scored as held out (no {q}; its own names left out of its
 *                    keywords), on the item side the counterfactual over the core training
 *                    queries. The loop's trainers (evolve/run.ts), `cogr rollouts`,
 *                    `cogr reward-server --half` and `cogr import-generation --half` all
 *                    score through it, so a completion gets one reward whichever asks
 *
 * Leakage: only the core training queries (outside the dev split) and their judgements
 * reach the generators, the offers and the scorers built here; dev and held-out queries are
 * handed out for evaluation only.
 */
import type { CogrDb } from '../../index/store/db.ts';
import { PublishedIndex } from '../../index/store/published.ts';
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
import type { ItemRewardCache } from '../../rewards/itemReward.ts';
import type { RelevanceData } from '../../rewards/relevance.ts';
import {
  itemScorerData,
  queryScorerData,
  scorerFromData,
  type ItemScorer,
  type QueryScorer,
  type ScorerData,
} from '../../rewards/scorer.ts';
import { loadRunCorpus } from './corpus.ts';
import { publishedPolicyStore } from './published.ts';
import { scorerOptions, type RunConfig } from './config.ts';
import { loadPlanner, loadPolicy, policyStore } from './policies.ts';
import {
  checkPublishedRunData,
  checkStoredRunData,
  coreIds,
  frozenFor,
  readRunAt,
  readStoredRun,
  RunState,
  type ImportRecord,
  type RunSplit,
  type StepRecord,
  type StoredRun,
} from './state.ts';

/** The queries of a run's split, each part with what it may be used for. */
export interface RunQueries {
  /** Training queries outside the dev split: the only queries anything is trained on. */
  coreQueries: Query[];
  devQueries: Query[];
  evalQueries: Query[];
  /** Judgements of the core training queries only. */
  coreRelevant: Map<string, Set<string>>;
}

/** A run's data and stores, as every path that works on a run sees them. */
export interface RunContext extends RunQueries {
  db: CogrDb;
  store: KeywordIndexStore;
  policies: KeyValueStore;
  state: RunState;
  corpus: Corpus;
  config: RunConfig;
  split: RunSplit;
  /** The relevance model of the planners loaded through `runPlanner` (one set of training judgements: its indexes and features are reused). */
  relevance: RelevanceModel | null;
}

/** A stored run as a half-round reads it: from the database (openRun) or from its published files (openPublishedRun). */
export interface RunReader extends RunQueries {
  /** The database folder. */
  path: string;
  corpus: Corpus;
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
  imports: ImportRecord[];
  policies: KeyValueStore;
  relevance: RelevanceModel | null;
  openView(side: Side, generation: number, opts?: { shared?: boolean }): Promise<KeywordView>;
}

/** A stored run opened: its context, its committed steps and its imports. */
export interface OpenRun extends RunContext, RunReader {}

function runQueries(corpus: Corpus, split: RunSplit, path: string): RunQueries {
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  const pick = (ids: readonly string[]) => ids.map((id) => byId.get(id)).filter((q): q is Query => q !== undefined);
  const coreQueries = pick(coreIds(split));
  const devQueries = pick(split.dev);
  const evalQueries = pick(split.eval);
  if (coreQueries.length + devQueries.length !== split.train.length || evalQueries.length !== split.eval.length) {
    throw cogrError('DB_CORRUPT', `the stored split of ${path} names queries that dataset ${corpus.name} does not have`);
  }
  const coreRelevant = new Map<string, Set<string>>();
  for (const q of coreQueries) coreRelevant.set(q.id, new Set(corpus.relevant.get(q.id) ?? []));
  return { coreQueries, devQueries, evalQueries, coreRelevant };
}

/** The context of a run whose config and split are known (the loop checked or wrote them). */
export function runContext(
  db: CogrDb,
  corpus: Corpus,
  config: RunConfig,
  split: RunSplit,
  opts: { state?: RunState; logger?: Logger } = {},
): RunContext {
  return {
    db,
    store: new KeywordIndexStore(db, opts.logger ? { logger: opts.logger } : {}),
    policies: policyStore(db),
    state: opts.state ?? new RunState(db),
    corpus,
    config,
    split,
    ...runQueries(corpus, split, db.path),
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
  const ctx = runContext(db, corpus, run.config, run.split);
  return { ...ctx, path: db.path, steps: run.steps, imports: run.imports, openView: (side, g, o) => ctx.store.openView(side, g, o) };
}

/**
 * The run published at `dbPath`, read from its files alone (the database's lock is never
 * taken): its dataset as the run recorded it unless `corpus` is given, refused when it is not
 * the run's data (state.ts checkPublishedRunData). NOT_FOUND when no run is published there.
 */
export async function openPublishedRun(dbPath: string, opts: { corpus?: Corpus; logger?: Logger } = {}): Promise<RunReader> {
  const run = await readRunAt(dbPath);
  if (!run) throw cogrError('NOT_FOUND', `the database ${dbPath} holds no co-evolution run (run cogr demo or cogr evolve first)`);
  const corpus = opts.corpus ?? (await loadRunCorpus(run.config, opts.logger)).corpus;
  checkPublishedRunData(dbPath, run, corpus);
  const index = new PublishedIndex(dbPath);
  return {
    path: dbPath,
    corpus,
    config: run.config,
    split: run.split,
    steps: run.steps,
    imports: run.imports,
    ...runQueries(corpus, run.split, dbPath),
    policies: publishedPolicyStore(dbPath),
    relevance: null,
    openView: (side, g, o) => index.openView(side, g, o),
  };
}

/** A saved planner of the run (`'latest'`: the highest saved round), reusing the run's relevance model. */
export async function runPlanner(
  run: Pick<RunReader, 'policies' | 'corpus' | 'relevance'>,
  round: number | 'latest',
): Promise<KeywordPlanner> {
  const planner = await loadPlanner(run.policies, round, run.corpus.items, run.relevance);
  run.relevance = planner.relevance as RelevanceModel;
  return planner;
}

/** A half-round of a stored run: what it trains against, what it starts from and how it is rewarded. */
export interface FrozenHalfRound {
  /** `r<round>-<side>`. */
  name: string;
  side: Side;
  round: number;
  /** The step it builds on (the last adopted one before it, or a half-round's import). */
  base: string;
  /** The frozen item generation. */
  itemView: KeywordView;
  /** The frozen query generation (item side; null on the query side). */
  queryView: KeywordView | null;
  /** The query planner it starts from (query side) or that made the frozen query side (item side), attached to `itemView`. */
  planner: KeywordPlanner;
  /** The item policy it starts from, attached to `queryView` with the query side's offers (item side only). */
  itemPolicy(): Promise<EmbeddedPolicy>;
  /** The half-round's one scorer (halfRoundScorerData). */
  scorer: QueryScorer | ItemScorer;
}

/** Half-round `r<round>-<side>` of a stored run (from its database or its published files). */
export async function frozenHalfRound(run: RunReader, side: Side, round: number): Promise<FrozenHalfRound> {
  const frozen = frozenFor(run, side, round);
  const itemView = await run.openView('item', frozen.itemGeneration);
  const queryView = frozen.queryGeneration === null ? null : await run.openView('query', frozen.queryGeneration);
  const planner = await runPlanner(run, frozen.plannerRound);
  planner.attachOpposite(itemView);
  const scorer = scorerFromData(
    halfRoundScorerData(side, { itemView, queryView }, { queries: run.coreQueries, relevant: run.coreRelevant }, planner, run.config),
  );
  return {
    name: `r${round}-${side}`,
    side,
    round,
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

/**
 * THE reward scorer of a half-round, whoever asks (the loop's trainers, rollouts, the reward
 * server, an import): the run's β and K_max; `train`, the queries trained on (the core
 * training queries, or a part of them for a cross-fitted shadow) with the core judgements.
 * Query side: F_β of the matched set with each query scored as held out — no {q}, its own
 * names (its string and its label, `ownNames`) left out of its keywords. Item side: the
 * counterfactual ΔΣ_q F_β over `train`'s queries against the frozen query generation,
 * relative to the frozen item generation. `opts` only says where the data lives (shared
 * memory for the worker pool) and hands in what the pool already built; the rewards are
 * the same.
 */
export function halfRoundScorerData(
  side: Side,
  views: { itemView: KeywordView; queryView: KeywordView | null },
  train: { queries: readonly { id: string; text: string }[]; relevant: ReadonlyMap<string, ReadonlySet<string>> },
  planner: KeywordPlanner | null,
  config: Pick<RunConfig, 'kMax' | 'beta'>,
  opts: { shared?: boolean; relevance?: RelevanceData; cache?: ItemRewardCache } = {},
): ScorerData {
  if (side === 'query')
    return queryScorerData(
      views.itemView,
      {
        relevant: train.relevant,
        queryText: new Map(train.queries.map((q) => [q.id, q.text])),
        exclude: new Map(train.queries.map((q) => [q.id, ownNames(planner, q.text)])),
      },
      { ...scorerOptions(config), matchSelf: false },
      opts.shared ? { shared: true } : {},
    );
  if (!views.queryView) throw cogrError('INTERNAL', 'an item half-round is scored against a query generation');
  return itemScorerData(
    views.itemView,
    views.queryView,
    { relevant: train.relevant, counted: new Set(train.queries.map((q) => q.id)) },
    scorerOptions(config),
    opts,
  );
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
export function offerSource(
  run: Pick<RunReader, 'corpus' | 'coreQueries' | 'coreRelevant' | 'config'>,
  queries: readonly Query[] = run.coreQueries,
): OfferSource {
  return { items: run.corpus.items, queries, relevant: run.coreRelevant, config: run.config };
}

/**
 * One training query's part of the offers: the keywords it offers (its name, or its keyword
 * set with itemQuerySide 'keywords') and the items it offers them to, those it judges
 * relevant and those among its top `itemRankDepth` by the planner's p (planned as held out).
 */
export interface QueryOffering {
  queryId: string;
  keywords: readonly string[];
  judged: readonly string[];
  ranked: readonly string[];
}

/** Every training query's offering (`queryOffers` sums them; `--adopt-on leaveout` leaves a group out at a time). */
export function queryOfferings(src: OfferSource, planner: KeywordPlanner, queryView: KeywordView): QueryOffering[] {
  const { config } = src;
  const itemIds = new Set(src.items.map((it) => it.id));
  const view = planner.attached;
  return src.queries.map((q) => {
    let keywords: string[];
    if (config.itemQuerySide === 'labels') {
      const name = planner.label(q.text) ?? normalizeKeyword(q.text);
      keywords = name === null ? [] : [name];
    } else {
      const o = queryView.ordinalOf(q.id);
      keywords = o < 0 ? [] : queryView.keywordsOf(o);
    }
    const judged = [...(src.relevant.get(q.id) ?? [])].filter((id) => itemIds.has(id));
    const ranked =
      config.itemRankDepth > 0 && view ? topByP(planner.probabilities(queryInput(q)), config.itemRankDepth).map((e) => view.id(e)) : [];
    return { queryId: q.id, keywords, judged, ranked };
  });
}

/**
 * What the frozen query generation offers each item, summed over `offerings` (all but the
 * query or queries `without`, when given): every keyword offered to the item, with how many judging and
 * high-ranking queries offer it and the share of the keyword's carriers in the query
 * generation that judge the item relevant.
 */
export function querySideOf(
  offerings: readonly QueryOffering[],
  queryView: KeywordView,
  opts: { without?: string | ReadonlySet<string> } = {},
): QuerySide {
  const { without } = opts;
  const left =
    without === undefined ? () => false : typeof without === 'string' ? (id: string) => id === without : (id: string) => without.has(id);
  const offered = new Map<string, Map<string, QueryOffer>>();
  const carriers = (keyword: string) => {
    const o = queryView.ordinalOfKeyword(keyword);
    return o < 0 ? 0 : queryView.keywordDf(o);
  };
  const offer = (itemId: string, keywords: readonly string[], field: 'judged' | 'ranked') => {
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
  for (const o of offerings) {
    if (left(o.queryId)) continue;
    for (const id of o.judged) offer(id, o.keywords, 'judged');
    for (const id of o.ranked) offer(id, o.keywords, 'ranked');
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
 * What the frozen query generation offers each item: for every training query that judges
 * the item relevant or ranks it among its top `itemRankDepth` items by relevance (the
 * planner's p, the query planned as held out), the query's name (its string when within
 * the keyword limits, else its label) or, with itemQuerySide 'keywords', every keyword of
 * its set; with how many judging and high-ranking queries offer each keyword and the share
 * of the keyword's carriers in the query generation that judge the item relevant.
 */
export function queryOffers(src: OfferSource, planner: KeywordPlanner, queryView: KeywordView): QuerySide {
  return querySideOf(queryOfferings(src, planner, queryView), queryView);
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
