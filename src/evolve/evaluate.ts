/**
 * Held-out evaluation of a (query policy, item generation) pair: each held-out query's
 * keywords are decoded by the query policy (greedy, or sampled at the run's decode
 * temperature and top-p, seeded per query), the whole
 * matched set is retrieved by the CoGR rule and ranked by BM25; P/R/F1 of the whole
 * set and the ranked metrics are macro-averaged (src/metrics.ts).
 */
import { createRng, deriveSeed } from '../../index/random.ts';
import type { Corpus, Query } from '../../index/types.ts';
import type { KeywordView } from '../../index/view.ts';
import type { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { queryInput } from '../../generators/sft.ts';
import { evaluateRun, type RunEntry } from '../metrics.ts';
import type { RunConfig } from '../run/config.ts';
import type { HeldOutMetrics } from '../run/state.ts';

export interface QueryKeywordsFn {
  (q: Query): string[];
}

/**
 * Decode a query's keywords with the policy as the run's config says: greedy, or sampled
 * at the decode temperature and seeded per query.
 */
export function policyKeywords(policy: EmbeddedPolicy, seed: number, config: Pick<RunConfig, 'decode' | 'decodeTemperature' | 'topP'>): QueryKeywordsFn {
  if (config.decode === 'greedy') return (q) => policy.decode(queryInput(q), { greedy: true }).keywords;
  const { decodeTemperature: temperature, topP } = config;
  return (q) => policy.decode(queryInput(q), { temperature, topP, rng: createRng(deriveSeed(seed, 'eval', q.id)) }).keywords;
}

export function evaluateHeldOut(
  itemView: KeywordView,
  queries: readonly Query[],
  keywordsOf: QueryKeywordsFn,
  judgements: Pick<Corpus, 'qrels' | 'relevant'>,
  beta = 1,
): HeldOutMetrics {
  const entries: RunEntry[] = [];
  let kwTotal = 0;
  let matchedTotal = 0;
  for (const q of queries) {
    const keywords = keywordsOf(q);
    kwTotal += keywords.length;
    const res = itemView.search({ self: q.text, keywords }, { all: true });
    matchedTotal += res.matched;
    const ranked = res.items.map((x) => x.id);
    entries.push({ queryId: q.id, ranked, matched: ranked });
  }
  const ev = evaluateRun(entries, judgements, { beta });
  const n = queries.length || 1;
  return {
    queries: queries.length,
    f1: ev.set?.f1 ?? 0,
    precision: ev.set?.precision ?? 0,
    recall: ev.set?.recall ?? 0,
    ndcg10: ev.ranked['ndcg@10'] ?? 0,
    mrr10: ev.ranked['mrr@10'] ?? 0,
    hit3: ev.ranked['hit@3'] ?? 0,
    meanMatched: matchedTotal / n,
    meanKeywords: kwTotal / n,
    ranked: { ...ev.ranked },
  };
}
