/**
 * What setting an item's keywords would do, without committing anything: against the
 * served query generation and the run's judgements, the queries that would gain or lose
 * the item, each judged one's F1 (F_β of the run) before and after, and their sum — the
 * counterfactual item reward the loop computes for the same change (rewards/scorer.ts
 * `ItemScorer`, whose incremental form touches only Q_cand △ Q_ref) — and the unjudged
 * stored queries whose matched sets would change.
 *
 * The judgements are the run's core training queries' (those the loop's item half-rounds
 * count), the scorer's data is built once per served snapshot.
 */
import { cogrError } from '../../index/core/errors.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { incrementalReward, resolveCandidate, type QueryChange } from '../../rewards/itemReward.ts';
import { itemScorerData, ItemScorer, type ItemScorerData } from '../../rewards/scorer.ts';

/** The run's judgements as the loop's item half-rounds count them, and its reward options. */
export interface ServedJudgements {
  relevant: ReadonlyMap<string, ReadonlySet<string>>;
  counted: ReadonlySet<string>;
  kMax: number;
  beta: number;
}

/** One query a change would touch. */
export interface PreviewQuery {
  id: string;
  text: string;
  /** The item is judged relevant to it. */
  relevant: boolean;
  f1Before: number;
  f1After: number;
  delta: number;
}

export interface KeywordPreview {
  id: string;
  itemGeneration: number;
  queryGeneration: number;
  /** The item's keywords now, and the candidate as it would be stored (normalised, de-duplicated). */
  current: string[];
  keywords: string[];
  /** The counterfactual item reward: Σ over the judged queries of their F1 change (−1 over the keyword budget). */
  reward: number;
  /** Why the reward is not the sum (the layered reward's reason: over the budget), null when it is. */
  reason: string | null;
  /** How many stored queries match the item now, and would with the candidate. */
  matched: { before: number; after: number };
  judged: { gained: PreviewQuery[]; lost: PreviewQuery[] };
  /** Stored queries without judgements whose matched sets would gain or lose the item. */
  unjudged: { gained: { id: string; text: string }[]; lost: { id: string; text: string }[] };
}

/** The scorer data of a served pair of generations, built once per pair. */
const built = new WeakMap<KeywordView, WeakMap<KeywordView, { judgements: ServedJudgements; data: ItemScorerData }>>();

function scorerData(itemView: KeywordView, queryView: KeywordView, judgements: ServedJudgements): ItemScorerData {
  let inner = built.get(itemView);
  if (!inner) built.set(itemView, (inner = new WeakMap()));
  const hit = inner.get(queryView);
  if (hit && hit.judgements === judgements) return hit.data;
  const data = itemScorerData(
    itemView,
    queryView,
    { relevant: judgements.relevant, counted: judgements.counted },
    { kMax: judgements.kMax, beta: judgements.beta },
  );
  inner.set(queryView, { judgements, data });
  return data;
}

export function previewKeywords(
  itemView: KeywordView,
  queryView: KeywordView | null,
  judgements: ServedJudgements | null,
  id: string,
  keywords: readonly string[],
): KeywordPreview {
  const item = itemView.ordinalOf(id);
  if (item < 0) throw cogrError('NOT_FOUND', `id: no item ${JSON.stringify(id)} in the served index`, { id });
  if (!queryView)
    throw cogrError(
      'NOT_FOUND',
      'the served round has no query generation: a preview needs the stored queries the item would be matched against',
    );
  const j: ServedJudgements = judgements ?? { relevant: new Map(), counted: new Set(), kMax: 30, beta: 1 };
  const data = scorerData(itemView, queryView, j);
  const ctx = { itemView, queryView, relevance: data.relevance, kMax: data.options.kMax, beta: data.options.beta };
  const scored = new ItemScorer(data).score([{ id, keywords: [...keywords] }], { details: true });
  const resolved = resolveCandidate(ctx, keywords);
  const changes: QueryChange[] = [];
  const counts = { matched: 0, affected: 0 };
  incrementalReward(ctx, data.cache, item, resolved, counts, changes);
  const out: KeywordPreview = {
    id,
    itemGeneration: itemView.generation,
    queryGeneration: queryView.generation,
    current: itemView.keywordsOf(item),
    keywords: resolved.keywords,
    reward: scored.rewards[0] ?? 0,
    reason: scored.reasons[0] === 'ok' ? null : (scored.reasons[0] ?? null),
    matched: { before: scored.details![0]!.referenceMatched, after: counts.matched },
    judged: { gained: [], lost: [] },
    unjudged: { gained: [], lost: [] },
  };
  for (const c of changes) {
    const qid = queryView.id(c.query);
    const text = queryView.selfOf(c.query);
    if (!c.counted) (c.dir > 0 ? out.unjudged.gained : out.unjudged.lost).push({ id: qid, text });
    else
      (c.dir > 0 ? out.judged.gained : out.judged.lost).push({
        id: qid,
        text,
        relevant: c.relevant,
        f1Before: c.before,
        f1After: c.after,
        delta: c.after - c.before,
      });
  }
  return out;
}
