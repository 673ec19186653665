/**
 * A stored run's own SFT targets, for an external model's SFT (`cogr sft --export` on a
 * run): what the embedded generators were initialised on, read from the run's SFT step
 * rather than a split of its own.
 *
 *   items    every item judged relevant to a core training query, with its keywords in the
 *            SFT step's item generation (the base item keywords: under the shared vocabulary,
 *            phrases several items carry)
 *   queries  every core training query, with the SFT planner's keywords planned as held out
 *            against that item generation (no {q}, its own names left out; greedy); with
 *            `queryTargets: 'oracle'` instead the greedy oracle keywords of its judgements
 *            (oracle.ts oracleQuery: the keywords of its relevant items, each added while it
 *            raises the F1 of the union, at most ORACLE_TARGET_KEYWORDS) that the planner may
 *            plan for it — carried by `minCarriers`+ items, no item's title, related to the
 *            query (related.ts) — and the planner's keywords where no such keyword reaches a
 *            relevant item. A teacher that knows the answers but speaks the planner's language.
 *   dev      the run's dev queries the same way (oracle targets from their own judgements),
 *            and the items judged relevant only to them: never trained on, what a trainer's
 *            dev loss (when to stop SFT) is measured on
 *   pseudo   (with `pseudoQueries` > 0) pseudo-queries: the titles of a seeded sample of
 *            the items in the SFT step's item generation, each with the SFT planner's keywords
 *            for it planned as held out, kept to the shared vocabulary's rule (sharedKeyword)
 *            and never the item's own title. A run has few core training queries (19 on MED),
 *            so an LLM fine-tuned on them alone sees a handful of query answers, repeated; the
 *            pseudo-queries teach it the query side's vocabulary on unjudged text, with the
 *            embedded planner as the teacher. No judgement is read for them.
 *   vocabulary  the phrases a query keyword may be in the first query half-round: the
 *            keywords of its frozen item generation that the query planner may plan (at least
 *            `minCarriers` items carry them under the shared vocabulary; no item's title),
 *            with their carrier counts; an LLM's constrained decoding keeps its query keywords
 *            to them (trainers/trl/keyword_grammar.py, `--vocabulary`)
 *
 * Held-out queries and their judgements are never read.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import { createRng, deriveSeed, shuffle } from '../../index/core/random.ts';
import { writeAtomic } from '../../index/core/paths.ts';
import type { Query } from '../../index/core/types.ts';
import type { KeywordView } from '../../index/view/view.ts';
import { sharedKeyword, titleOnlyKeys } from '../../generators/planner/queryContext.ts';
import type { KeywordPlanner } from '../../generators/planner/planner.ts';
import { plannableOracle } from './oracle.ts';
import { exportTrl, queryInput } from '../../generators/sft.ts';
import { plannerVocabulary } from '../run/config.ts';
import { runPlanner, type RunReader } from '../run/context.ts';
import { frozenFor } from '../run/state.ts';

export interface SftTargets {
  /** The SFT step's item generation. */
  itemGeneration: number;
  items: Map<string, string[]>;
  queries: Map<string, string[]>;
  devItems: Map<string, string[]>;
  devQueries: Map<string, string[]>;
  /** Pseudo-queries (item titles) and their targets; empty without `pseudoQueries`. */
  pseudo: { queries: Query[]; targets: Map<string, string[]> };
  /** Whose keywords the query targets are, and (oracle) how many core and dev queries got oracle keywords rather than the planner's. */
  queryTargets: { kind: QueryTargetKind; oracle: number; planner: number };
}

/** The query side's SFT targets: the SFT planner's keywords (planned as held out) or the greedy oracle's of the query's judgements, in the planner's vocabulary. */
export type QueryTargetKind = 'planner' | 'oracle';
/**
 * Oracle targets hold at most this many keywords (the keyword limit, when smaller): the
 * planner plans 1.5–3.5 a query, and the greedy oracle of a query with many relevant items
 * goes on adding keywords that each gain little, a list the model would then write for
 * every query. Set before any measurement, not tuned.
 */
const ORACLE_TARGET_KEYWORDS = 4;
export const QUERY_TARGET_KINDS: readonly QueryTargetKind[] = ['planner', 'oracle'];

/** The id of the pseudo-query made from an item's title. */
export const pseudoQueryId = (itemId: string): string => `pseudo:${itemId}`;

export async function runSftTargets(
  run: RunReader,
  opts: { pseudoQueries?: number; queryTargets?: QueryTargetKind; keywordLimit?: number } = {},
): Promise<SftTargets> {
  const sft = run.steps.find((s) => s.phase === 'sft');
  if (!sft) throw cogrError('NOT_FOUND', `the run in ${run.path} has no SFT step yet`);
  const view = await run.openView('item', sft.itemGeneration);
  const planner = await runPlanner(run, 0);
  planner.attachOpposite(view);
  const keywordsOf = (ids: Iterable<string>) => {
    const out = new Map<string, string[]>();
    for (const id of ids) {
      const o = view.ordinalOf(id);
      if (o >= 0) out.set(id, view.keywordsOf(o));
    }
    return out;
  };
  const judged = (qs: readonly Query[], also: ReadonlyMap<string, ReadonlySet<string>>) => {
    const out = new Set<string>();
    for (const q of qs) for (const id of also.get(q.id) ?? []) out.add(id);
    return out;
  };
  const planned = (q: Query) => planner.plan(queryInput(q), { asHeldOut: true }).keywords;
  const kind = opts.queryTargets ?? 'planner';
  const counts = { kind, oracle: 0, planner: 0 };
  const oracle =
    kind === 'oracle' ? oracleTargets(run, view, planner, Math.min(ORACLE_TARGET_KEYWORDS, opts.keywordLimit ?? run.config.kMax)) : null;
  const plans = (qs: readonly Query[], relevant: ReadonlyMap<string, ReadonlySet<string>>) =>
    new Map(
      qs.map((q) => {
        const o = oracle?.(q, relevant.get(q.id) ?? new Set()) ?? [];
        if (o.length > 0) counts.oracle++;
        else counts.planner++;
        return [q.id, o.length > 0 ? o : planned(q)];
      }),
    );
  const coreItems = judged(run.coreQueries, run.coreRelevant);
  const devRelevant = new Map(run.devQueries.map((q) => [q.id, new Set(run.corpus.relevant.get(q.id) ?? [])]));
  const devOnly = [...judged(run.devQueries, devRelevant)].filter((id) => !coreItems.has(id));
  return {
    itemGeneration: sft.itemGeneration,
    items: keywordsOf(coreItems),
    queries: plans(run.coreQueries, run.coreRelevant),
    devItems: keywordsOf(devOnly),
    devQueries: plans(run.devQueries, devRelevant),
    pseudo: pseudoQueryTargets(run, view, opts.pseudoQueries ?? 0, planned),
    queryTargets: counts,
  };
}

/**
 * The oracle query targets (the top of this file): a function of a judged query and its
 * relevant item ids giving the greedy oracle's keywords among those the planner may plan for
 * it (empty when none reaches a relevant item).
 */
function oracleTargets(
  run: Pick<RunReader, 'config'>,
  view: KeywordView,
  planner: KeywordPlanner,
  keywordLimit: number,
): (q: Query, relevant: ReadonlySet<string>) => string[] {
  const oracle = plannableOracle(plannerVocabulary(run.config), view, planner.relevance, keywordLimit);
  return (q, relevant) => {
    const rel = new Set<number>();
    for (const id of relevant) {
      const e = view.ordinalOf(id);
      if (e >= 0) rel.add(e);
    }
    return oracle(q.text, rel).keywords.map((k) => view.surface(k));
  };
}

/**
 * Up to `n` pseudo-queries: the titles (of two words or more) of a seeded sample of `view`'s
 * items (the items the run trains on: new items are not in it), each planned by `plan`, its
 * keywords kept to the query vocabulary's rule (queryVocabulary) and never the item's own
 * title (which the planner may give a query naming an item). A title left with no keyword
 * counts towards `n` but has no target, so it gives no example.
 */
export function pseudoQueryTargets(
  run: Pick<RunReader, 'corpus' | 'config'>,
  view: KeywordView,
  n: number,
  plan: (q: Query) => readonly string[],
): { queries: Query[]; targets: Map<string, string[]> } {
  const queries: Query[] = [];
  const targets = new Map<string, string[]>();
  if (n <= 0) return { queries, targets };
  const byId = new Map(run.corpus.items.map((it) => [it.id, it]));
  const { minCarriers } = plannerVocabulary(run.config);
  const titleOnly = titleOnlyKeys(view);
  const ordinals = shuffle(
    Array.from({ length: view.size }, (_, e) => e),
    createRng(deriveSeed(run.config.seed, 'pseudo-queries')),
  );
  for (const e of ordinals) {
    if (queries.length >= n) break;
    const title = byId.get(view.id(e))?.title.trim() ?? '';
    if (title.split(/\s+/).length < 2) continue;
    const q: Query = { id: pseudoQueryId(view.id(e)), text: title };
    const own = view.data.self[e];
    const kept = plan(q).filter((k) => {
      const o = view.ordinalOfKeyword(k);
      return o >= 0 && o !== own && plannable(view, titleOnly, o, minCarriers);
    });
    queries.push(q);
    if (kept.length > 0) targets.set(q.id, kept);
  }
  return { queries, targets };
}

/** The targets in TRL's conversational format: `dir/item.jsonl`, `dir/query.jsonl`, and the dev ones under `dir/dev/`; compact prompts (the user message alone, prompts.ts). */
export function exportSftTargets(
  run: RunReader,
  t: SftTargets,
  dir: string,
  keywordLimit: number,
): { item: number; query: number; pseudo: number; devItem: number; devQuery: number } {
  const items = run.corpus.items;
  const train = exportTrl(dir, {
    items,
    itemKeywords: t.items,
    queries: run.coreQueries,
    queryTargets: t.queries,
    keywordLimit,
    examples: 'compact',
    ...(t.pseudo.queries.length > 0 ? { pseudo: t.pseudo } : {}),
  });
  const dev = exportTrl(join(dir, 'dev'), {
    items,
    itemKeywords: t.devItems,
    queries: run.devQueries,
    queryTargets: t.devQueries,
    keywordLimit,
    examples: 'compact',
  });
  return { item: train.item, query: train.query, pseudo: train.pseudo, devItem: dev.item, devQuery: dev.query };
}

/** One phrase of a query half-round's vocabulary: its surface form, its match key and how many items it matches. */
export interface VocabularyPhrase {
  phrase: string;
  key: string;
  carriers: number;
}

/**
 * The keywords of an item generation a query keyword may be, by the planner's own rule
 * (generators/planner/queryContext.ts candidates): with `minCarriers` > 0 (the shared
 * vocabulary), keywords at least that many items match that are some item's keyword, not
 * only its title; with 0 (the open vocabulary), every keyword, titles included. Sorted by
 * phrase.
 */
export function queryVocabulary(view: KeywordView, minCarriers: number): VocabularyPhrase[] {
  const titleOnly = titleOnlyKeys(view);
  const out: VocabularyPhrase[] = [];
  for (let k = 0; k < view.numKeywords; k++) {
    if (!plannable(view, titleOnly, k, minCarriers)) continue;
    out.push({ phrase: view.surface(k), key: view.keyword(k), carriers: view.keywordDf(k) });
  }
  return out.sort((a, b) => (a.phrase < b.phrase ? -1 : a.phrase > b.phrase ? 1 : 0));
}

/** Whether keyword ordinal `k` of `view` may be a query keyword: under the shared vocabulary (minCarriers > 0) its rule (sharedKeyword); the open vocabulary (0) plans any key, every item's keyword and title. */
function plannable(view: KeywordView, titleOnly: Uint8Array, k: number, minCarriers: number): boolean {
  return minCarriers === 0 || sharedKeyword(view, titleOnly, k, minCarriers);
}

/** The format of `vocabulary.json`. */
export const VOCABULARY_FILE_VERSION = 1;

/**
 * `dir/vocabulary.json`: the vocabulary of query half-round `r<round>-query` over its frozen
 * item generation (state.ts frozenFor), the run's planner rule (config.ts plannerVocabulary).
 * Written through a rename.
 */
export async function exportQueryVocabulary(
  run: RunReader,
  dir: string,
  round = 1,
): Promise<{ half: string; itemGeneration: number; minCarriers: number; phrases: number }> {
  const frozen = frozenFor(run, 'query', round);
  const view = await run.openView('item', frozen.itemGeneration);
  const { minCarriers } = plannerVocabulary(run.config);
  const phrases = queryVocabulary(view, minCarriers);
  const half = `r${round}-query`;
  const body = {
    format: VOCABULARY_FILE_VERSION,
    dataset: run.config.dataset,
    half,
    itemGeneration: frozen.itemGeneration,
    minCarriers,
    analyzer: view.analyzer.name,
    phrases: phrases.map(({ phrase, carriers }) => ({ phrase, carriers })),
  };
  mkdirSync(dir, { recursive: true });
  writeAtomic(join(dir, 'vocabulary.json'), JSON.stringify(body) + '\n');
  return { half, itemGeneration: frozen.itemGeneration, minCarriers, phrases: phrases.length };
}
