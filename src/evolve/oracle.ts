/**
 * Ceiling analysis (CoSearch's oracle): how far each side could take the matched set if it
 * knew the judgements, on a stored run's held-out queries.
 *
 *   oracle query side   over the run's SFT item generation: per query, keywords drawn from
 *                       its relevant items' keywords (self keywords included), added
 *                       greedily — each time the one whose postings most raise the F1 of
 *                       the union — until none raises it or K_max are taken.
 *   oracle item side    against the SFT planner's keywords for the held-out queries: every
 *                       item's keywords replaced by the names of the held-out queries that
 *                       judge it relevant (the query string, or its label when the string is
 *                       over the keyword limits; at most K_max, in query order), so a query
 *                       matches the items carrying its name ({q}, or its label, which starts
 *                       its planned keywords) and those its other keywords still reach.
 *   oracle query side under the shared vocabulary   the same greedy choice, among the
 *                       relevant items' keywords that at least `minCarriers` items carry
 *                       (no title, no keyword of fewer items): the ceiling of a query side
 *                       that plans only shared keywords.
 *   oracle query side among the plannable keywords   the same, among what the run's planner
 *                       may plan for the query: shared keywords that are also related to it
 *                       (generators/planner/related.ts, the run's `--relatedness`): the
 *                       ceiling of the run's own planner.
 *   perfect order       nDCG@10 of cogr's served set (the run's final step) with its items
 *                       sorted by grade: the ranking ceiling of the matched set.
 */
import { normalizeSelf } from '../../index/text/normalize.ts';
import type { Corpus, Query } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import type { RelevanceSource } from '../../generators/planner/config.ts';
import { Relatedness } from '../../generators/planner/related.ts';
import { keywordCosines } from '../../generators/planner/queryContext.ts';
import { queryInput } from '../../generators/sft.ts';
import { evaluateRun, rankedMetrics, type RunEntry } from '../metrics.ts';

/**
 * Greedy oracle keywords (view keyword ordinals) of one query and the F1 of their matched set.
 * `minCarriers` > 0: only keywords at least that many items match, no item's title (the
 * shared vocabulary's rule); `keep`, when given, must also accept a keyword (the planner's
 * relatedness to the query, for SFT targets: sftData.ts oracleTargets).
 */
export function oracleQuery(
  view: KeywordView,
  relevant: ReadonlySet<number>,
  kMax: number,
  minCarriers = 0,
  keep?: (keyword: number) => boolean,
): { keywords: number[]; f1: number } {
  const nRel = relevant.size;
  if (nRel === 0) return { keywords: [], f1: 0 };
  const { fwdOff, fwd, self } = view.data;
  const seen = new Set<number>();
  for (const e of relevant) {
    for (let j = fwdOff[e]; j < fwdOff[e + 1]; j++) if (minCarriers === 0 || view.postings(fwd[j]).length >= minCarriers) seen.add(fwd[j]);
    if (self[e] >= 0 && minCarriers === 0) seen.add(self[e]);
  }
  if (keep) for (const k of [...seen]) if (!keep(k)) seen.delete(k);
  // Ascending ordinals, a strict improvement needed: ties go to the smaller ordinal.
  const cands = [...seen].sort((a, b) => a - b);
  const taken = new Uint8Array(view.numKeywords);
  const inU = new Uint8Array(view.size);
  let n = 0;
  let tp = 0;
  let f1 = 0;
  const chosen: number[] = [];
  while (chosen.length < kMax) {
    let best = -1;
    let bestF = f1;
    let bestN = 0;
    let bestTp = 0;
    for (const k of cands) {
      if (taken[k]) continue;
      let dn = 0;
      let dtp = 0;
      for (const e of view.postings(k)) {
        if (inU[e]) continue;
        dn++;
        if (relevant.has(e)) dtp++;
      }
      if (dtp === 0) continue;
      const f = (2 * (tp + dtp)) / (n + dn + nRel);
      if (f > bestF + 1e-12) {
        best = k;
        bestF = f;
        bestN = dn;
        bestTp = dtp;
      }
    }
    if (best < 0) break;
    for (const e of view.postings(best)) inU[e] = 1;
    n += bestN;
    tp += bestTp;
    f1 = bestF;
    chosen.push(best);
    taken[best] = 1;
  }
  return { keywords: chosen, f1 };
}

/**
 * The greedy oracle among the keywords a run's planner may plan for a query: carried by at
 * least `minCarriers` items, no item's title, and related to the query by the planner's rule
 * (NPMI ≥ `relatedness` or a shared word; null: any). For a query's text and its relevant
 * items (view ordinals): the oracle's keywords and the F1 of their matched set. SFT's oracle
 * targets (sftData.ts) and `cogr oracle` use it.
 */
export function plannableOracle(
  rule: { minCarriers: number; relatedness: number | null; keywordCosine?: number | null; keywordModel?: string | null },
  view: KeywordView,
  relevance: RelevanceSource,
  kMax: number,
): (text: string, relevant: ReadonlySet<number>) => { keywords: number[]; f1: number } {
  const tau = rule.relatedness;
  const minCos = rule.keywordCosine ?? null;
  const related = Relatedness.of(relevance, tau);
  return (text, relevant) => {
    const r = related?.forQuery(text);
    const lexical = r && tau !== null ? (k: number) => r(view.surface(k)) >= tau : undefined;
    if (minCos === null) return oracleQuery(view, relevant, kMax, rule.minCarriers, lexical);
    // The encoder's rule: the relevant items' keywords that pass the lexical rule, judged in one call.
    const { fwdOff, fwd } = view.data;
    const ks = new Set<number>();
    for (const e of relevant) for (let j = fwdOff[e]; j < fwdOff[e + 1]; j++) if (!lexical || lexical(fwd[j])) ks.add(fwd[j]);
    const list = [...ks];
    const cos = keywordCosines(
      relevance,
      text,
      list.map((k) => view.surface(k)),
      rule.keywordModel ?? null,
    );
    const close = new Set(list.filter((_, i) => cos[i] >= minCos));
    return oracleQuery(view, relevant, kMax, rule.minCarriers, (k) => close.has(k));
  };
}

export interface OracleFigures {
  queries: number;
  /** F1 of the greedy oracle query side over the SFT item generation. */
  oracleQueryF1: number;
  /** F1 of the greedy oracle query side over the SFT item generation, shared keywords only (`minCarriers`+ items). */
  oracleSharedQueryF1: number;
  /** F1 of the greedy oracle among what the run's planner may plan (plannableOracle: shared and related to the query). */
  oraclePlannedQueryF1: number;
  /** F1 of the planner's keywords against the oracle item side. */
  oracleItemF1: number;
  /** nDCG@10 of the served set ordered by grade (the ranking ceiling). */
  perfectOrderNdcg10: number;
}

/** The oracle figures of a stored run's held-out queries (see the top of this file). */
export function oracleFigures(opts: {
  corpus: Pick<Corpus, 'items' | 'qrels' | 'relevant'>;
  queries: readonly Query[];
  sftItemView: KeywordView;
  planner: KeywordPlanner;
  /** The run's served sets of the queries (final step, served ranking); their items are re-ordered by grade. */
  served: ReadonlyMap<string, readonly string[]>;
  kMax: number;
  /** The run's `--min-carriers`: the shared keywords' fewest carriers (also for a run of the open vocabulary). */
  minCarriers: number;
  /** The run's planner rule (run/config.ts plannerVocabulary): the fewest items a planned keyword is carried by (0 under the open vocabulary), its least relatedness to the query. */
  rule: { minCarriers: number; relatedness: number | null; keywordCosine?: number | null; keywordModel?: string | null };
}): OracleFigures {
  const { corpus, queries, sftItemView: view, planner, kMax } = opts;
  const planned = plannableOracle(opts.rule, view, planner.relevance, kMax);
  let qSum = 0;
  let sharedSum = 0;
  let plannedSum = 0;
  for (const q of queries) {
    const rel = new Set([...(corpus.relevant.get(q.id) ?? [])].map((id) => view.ordinalOf(id)).filter((o) => o >= 0));
    qSum += oracleQuery(view, rel, kMax).f1;
    sharedSum += oracleQuery(view, rel, kMax, opts.minCarriers).f1;
    plannedSum += planned(q.text, rel).f1;
  }
  // Oracle item side: each item carries the names of the held-out queries that judge it relevant
  // (the query string, or its label when the string is over the keyword limits: the planner's
  // keywords of such a query start with its label).
  const carried = new Map<string, string[]>();
  for (const q of queries) {
    const name = planner.label(q.text) ?? normalizeSelf(q.text);
    if (!name) continue;
    for (const id of corpus.relevant.get(q.id) ?? []) {
      const list = carried.get(id) ?? [];
      if (list.length < kMax) list.push(name);
      carried.set(id, list);
    }
  }
  const oracleItems = KeywordView.build(
    'item',
    0,
    corpus.items.map((it) => ({ id: it.id, self: it.title, keywords: carried.get(it.id) ?? [] })),
    { analyzer: view.data.analyzer },
  );
  planner.attachOpposite(view);
  const plans = new Map(queries.map((q) => [q.id, planner.plan(queryInput(q)).keywords]));
  const entries: RunEntry[] = queries.map((q) => {
    const ids = oracleItems.search({ self: q.text, keywords: plans.get(q.id)! }, { all: true }).items.map((x) => x.id);
    return { queryId: q.id, ranked: ids, matched: ids };
  });
  const itemF1 = evaluateRun(entries, corpus).set?.f1 ?? 0;
  let nd = 0;
  for (const q of queries) {
    const grades = corpus.qrels.get(q.id);
    const g = (id: string) => grades?.get(id) ?? (corpus.relevant.get(q.id)?.has(id) ? 1 : 0);
    const order = [...(opts.served.get(q.id) ?? [])].sort((a, b) => g(b) - g(a));
    nd += rankedMetrics(order, corpus.relevant.get(q.id) ?? new Set(), grades, [10])['ndcg@10'];
  }
  const n = queries.length || 1;
  return {
    queries: queries.length,
    oracleQueryF1: qSum / n,
    oracleSharedQueryF1: sharedSum / n,
    oraclePlannedQueryF1: plannedSum / n,
    oracleItemF1: itemF1,
    perfectOrderNdcg10: nd / n,
  };
}
