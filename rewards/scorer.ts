/**
 * The reward scorer: the one place where a CoGR reward is assembled, for both sides.
 *
 * A scorer is keyed by (item view, query view, judgements, options): it owns the
 * relevant ordinals of the judgements in those views, the per-round item-reward cache,
 * the layered reward (format → budget → result, layered.ts, with the budget checked
 * once) and the incremental `Q_cand △ Q_ref` merge (itemReward.ts). The worker threads,
 * `cogr rollouts`, the reward server and the co-evolution loop all call `score`.
 *
 * One signature for both sides, in the style of TRL's reward functions: a batch of
 * samples in, one number per sample out (null when the sample's entity is unknown to the
 * scorer, as TRL's None), with the layer each sample ended in beside it and, on request,
 * the normalised keywords and the counts behind each reward:
 *
 *   const scorer = createQueryScorer(itemView, { relevant, queryText }, { kMax: 30 });
 *   scorer.score([{ id: 'q1', keywords: ['statin', 'breast cancer'] }, { id: 'q1', keywords: null }]);
 *   // → { rewards: [0.18…, -1], reasons: ['ok', 'invalid_format'] }
 *
 * Query side: F_β of the set the item view matches for S_q ∪ {q} against rel(q); item
 * side: the counterfactual marginal ΔΣ_q F_β(q) of the item's candidate against the
 * query view, relative to the item view's reference keywords.
 */
import { DEFAULTS, K_MAX } from '../index/core/defaults.ts';
import { StringTable } from '../index/view/buffers.ts';
import { sharedKeywordNormalizer } from '../index/text/normalize.ts';
import type { Side } from '../index/core/types.ts';
import type { KeywordView } from '../index/view/view.ts';
import {
  buildItemRewardCache,
  cachedReferenceQueries,
  incrementalReward,
  resolveCandidate,
  type CandidateCounts,
  type ItemRewardCache,
  type ItemRewardContext,
} from './itemReward.ts';
import { layered, type RewardReason } from './layered.ts';
import { queryResult } from './queryReward.ts';
import { buildQueryJudgements, buildRelevance, type QueryJudgementData, type RelevanceData } from './relevance.ts';

export interface RewardSample {
  /** The entity the keywords are for: a query id (query side) or an item id (item side). */
  id: string;
  /** The parsed keywords, or null when the output did not parse (invalid_format). */
  keywords: readonly string[] | null;
}

export interface ScorerOptions {
  /** Keyword budget K_max (default 30). */
  kMax?: number;
  /** F-beta's beta (default 1: F1). */
  beta?: number;
  /** Reward of an unparsable output (default −1). */
  invalidFormatReward?: number;
  /** Reward of an over-budget output (default 0 for queries, −1 for items). */
  overBudgetReward?: number;
  /**
   * Query side: whether the query's own string {q} matches (default true). False scores
   * a training query as if it were held out (leave-one-out): once items carry training
   * queries' strings, {q} would match exactly its relevant items.
   */
  matchSelf?: boolean;
}

/** Counts behind a query reward. */
export interface QueryRewardDetail {
  /** Items matched by S_q ∪ {q} (0 unless reason = ok). */
  matched: number;
  truePositives: number;
  /** |rel(q)|. */
  relevant: number;
  precision: number;
  recall: number;
}

/** Counts behind an item reward. */
export interface ItemRewardDetail {
  /** Queries that would retrieve the item with the candidate keywords (0 unless reason = ok). */
  matched: number;
  /** Queries that retrieve it with its reference keywords. */
  referenceMatched: number;
  /** |Q_cand △ Q_ref|: the queries whose F changes. */
  affected: number;
}

export interface ScoredBatch<D> {
  /** One reward per sample; null when the scorer does not know the sample's entity. */
  rewards: (number | null)[];
  /** The layer each sample ended in (null with a null reward). */
  reasons: (RewardReason | null)[];
  /** With `details`: the normalised keywords the result layer saw (empty for invalid_format). */
  keywords?: string[][];
  /** With `details`: the counts behind each reward. */
  details?: (D | null)[];
}

export interface ScoreOptions {
  details?: boolean;
}

export interface RewardScorer<D = QueryRewardDetail | ItemRewardDetail> {
  readonly side: Side;
  score(batch: readonly RewardSample[], opts?: ScoreOptions): ScoredBatch<D>;
}

/** The judgements a scorer is built from. */
export interface Judgements {
  /** Query id → relevant item ids. */
  relevant: ReadonlyMap<string, ReadonlySet<string>>;
  /**
   * Query id → raw query text ({q}): the queries whose query-side reward can be asked.
   * Default: the query view's self strings.
   */
  queryText?: ReadonlyMap<string, string>;
  /** Queries whose F counts in the item reward (default: those with a relevant item). */
  counted?: ReadonlySet<string>;
  /**
   * Query side: keywords of a query that do not match when it is scored (they still
   * count for the format and budget layers) — a training query's own names when it is
   * scored as held out, since items may have adopted them.
   */
  exclude?: ReadonlyMap<string, readonly string[]>;
}

/** The plain data of a query-side scorer (typed arrays may sit on SharedArrayBuffer). */
export interface QueryScorerData {
  side: 'query';
  itemView: KeywordView;
  judgements: QueryJudgementData;
  options: ScorerOptions;
}

/** The plain data of an item-side scorer. */
export interface ItemScorerData {
  side: 'item';
  itemView: KeywordView;
  queryView: KeywordView;
  relevance: RelevanceData;
  cache: ItemRewardCache;
  options: ScorerOptions;
}

export type ScorerData = QueryScorerData | ItemScorerData;

/** A sample whose entity the scorer does not know: a null reward (TRL's None). */
function unknown<D>(out: ScoredBatch<D>): void {
  out.rewards.push(null);
  out.reasons.push(null);
  out.keywords?.push([]);
  out.details?.push(null);
}

function emptyBatch<D>(details: boolean): ScoredBatch<D> {
  return details ? { rewards: [], reasons: [], keywords: [], details: [] } : { rewards: [], reasons: [] };
}

export class QueryScorer implements RewardScorer<QueryRewardDetail> {
  readonly side = 'query' as const;
  private readonly ids: StringTable;
  private readonly texts: StringTable;
  private readonly excluded: StringTable;
  private readonly beta: number;

  constructor(readonly data: QueryScorerData) {
    const j = data.judgements;
    this.ids = new StringTable(j.idsBlob, j.idsOff, j.numQueries);
    this.texts = new StringTable(j.textBlob, j.textOff, j.numQueries);
    this.excluded = new StringTable(j.excludeBlob, j.excludeOff, j.numQueries);
    this.beta = data.options.beta ?? DEFAULTS.run.beta;
  }

  score(batch: readonly RewardSample[], opts: ScoreOptions = {}): ScoredBatch<QueryRewardDetail> {
    const out = emptyBatch<QueryRewardDetail>(opts.details ?? false);
    const { itemView, judgements: j, options } = this.data;
    const norm = sharedKeywordNormalizer(itemView.data.analyzer);
    const layers = { side: 'query' as const, ...options };
    for (const s of batch) {
      const q = this.ids.lookup(s.id);
      if (q < 0) {
        unknown(out);
        continue;
      }
      const rel = j.rel.subarray(j.relOff[q], j.relOff[q + 1]);
      const nRel = j.nRel[q];
      const text = this.texts.all()[q];
      const ex = this.excluded.all()[q];
      const excluded = ex.length === 0 ? null : new Set(ex.split('\n').map((k) => norm.key(k)));
      const detail: QueryRewardDetail = { matched: 0, truePositives: 0, relevant: nRel, precision: 0, recall: 0 };
      const r = layered(
        s.keywords,
        (list) => norm.set(list),
        (p) => {
          const keywords = excluded ? p.keywords.filter((k) => !excluded.has(norm.key(k))) : p.keywords;
          const res = queryResult(itemView, options.matchSelf === false ? undefined : text, keywords, rel, nRel, this.beta);
          detail.matched = res.nRet;
          detail.truePositives = res.tp;
          detail.precision = res.precision;
          detail.recall = res.recall;
          return res.reward;
        },
        layers,
      );
      out.rewards.push(r.reward);
      out.reasons.push(r.reason);
      out.keywords?.push(r.prepared?.keywords ?? []);
      out.details?.push(detail);
    }
    return out;
  }
}

export class ItemScorer implements RewardScorer<ItemRewardDetail> {
  readonly side = 'item' as const;
  private readonly ctx: ItemRewardContext;

  constructor(readonly data: ItemScorerData) {
    this.ctx = {
      itemView: data.itemView,
      queryView: data.queryView,
      relevance: data.relevance,
      kMax: data.options.kMax,
      beta: data.options.beta,
    };
  }

  score(batch: readonly RewardSample[], opts: ScoreOptions = {}): ScoredBatch<ItemRewardDetail> {
    const out = emptyBatch<ItemRewardDetail>(opts.details ?? false);
    const { itemView, cache, options } = this.data;
    const ctx = this.ctx;
    const layers = { side: 'item' as const, ...options };
    const counts: CandidateCounts = { matched: 0, affected: 0 };
    for (const s of batch) {
      const item = itemView.ordinalOf(s.id);
      if (item < 0) {
        unknown(out);
        continue;
      }
      counts.matched = 0;
      counts.affected = 0;
      const r = layered(
        s.keywords,
        (list) => resolveCandidate(ctx, list),
        (p) => incrementalReward(ctx, cache, item, p, counts),
        layers,
      );
      out.rewards.push(r.reward);
      out.reasons.push(r.reason);
      out.keywords?.push(r.prepared?.keywords ?? []);
      out.details?.push({
        matched: counts.matched,
        referenceMatched: cachedReferenceQueries(cache, item).length,
        affected: counts.affected,
      });
    }
    return out;
  }
}

/** A scorer from its plain data (what a worker thread reconstructs). */
export function scorerFromData(data: ScorerData): QueryScorer | ItemScorer {
  return data.side === 'query' ? new QueryScorer(data) : new ItemScorer(data);
}

/** The query-text map of a query view (its entities' self strings). */
function queryTextOf(queryView: KeywordView | null | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (queryView) for (let q = 0; q < queryView.size; q++) out.set(queryView.id(q), queryView.selfOf(q));
  return out;
}

/** The data of a query-side scorer: the judgements resolved against the item view. */
export function queryScorerData(
  itemView: KeywordView,
  judgements: Judgements,
  options: ScorerOptions = {},
  opts: { queryView?: KeywordView | null; shared?: boolean } = {},
): QueryScorerData {
  const text = judgements.queryText ?? queryTextOf(opts.queryView);
  return {
    side: 'query',
    itemView,
    judgements: buildQueryJudgements(itemView, text, judgements.relevant, {
      shared: opts.shared,
      ...(judgements.exclude ? { exclude: judgements.exclude } : {}),
    }),
    options: withDefaults(options),
  };
}

/**
 * The data of an item-side scorer: the judgements in both views and the per-round
 * cache (both built here unless given, e.g. the cache by the worker pool in parallel).
 */
export function itemScorerData(
  itemView: KeywordView,
  queryView: KeywordView,
  judgements: Judgements,
  options: ScorerOptions = {},
  opts: { shared?: boolean; relevance?: RelevanceData; cache?: ItemRewardCache } = {},
): ItemScorerData {
  const relevance = opts.relevance ?? buildRelevance(queryView, itemView, judgements.relevant, judgements.counted, { shared: opts.shared });
  const o = withDefaults(options);
  const cache =
    opts.cache ?? buildItemRewardCache({ itemView, queryView, relevance, kMax: o.kMax, beta: o.beta }, undefined, { shared: opts.shared });
  return { side: 'item', itemView, queryView, relevance, cache, options: o };
}

export function createQueryScorer(
  itemView: KeywordView,
  judgements: Judgements,
  options: ScorerOptions = {},
  opts: { queryView?: KeywordView | null } = {},
): QueryScorer {
  return new QueryScorer(queryScorerData(itemView, judgements, options, opts));
}

export function createItemScorer(
  itemView: KeywordView,
  queryView: KeywordView,
  judgements: Judgements,
  options: ScorerOptions = {},
): ItemScorer {
  return new ItemScorer(itemScorerData(itemView, queryView, judgements, options));
}

function withDefaults(o: ScorerOptions): ScorerOptions {
  return { ...o, kMax: o.kMax ?? K_MAX, beta: o.beta ?? DEFAULTS.run.beta };
}
