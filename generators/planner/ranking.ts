/**
 * How a matched set is ordered (the served ranking). The matched set itself is the CoGR
 * rule's and does not depend on the ranker, so whole-set P/R/F1 do not either.
 *
 *   keywords  BM25 over the keyword bags (the paper's rule: query = words of S_q ∪ {q},
 *             item = words of S_i ∪ {i}); the order `KeywordView.search` returns.
 *   text      BM25 of the query text over each item's title and description (the
 *             relevance model's text index, analysed words), normalised by the best item.
 *   model     the relevance model's p(item | query) (text BM25 features and, when the run
 *             has training judgements, the judgement features; relevance.ts).
 *   mix       (p / p_max + text) / 2: the two above, each normalised by the query's best
 *             item and summed with equal weights (CombSUM of max-normalised scores; no
 *             parameter to tune).
 * Ties keep the keyword order (keyword-bag BM25, then ordinal), so every ranker is a
 * total order and `keywords` is exactly `search`'s order.
 */
import type { KeywordView, ScoredEntity } from '../../index/view/view.ts';
import type { GenerateInput } from '../types.ts';
import type { KeywordPlanner } from './planner.ts';
import { expectedF1Top } from './expectedCut.ts';
import { topByP } from './queryContext.ts';
import type { Ranker } from './rankers.ts';

/** nDCG@10, MAP (average precision over the ranked matched set, trec_eval's `map`) and MRR@10 of one ranking. */
export interface RankingMetrics {
  ndcg10: number;
  map: number;
  mrr10: number;
}

/** A ranked item: the view's entity with the ranker's score (`score`) and its keyword-bag BM25 (`keywordScore`). */
export interface RankedEntity extends ScoredEntity {
  keywordScore: number;
}

/** The scores a ranker other than `keywords` orders a query's items by, over the planner's view's ordinals (all in [0, 1]). */
export function rankerScores(ranker: Exclude<Ranker, 'keywords'>, planner: KeywordPlanner, input: GenerateInput): Float64Array {
  if (ranker === 'text') return planner.textScores(input);
  const p = planner.probabilities(input);
  if (ranker === 'model') return p;
  const text = planner.textScores(input);
  let pMax = 0;
  for (let i = 0; i < p.length; i++) if (p[i] > pMax) pMax = p[i];
  const out = new Float64Array(p.length);
  for (let i = 0; i < p.length; i++) out[i] = ((pMax > 0 ? p[i] / pMax : 0) + text[i]) / 2;
  return out;
}

/**
 * The matched entities (in `KeywordView.search` order: keyword-bag BM25, ties by ordinal)
 * ordered by `ranker`. `planner` must be attached to the view the entities come from
 * (`text` and `model` read its per-query scores over that view's ordinals). `scores`: the
 * query's `rankerScores` when the caller has them already (servedList), else computed here.
 */
export function rankMatched(
  items: readonly ScoredEntity[],
  ranker: Ranker,
  planner: KeywordPlanner | null,
  input: GenerateInput,
  scores?: Float64Array,
): RankedEntity[] {
  if (ranker === 'keywords' || planner === null) return items.map((x) => ({ ...x, keywordScore: x.score }));
  const s = scores ?? rankerScores(ranker, planner, input);
  const order = items.map((x, i) => i);
  order.sort((a, b) => s[items[b].ordinal] - s[items[a].ordinal] || a - b);
  return order.map((i) => ({ id: items[i].id, ordinal: items[i].ordinal, score: s[items[i].ordinal], keywordScore: items[i].score }));
}

/**
 * The served set's floor (src/run/state.ts SetFloor): top `floor` by p added to every
 * matched set, top `fallback` by p when nothing matches; and the served list's `backfill`
 * depth (`backfill`: absent or 0 for none). `modelAlpha`: the run's set guard chose the
 * relevance model's own sets (src/run/records.ts RefitStats.served) — every query is served
 * its expected-F1 cut by p at this α instead of its matched set (absent: the matched set).
 * `cut` (`--served-set cut`): every matched set is cut where its own expected F1 peaks — its
 * items by p, the best prefix by the planner's objective at the planner's α (matchedCut) —
 * so only items the keywords matched are served, the fewer the likelier.
 */
export interface Floor {
  floor: number;
  fallback: number;
  backfill?: number;
  modelAlpha?: number;
  cut?: boolean;
}
export const NO_FLOOR: Floor = { floor: 0, fallback: 0 };

/**
 * The served set of a query: the matched entities (in `search` order) followed by those of
 * the top `floor` items by p that did not match (keyword score 0), or — when nothing
 * matches — the top `fallback` items by p, flagged `empty_plan`. A query none of whose words
 * occurs in any item's text (blank, stop words only, nonsense) gets no floor: p is then the
 * same bias-only value for every item, and its top items would be arbitrary.
 */
export function servedSet(
  view: KeywordView,
  keywordMatches: readonly ScoredEntity[],
  planner: KeywordPlanner | null,
  input: GenerateInput,
  f: Floor,
): { items: ScoredEntity[]; fallback: 'empty_plan' | null; added: number } {
  const cut = f.cut === true && f.modelAlpha === undefined && keywordMatches.length > 1;
  // A cut keeps at least one item, so the floor's k is the matched set's either way.
  const k = keywordMatches.length === 0 ? f.fallback : f.floor;
  if ((!cut && f.modelAlpha === undefined && k <= 0) || planner === null || !planner.textScores(input).some((s) => s > 0))
    return { items: [...keywordMatches], fallback: null, added: 0 };
  if (f.modelAlpha !== undefined) return modelSet(view, keywordMatches, planner, input, f.modelAlpha);
  const p = planner.probabilities(input);
  const matched = cut ? matchedCut(keywordMatches, p, planner.alpha) : keywordMatches;
  if (k <= 0) return { items: [...matched], fallback: null, added: 0 };
  const seen = new Set(matched.map((x) => x.ordinal));
  const extra = topByP(p, k)
    .filter((e) => !seen.has(e))
    .map((e) => ({ id: view.id(e), ordinal: e, score: 0 }));
  return { items: [...matched, ...extra], fallback: matched.length === 0 && extra.length > 0 ? 'empty_plan' : null, added: extra.length };
}

/**
 * A matched set cut where its expected F1 peaks: its items by p (ties by ordinal), the prefix
 * k* = argmax_k 2·Σ_{i ≤ k} p_(i) / (k + α·E) with E = Σ p over every item (the planner's
 * objective G over prefixes of the matched set instead of unions of postings), kept in their
 * matched order. Every kept item is one the keywords matched.
 */
export function matchedCut(matched: readonly ScoredEntity[], p: Float64Array, alpha: number): ScoredEntity[] {
  let E = 0;
  for (let i = 0; i < p.length; i++) E += p[i];
  const byP = [...matched].sort((a, b) => p[b.ordinal] - p[a.ordinal] || a.ordinal - b.ordinal);
  let S = 0;
  let best = 1;
  let bestG = -1;
  for (let k = 1; k <= byP.length; k++) {
    S += p[byP[k - 1].ordinal];
    const g = (2 * S) / (k + alpha * E);
    if (g > bestG + 1e-15) {
      bestG = g;
      best = k;
    }
  }
  const keep = new Set(byP.slice(0, best).map((x) => x.ordinal));
  return matched.filter((x) => keep.has(x.ordinal));
}

/**
 * The relevance model's own set of a query (the set guard's choice): its expected-F1 cut by
 * p at `alpha` (expectedCut.ts), best first, each item with its keyword-bag score when the
 * keywords matched it (else 0); `added` counts the items the keywords did not match. As with
 * the floor, a query none of whose words the items know keeps its matched set (servedSet).
 */
function modelSet(
  view: KeywordView,
  matched: readonly ScoredEntity[],
  planner: KeywordPlanner,
  input: GenerateInput,
  alpha: number,
): { items: ScoredEntity[]; fallback: 'empty_plan' | null; added: number } {
  const keywordScore = new Map(matched.map((x) => [x.ordinal, x.score]));
  const items: ScoredEntity[] = expectedF1Top(planner.probabilities(input), alpha).map((e) => ({
    id: view.id(e),
    ordinal: e,
    score: keywordScore.get(e) ?? 0,
  }));
  return { items, fallback: null, added: items.filter((x) => !keywordScore.has(x.ordinal)).length };
}

/**
 * The served list to `depth`: the served set in its ranker's order, then — a search
 * engine's "more results" — the items outside it in the same ranker's order until `depth`
 * items are listed. The served set (hence F1) does not change: only what follows it. A
 * backfilled item's score is its ranker score − 2, below every served item's (the text and
 * model scores lie in [0, 1]), so an order by score (trec_eval's) keeps the served set
 * first. The paper's `keywords` ranker scores nothing outside the matched set, and a text
 * none of whose words the items know ranks nothing: both get no backfill. `scores`: the
 * query's `rankerScores`, when the caller has them already.
 */
export function backfill(
  ranked: readonly RankedEntity[],
  ranker: Ranker,
  planner: KeywordPlanner | null,
  input: GenerateInput,
  view: KeywordView,
  depth: number,
  scores?: Float64Array,
): RankedEntity[] {
  const want = Math.min(depth, view.size) - ranked.length;
  if (want <= 0 || ranker === 'keywords' || planner === null) return [...ranked];
  const text = planner.textScores(input);
  if (!text.some((s) => s > 0)) return [...ranked];
  const s = scores ?? rankerScores(ranker, planner, input);
  const seen = new Set(ranked.map((x) => x.ordinal));
  const extra: RankedEntity[] = [];
  // The top `want + |served|` by score hold the top `want` outside the served set.
  for (const e of topByP(s, want + ranked.length)) {
    if (seen.has(e)) continue;
    extra.push({ id: view.id(e), ordinal: e, score: s[e] - 2, keywordScore: 0 });
    if (extra.length === want) break;
  }
  return [...ranked, ...extra];
}

/**
 * The served list of a query: its served set (`items`, in `search` order) ordered by
 * `ranker`, then backfilled to `depth` (`backfill`); the ranker's scores are computed once
 * for both (for `mix`, a fused array over every item).
 */
export function servedList(
  items: readonly ScoredEntity[],
  ranker: Ranker,
  planner: KeywordPlanner | null,
  input: GenerateInput,
  view: KeywordView,
  depth: number,
): RankedEntity[] {
  const scores = ranker === 'keywords' || planner === null ? undefined : rankerScores(ranker, planner, input);
  return backfill(rankMatched(items, ranker, planner, input, scores), ranker, planner, input, view, depth, scores);
}
