/**
 * New items (`cogr evolve --new-items <fraction>`): can the trained generators find items
 * they never saw?
 *
 * A seeded share of the items (`newItemIds`, the same for every fold) is taken out of the
 * collection before the run (`withoutItems`: the items and every judgement of them), so SFT,
 * the rounds, their indexes and the relevance model never see them. After the run
 * (`newItemsFold`), the final item generator keywords each new item from its text alone (no
 * query offers: nobody has searched for it yet), keeping the keywords the index's items carry
 * (the shared vocabulary's minimum counted with them), and the items join the final item
 * generation in memory. The final planner, rebuilt over every item's text (a new item has no
 * judgements, so its judgement features are 0), plans each held-out query of the fold against
 * that index, served as the run serves (floor, set guard). The counts: of the held-out queries'
 * relevant new items, how many their served sets hold (recall_new), and of their relevant
 * other items (recall_old); beside them BM25 over every item at the cut-off tuned on the
 * fold's training queries.
 */
import { cogrError } from '../../index/core/errors.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import type { Corpus } from '../../index/core/types.ts';
import { makeKeywordNormalizer } from '../../index/text/normalize.ts';
import { KeywordView } from '../../index/view/view.ts';
import { servedSet } from '../../generators/planner/ranking.ts';
import { carriedOnly } from '../../generators/policy/vocabulary.ts';
import { itemInput, queryInput } from '../../generators/sft.ts';
import { Bm25Index, tuneCutoff } from '../baseline/bm25.ts';
import { setF1Curve } from '../metrics.ts';
import { runPlanner, type RunContext } from '../run/context.ts';
import { loadPolicy } from '../run/policies.ts';
import { bestServing, bestStep, generatorRound, servedFloor, type StepRecord } from '../run/state.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { plannerKeywords } from './evaluate.ts';
import { decodeOptions } from './loopContext.ts';

/** The new items of a collection: a seeded share of its items (at least one, and at least one left). */
export function newItemIds(corpus: Pick<Corpus, 'items' | 'name'>, fraction: number, seed: number): Set<string> {
  if (!(fraction > 0)) return new Set();
  const n = corpus.items.length;
  const k = Math.min(n - 1, Math.max(1, Math.round(fraction * n)));
  if (k < 1) throw cogrError('INVALID_ARGUMENT', `new items: dataset ${corpus.name} has ${n} item(s); a share of them needs at least 2`);
  const order = shuffle(
    corpus.items.map((it) => it.id),
    createRng(deriveSeed(seed, 'new-items')),
  );
  return new Set(order.slice(0, k));
}

/** The collection without some items: the items, and every judgement of them (queries stay). */
export function withoutItems(corpus: Corpus, ids: ReadonlySet<string>): Corpus {
  if (ids.size === 0) return corpus;
  const qrels = new Map<string, Map<string, number>>();
  for (const [q, m] of corpus.qrels) qrels.set(q, new Map([...m].filter(([id]) => !ids.has(id))));
  const relevant = new Map<string, Set<string>>();
  for (const [q, s] of corpus.relevant) relevant.set(q, new Set([...s].filter((id) => !ids.has(id))));
  return { ...corpus, items: corpus.items.filter((it) => !ids.has(it.id)), qrels, relevant };
}

/** One fold's counts over its held-out queries (summed over folds by the caller). */
export interface NewItemsFold {
  queries: number;
  newItems: number;
  /** Relevant new items over the held-out queries, and how many the served sets held; the same for the other relevant items. */
  relevantNew: number;
  foundNew: number;
  relevantOld: number;
  foundOld: number;
  /** Each held-out query's F1 against every relevant item, old and new. */
  f1: number[];
  bm25: { cutoff: number; foundNew: number; foundOld: number; f1: number[] };
}

/**
 * `train`: the run as it ran (over the collection without the new items); `full`: the same
 * run over the whole collection (its planner is rebuilt over every item).
 */
export async function newItemsFold(
  train: RunContext,
  full: RunContext,
  steps: readonly StepRecord[],
  newIds: ReadonlySet<string>,
): Promise<NewItemsFold> {
  const serving = bestServing(steps);
  const final = bestStep(steps);
  if (!serving || !final) throw cogrError('INVALID_ARGUMENT', 'new items: the run has no final step');
  const { config } = train;
  const oldView = await train.store.openView('item', serving.itemGeneration);
  const queryView = await train.store.openView('query', serving.queryGeneration);
  const policyRound = final.refit?.itemPolicyRound ?? generatorRound(steps.slice(0, steps.indexOf(final) + 1), 'item');
  const policy = await loadPolicy(train.policies, 'item', policyRound);
  policy.attachOpposite(queryView);
  policy.attachQuerySide(null);
  const norm = makeKeywordNormalizer({ analyzer: config.analyzer });
  const fresh = full.corpus.items.filter((it) => newIds.has(it.id));
  let added = fresh.map((it) => ({
    id: it.id,
    self: it.title,
    keywords: policy.decode(itemInput(it), decodeOptions(config, deriveSeed(config.seed, 'new-items', it.id))).keywords,
  }));
  if (config.vocabulary === 'shared') {
    const existing = (key: string) => {
      const o = oldView.ordinalOfKeyword(key);
      return o < 0 ? 0 : oldView.keywordDf(o);
    };
    added = carriedOnly(added, config.minCarriers, norm.key, existing);
  }
  const entries = [...oldView.entries(), ...added].map((e) => ({
    id: e.id,
    self: norm.self(e.self),
    keywords: norm.set(e.keywords).keywords,
  }));
  const view = KeywordView.build('item', -1, entries, { analyzer: config.analyzer });
  const planner = await runPlanner(full, serving.plannerRound);
  planner.attachOpposite(view);
  const floor = servedFloor(steps);
  const keywordsOf = plannerKeywords(planner, deriveSeed(config.seed, serving.step), config);
  const out: NewItemsFold = {
    queries: full.evalQueries.length,
    newItems: newIds.size,
    relevantNew: 0,
    foundNew: 0,
    relevantOld: 0,
    foundOld: 0,
    f1: [],
    bm25: { cutoff: 0, foundNew: 0, foundOld: 0, f1: [] },
  };
  const count = (rel: ReadonlySet<string>, got: readonly string[], into: { foundNew: number; foundOld: number; f1: number[] }) => {
    let tp = 0;
    for (const id of got) {
      if (!rel.has(id)) continue;
      tp++;
      if (newIds.has(id)) into.foundNew++;
      else into.foundOld++;
    }
    into.f1.push(tp === 0 ? 0 : (2 * tp) / (got.length + rel.size));
  };
  for (const q of full.evalQueries) {
    const rel = full.corpus.relevant.get(q.id) ?? new Set<string>();
    for (const id of rel) {
      if (newIds.has(id)) out.relevantNew++;
      else out.relevantOld++;
    }
    const found = view.search({ self: q.text, keywords: keywordsOf(q) }, { all: true });
    const served = servedSet(view, found.items, planner, queryInput(q), floor);
    count(
      rel,
      served.items.map((x) => x.id),
      out,
    );
  }
  // BM25 over every item, its cut-off tuned on the fold's training queries.
  const bm25 = new Bm25Index(full.corpus.items);
  const max = DEFAULTS.baseline.maxCutoff;
  const rank = (text: string) => bm25.search(text, max).map((h) => h.id);
  const curves = full.split.train.map((id) =>
    setF1Curve(rank(full.corpus.queries.find((q) => q.id === id)?.text ?? ''), full.corpus.relevant.get(id) ?? new Set(), max),
  );
  const { cutoff } = tuneCutoff(curves, max);
  out.bm25.cutoff = cutoff;
  for (const q of full.evalQueries) count(full.corpus.relevant.get(q.id) ?? new Set(), rank(q.text).slice(0, cutoff), out.bm25);
  return out;
}

/** The new_items block of `cogr evolve --json`: the folds' counts pooled. */
export function newItemsSummary(fraction: number, folds: readonly NewItemsFold[]) {
  const sum = (pick: (f: NewItemsFold) => number) => folds.reduce((a, f) => a + pick(f), 0);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
  const ratio = (a: number, b: number) => (b > 0 ? a / b : 0);
  const relNew = sum((f) => f.relevantNew);
  const relOld = sum((f) => f.relevantOld);
  return {
    fraction,
    items: folds[0]?.newItems ?? 0,
    queries: sum((f) => f.queries),
    relevant_new: relNew,
    relevant_old: relOld,
    recall_new: ratio(
      sum((f) => f.foundNew),
      relNew,
    ),
    recall_old: ratio(
      sum((f) => f.foundOld),
      relOld,
    ),
    f1: mean(folds.flatMap((f) => f.f1)),
    bm25: {
      recall_new: ratio(
        sum((f) => f.bm25.foundNew),
        relNew,
      ),
      recall_old: ratio(
        sum((f) => f.bm25.foundOld),
        relOld,
      ),
      f1: mean(folds.flatMap((f) => f.bm25.f1)),
    },
  };
}
