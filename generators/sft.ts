/**
 * The SFT phase (the paper's Algorithm 1) for the embedded generators (runSft below): the
 * query planner's relevance model and α are fitted on the training queries, and the item
 * policy learns the base generator's M keywords per item. `buildQueryTargets` keeps the
 * paper's pooled query targets (the N = 15 most frequent keywords of a query's relevant
 * items) for LLM training; `exportTrl` writes SFT data as JSONL in TRL's conversational
 * prompt–completion format, with the prompts of the LLM generator (generators/prompts/).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS, K_MAX } from '../index/core/defaults.ts';
import { DEFAULT_ANALYZER, type AnalyzerName } from '../index/text/analyzer.ts';
import { silentLogger, type Logger } from '../index/core/log.ts';
import type { IndexEntry, Item, Query } from '../index/core/types.ts';
import { createRng, deriveSeed, shuffle } from '../index/core/random.ts';
import { KeywordView } from '../index/view/view.ts';
import { EmbeddedPolicy, type SftReport } from './policy/model.ts';
import { carriedTopM, type VocabularyOptions } from './policy/vocabulary.ts';
import { makeKeywordNormalizer } from '../index/text/normalize.ts';
import type { PlannerConfig } from './planner/config.ts';
import { KeywordPlanner } from './planner/planner.ts';
import { RelevanceModel, type RelevanceFit, type RelevanceOptions } from './planner/relevance.ts';
import { DEFAULT_PROMPT_DIR, loadPromptTemplate, renderPrompt } from './prompts.ts';
import type { GenerateInput } from './types.ts';

export function itemInput(item: Item): GenerateInput {
  return { id: item.id, title: item.title, text: item.text };
}
export function queryInput(q: Query): GenerateInput {
  return { id: q.id, text: q.text };
}

/** The N most frequent keywords pooled over each training query's relevant items. */
export function buildQueryTargets(
  trainQueries: readonly Query[],
  relevant: ReadonlyMap<string, ReadonlySet<string>>,
  itemKeywords: ReadonlyMap<string, readonly string[]>,
  N = DEFAULTS.sft.queryKeywords,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const q of trainQueries) {
    const counts = new Map<string, number>();
    for (const id of relevant.get(q.id) ?? []) for (const k of itemKeywords.get(id) ?? []) counts.set(k, (counts.get(k) ?? 0) + 1);
    if (counts.size === 0) continue;
    out.set(
      q.id,
      [...counts.entries()]
        .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
        .slice(0, N)
        .map(([k]) => k),
    );
  }
  return out;
}

/** The item index entries (self = title) for a keyword assignment. */
export function itemEntries(items: readonly Item[], keywords: ReadonlyMap<string, readonly string[]>): IndexEntry[] {
  return items.map((it) => ({ id: it.id, self: it.title, keywords: [...(keywords.get(it.id) ?? [])] }));
}

export interface SftRunOptions {
  /** Every item, and the training queries with their judgements (held-out and dev queries must not be here). */
  items: readonly Item[];
  trainQueries: readonly Query[];
  relevant: ReadonlyMap<string, ReadonlySet<string>>;
  /** Keywords per item from the base generator (M), or the values to choose from on training F1. */
  M?: number | readonly number[];
  epochs?: number;
  lr?: number;
  seed?: number;
  kMax?: number;
  analyzer?: AnalyzerName;
  relevance?: Partial<Omit<RelevanceOptions, 'analyzer'>>;
  planner?: Partial<PlannerConfig>;
  /**
   * The shared vocabulary (generators/policy/vocabulary.ts): the item policy's candidates are
   * its phrases and the base keywords of every item are carried by at least `minCarriers`
   * items; null (or absent): the open vocabulary of runs stored before it.
   */
  vocabulary?: { minCarriers: number; options?: Partial<VocabularyOptions> } | null;
  logger?: Logger;
  progress?: (label: string) => void;
}

export interface SftResult {
  itemPolicy: EmbeddedPolicy;
  planner: KeywordPlanner;
  relevance: RelevanceModel;
  /** The base generator's keywords per item (the item policy's SFT targets) for the chosen M. */
  itemKeywords: Map<string, string[]>;
  /** The chosen M and the training F1 (queries planned as held out, α tuned) of every M tried. */
  M: number;
  mCurve: [number, number][];
  /** The planner's keywords of every training query (planned as held out) on the base item index: the query side's SFT targets for an LLM. */
  queryTargets: Map<string, string[]>;
  itemReport: SftReport;
  relevanceFit: RelevanceFit;
}

/**
 * SFT (the paper's Algorithm 1) for the embedded generators:
 * 1. the relevance model p(item | query) is fitted on every (training query, item) pair
 *    (generators/planner/relevance.ts) — the query planner's supervised fit;
 * 2. the base generator (the item policy's untrained candidate ranking) writes M keywords
 *    per item; with several M, each is tried: the planner tunes α on the training queries
 *    (planned as held out) against the index of those keywords, and the M with the best
 *    training F1 is kept;
 * 3. the item policy is trained by maximum likelihood on (item, S_i).
 * The caller indexes the items with the trained item policy and tunes α on that index.
 */
export function runSft(opts: SftRunOptions): SftResult {
  const log = opts.logger ?? silentLogger;
  const { items, trainQueries, relevant } = opts;
  const seed = opts.seed ?? 1;
  const epochs = opts.epochs ?? DEFAULTS.run.sftEpochs;
  const analyzer = opts.analyzer ?? DEFAULT_ANALYZER;
  const training = trainQueries.map((q) => [{ id: q.id, text: q.text }, [...(relevant.get(q.id) ?? [])]] as const);
  opts.progress?.('fitting the relevance model');
  const relevance = RelevanceModel.fit(items, training, { ...opts.relevance, analyzer, seed });
  const relevanceFit = relevance.lastFit!;
  log.info('sft: relevance model fitted', { pairs: relevanceFit.pairs, rows: relevanceFit.rows, iterations: relevanceFit.iterations });
  const planner = new KeywordPlanner(relevance, { maxKeywords: opts.kMax ?? K_MAX, ...opts.planner });
  const itemPolicy = new EmbeddedPolicy('item', opts.kMax ? { kMax: opts.kMax } : {});
  itemPolicy.fitStats(items.map(itemInput));
  const shared = opts.vocabulary ?? null;
  if (shared) {
    opts.progress?.('building the shared vocabulary');
    const v = itemPolicy.fitVocabulary(items.map(itemInput), analyzer, shared.options);
    log.info('sft: shared vocabulary', { phrases: v.size, items: v.items, ...v.options });
  }
  const Ms = typeof opts.M === 'number' ? [opts.M] : [...(opts.M ?? DEFAULTS.sft.itemKeywordsGrid)];
  const maxM = Math.max(...Ms);
  const ranked = new Map<string, string[]>();
  // Under the shared vocabulary a list is refilled from further down when a keyword is struck (carriedTopM).
  for (const it of items) ranked.set(it.id, itemPolicy.rank(itemInput(it), shared ? 2 * maxM : maxM));
  const norm = makeKeywordNormalizer({ analyzer });
  const topM = (M: number): Map<string, string[]> =>
    shared ? carriedTopM(ranked, M, shared.minCarriers, norm.key) : new Map([...ranked].map(([id, ks]) => [id, ks.slice(0, M)]));
  const inputs = trainQueries.map(queryInput);
  // Above TUNING_QUERIES training queries, M and α are chosen on a seeded sample of them.
  const tuning = tuningQueries(inputs, seed);
  let best = { M: Ms[0], f1: -Infinity, view: null as KeywordView | null };
  const mCurve: [number, number][] = [];
  const assignments = new Map<number, Map<string, string[]>>();
  for (const M of Ms) {
    opts.progress?.(`trying M = ${M} keywords per item`);
    const assigned = topM(M);
    assignments.set(M, assigned);
    const view = KeywordView.build(
      'item',
      0,
      items.map((it) => ({ id: it.id, self: it.title, keywords: assigned.get(it.id)! })),
      { analyzer },
    );
    planner.attachOpposite(view);
    const rel = relevantOrdinals(view, relevant);
    const t = planner.tuneAlpha(tuning, (id) => rel.get(id) ?? EMPTY);
    mCurve.push([M, t.f1]);
    if (t.f1 > best.f1 + 1e-12) best = { M, f1: t.f1, view };
  }
  const itemKeywords = assignments.get(best.M)!;
  log.info('sft: base item keywords', { items: items.length, M: best.M, trainF1: best.f1 });
  log.debug('phase sft: α tuning (base keywords)');
  planner.attachOpposite(best.view);
  const relBest = relevantOrdinals(best.view!, relevant);
  planner.tuneAlpha(tuning, (id) => relBest.get(id) ?? EMPTY);
  log.debug('phase sft: query targets');
  const queryTargets = new Map<string, string[]>();
  for (const q of inputs) queryTargets.set(q.id, planner.plan(q, { asHeldOut: true }).keywords);
  opts.progress?.('training the item policy');
  const itemReport = itemPolicy.trainSft(
    items.map((it) => ({ input: itemInput(it), target: itemKeywords.get(it.id) ?? [] })),
    { epochs, lr: opts.lr, seed },
  );
  log.info('sft: item policy trained', { loss: itemReport.epochLoss.at(-1), coverage: itemReport.coverage });
  return { itemPolicy, planner, relevance, itemKeywords, M: best.M, mCurve, queryTargets, itemReport, relevanceFit };
}

const EMPTY: ReadonlySet<number> = new Set();

/**
 * Most training queries M and α are tuned on. Above it — collections with thousands of
 * training queries, none of the shipped ones (their folds hold a few hundred) — the
 * tuning reads a seeded sample of this many: an approximation (the F1 it maximises is
 * the sample's mean), which leaves every run at or below it unchanged.
 */
export const TUNING_QUERIES = 2000;

/** The queries of a tuning pass: all of them up to `max`, else a seeded sample of `max` in their original order. */
export function tuningQueries<T>(queries: readonly T[], seed: number, max = TUNING_QUERIES): readonly T[] {
  if (queries.length <= max) return queries;
  const order = shuffle(
    Array.from({ length: queries.length }, (_, i) => i),
    createRng(deriveSeed(seed, 'tuning-queries')),
  );
  return order
    .slice(0, max)
    .sort((a, b) => a - b)
    .map((i) => queries[i]);
}

/** Relevant item ordinals (in a view) of each query. */
export function relevantOrdinals(view: KeywordView, relevant: ReadonlyMap<string, ReadonlySet<string>>): Map<string, Set<number>> {
  const out = new Map<string, Set<number>>();
  for (const [q, ids] of relevant) {
    const s = new Set<number>();
    for (const id of ids) {
      const o = view.ordinalOf(id);
      if (o >= 0) s.add(o);
    }
    out.set(q, s);
  }
  return out;
}

/**
 * Write `item.jsonl` and `query.jsonl` (and `pseudo.jsonl` with `pseudo`) under dir: one line per example,
 * {"prompt": [{"role": "system", ...}, {"role": "user", ...}], "completion": [{"role":
 * "assistant", "content": "{\"keywords\": [...]}"}]} (TRL's conversational
 * prompt–completion format). Returns the number of lines written per file.
 */
export function exportTrl(
  dir: string,
  data: {
    items: readonly Item[];
    itemKeywords: ReadonlyMap<string, readonly string[]>;
    queries: readonly Query[];
    queryTargets: ReadonlyMap<string, readonly string[]>;
    promptDir?: string;
    /**
     * The most keywords an answer may hold: the prompts say it and each target keeps its
     * first this many (default: the LLM path's limit, min(K_max, llm.maxKeywords), which
     * the OpenAI client's schema and the TRL trainer's constrained decoding enforce).
     */
    keywordLimit?: number;
    /** 'none': prompts without the template's worked example; 'compact': the user message alone (prompts.ts renderPrompt). */
    examples?: 'template' | 'none' | 'compact';
    /** Extra query examples written to `pseudo.jsonl` (pseudo-queries: src/evolve/sftData.ts); the file is not written without them. */
    pseudo?: { queries: readonly Query[]; targets: ReadonlyMap<string, readonly string[]> };
  },
): { item: number; query: number; pseudo: number } {
  mkdirSync(dir, { recursive: true });
  const promptDir = data.promptDir ?? DEFAULT_PROMPT_DIR;
  const limit = data.keywordLimit ?? Math.min(K_MAX, DEFAULTS.llm.maxKeywords);
  const write = (side: 'item' | 'query', rows: { input: GenerateInput; keywords: readonly string[] }[], file: string = side) => {
    const t = loadPromptTemplate(side, promptDir);
    const lines = rows.map((r) =>
      JSON.stringify({
        id: r.input.id,
        prompt: renderPrompt(t, r.input, [], limit, data.examples === 'template' ? undefined : data.examples),
        completion: [{ role: 'assistant', content: JSON.stringify({ keywords: r.keywords.slice(0, limit) }) }],
      }),
    );
    writeFileSync(join(dir, `${file}.jsonl`), lines.length ? lines.join('\n') + '\n' : '');
    return lines.length;
  };
  const item = write(
    'item',
    data.items
      .filter((it) => data.itemKeywords.has(it.id))
      .map((it) => ({ input: itemInput(it), keywords: data.itemKeywords.get(it.id)! })),
  );
  const query = write(
    'query',
    data.queries.filter((q) => data.queryTargets.has(q.id)).map((q) => ({ input: queryInput(q), keywords: data.queryTargets.get(q.id)! })),
  );
  const ps = data.pseudo;
  // Without pseudo-queries, none is left from an earlier export to the same folder.
  if (!ps) rmSync(join(dir, 'pseudo.jsonl'), { force: true });
  const pseudo = ps
    ? write(
        'query',
        ps.queries
          .filter((q) => (ps.targets.get(q.id)?.length ?? 0) > 0)
          .map((q) => ({ input: queryInput(q), keywords: ps.targets.get(q.id)! })),
        'pseudo',
      )
    : 0;
  return { item, query, pseudo };
}
