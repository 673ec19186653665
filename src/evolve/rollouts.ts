/**
 * Rollouts for an external RL trainer (TRL, verl, OpenRLHF) and external keyword
 * generations, against the frozen generations of a stored run.
 *
 * `writeRollouts`: for round r of a side, every training entity (training queries on the
 * query side, all items on the item side) gets G sampled completions from the generator
 * (the embedded policy of round r−1, or an OpenAI-compatible LLM), each scored with the
 * layered reward (format → budget → result) against the frozen opposite generation the
 * round trains against (query side: item generation of round r−1; item side: query
 * generation r, counterfactual reward relative to item generation r−1), with group-
 * normalised advantages. One JSONL line per completion:
 *   {group_id, side, round, entity_id, prompt: [chat messages], completion: [{role:
 *    "assistant", content}], keywords, reward, reason, advantage, logprob, matched?}
 *
 * `importGeneration`: keywords produced elsewhere become a new generation of a side of
 * the run (training entities only on the query side: held-out queries' keywords are used
 * only to evaluate), evaluated like any other and recorded under `imports`.
 */
import { createWriteStream, existsSync } from 'node:fs';
import { once } from 'node:events';
import { z } from 'zod';
import type { CogrDb } from '../../index/db.ts';
import { cogrError } from '../../index/errors.ts';
import { silentLogger, type Logger } from '../../index/log.ts';
import { deriveSeed } from '../../index/random.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { Corpus, Side } from '../../index/types.ts';
import { normalizeKeywordSet } from '../../index/normalize.ts';
import { loadPolicy, POLICY_SUBLEVEL } from '../../generators/policyStore.ts';
import { loadPromptTemplate, renderPrompt, type ChatMessage } from '../../generators/prompts.ts';
import { itemInput, queryInput } from '../../generators/sft.ts';
import type { GenerateInput, KeyValueStore, KeywordGenerator, KeywordSample } from '../../generators/types.ts';
import { groupAdvantages } from '../../rewards/grpo.ts';
import { createItemScorer, createQueryScorer } from '../../rewards/scorer.ts';
import { readJsonl } from '../datasets/common.ts';
import type { ProgressSink } from '../progress.ts';
import { silentProgress } from '../progress.ts';
import { evaluateHeldOut, policyKeywords, type QueryKeywordsFn } from './evaluate.ts';
import { RunState, type HeldOutMetrics, type RunSplit, type StepRecord } from './state.ts';
import { scorerOptions, type RunConfig } from './config.ts';

export interface StoredRun {
  config: RunConfig;
  split: RunSplit;
  steps: StepRecord[];
}

export async function readStoredRun(db: CogrDb): Promise<StoredRun> {
  const state = new RunState(db);
  const config = await state.config();
  const split = await state.split();
  if (!config || !split) throw cogrError('NOT_FOUND', `the database ${db.path} holds no co-evolution run (run cogr demo or cogr evolve first)`);
  return { config, split, steps: await state.steps() };
}

/** The generations round r of a side trains against. */
function frozenFor(run: StoredRun, side: Side, round: number): { itemGeneration: number; queryGeneration: number | null } {
  if (!Number.isInteger(round) || round < 1) throw cogrError('INVALID_ARGUMENT', `--round: expected an integer ≥ 1, got ${round}`);
  const before = run.steps.find((s) => s.step === (round === 1 ? 'sft' : `r${round - 1}-item`));
  if (!before) throw cogrError('NOT_FOUND', `round ${round} needs step ${round === 1 ? 'sft' : `r${round - 1}-item`}, which this run has not committed (steps: ${run.steps.map((s) => s.step).join(', ') || 'none'})`);
  if (side === 'query') return { itemGeneration: before.itemGeneration, queryGeneration: null };
  const q = run.steps.find((s) => s.step === `r${round}-query`);
  if (!q) throw cogrError('NOT_FOUND', `item-side rollouts of round ${round} need step r${round}-query, which this run has not committed`);
  return { itemGeneration: before.itemGeneration, queryGeneration: q.queryGeneration };
}

export interface RolloutOptions {
  side: Side;
  round: number;
  out: string;
  /** Completions per entity (default the run's G). */
  samples?: number;
  temperature?: number;
  /** Only the first n entities (0 = all). */
  limit?: number;
  /** An external generator (LLM); default the run's embedded policy of round r−1. */
  generator?: KeywordGenerator;
  logger?: Logger;
  progress?: ProgressSink;
}

export interface RolloutSummary {
  lines: number;
  groups: number;
  degenerateGroups: number;
  meanReward: number;
  reasons: Record<'ok' | 'over_budget' | 'invalid_format', number>;
}

function completionText(s: KeywordSample): string {
  return s.raw ?? JSON.stringify({ keywords: s.keywords });
}

export async function writeRollouts(db: CogrDb, corpus: Corpus, opts: RolloutOptions): Promise<RolloutSummary> {
  const logger = opts.logger ?? silentLogger;
  const progress = opts.progress ?? silentProgress;
  const run = await readStoredRun(db);
  const { config } = run;
  const frozen = frozenFor(run, opts.side, opts.round);
  const store = new KeywordIndexStore(db);
  const itemView = await store.openView('item', frozen.itemGeneration);
  const queryView = frozen.queryGeneration === null ? null : await store.openView('query', frozen.queryGeneration);
  const G = opts.samples ?? config.groupSize;
  const temperature = opts.temperature ?? config.rolloutTemperature;
  const trainSet = new Set(run.split.train);
  const trainRelevant = new Map<string, Set<string>>();
  for (const id of run.split.train) trainRelevant.set(id, new Set(corpus.relevant.get(id) ?? []));

  let generator = opts.generator;
  if (!generator) {
    const policy = await loadPolicy(db.sublevel(POLICY_SUBLEVEL) as unknown as KeyValueStore, opts.side, opts.round - 1);
    policy.attachOpposite(opts.side === 'query' ? itemView : queryView);
    generator = policy;
  }
  const template = loadPromptTemplate(opts.side);
  const byId = new Map(corpus.queries.map((q) => [q.id, q]));
  let inputs: GenerateInput[] =
    opts.side === 'query' ? run.split.train.map((id) => queryInput(byId.get(id)!)) : corpus.items.map((it) => itemInput(it));
  if (opts.limit && opts.limit > 0) inputs = inputs.slice(0, opts.limit);

  // The side's scorer against the frozen generations the round trains against.
  const scorer =
    opts.side === 'query'
      ? createQueryScorer(itemView, { relevant: trainRelevant, queryText: new Map(inputs.map((x) => [x.id, x.text])) }, scorerOptions(config))
      : createItemScorer(itemView, queryView!, { relevant: trainRelevant, counted: trainSet }, scorerOptions(config));

  const out = createWriteStream(opts.out, { encoding: 'utf8' });
  const summary: RolloutSummary = { lines: 0, groups: 0, degenerateGroups: 0, meanReward: 0, reasons: { ok: 0, over_budget: 0, invalid_format: 0 } };
  let rewardSum = 0;
  progress.start(`rollouts ${opts.side} round ${opts.round}`, inputs.length);
  const BATCH = 32;
  for (let b = 0; b < inputs.length; b += BATCH) {
    const batch = inputs.slice(b, b + BATCH);
    const samples = await generator.generate(opts.side, batch, { samples: G, temperature, seed: deriveSeed(config.seed, 'rollouts', opts.side, opts.round) });
    for (let i = 0; i < batch.length; i++) {
      const input = batch[i];
      const prompt: ChatMessage[] = renderPrompt(template, input, [], config.kMax);
      const r = scorer.score(
        samples[i].map((s) => ({ id: input.id, keywords: s.format === 'ok' ? s.keywords : null })),
        { details: true },
      );
      const scored = samples[i].map((s, k) => ({
        s,
        lr: { reward: r.rewards[k]!, reason: r.reasons[k]!, keywords: r.keywords![k] },
        // Matched items of a query's keywords (the item side reports no such count).
        matched: opts.side === 'query' && r.reasons[k] === 'ok' ? r.details![k]!.matched : -1,
      }));
      const rewards = scored.map((x) => x.lr.reward);
      const adv = groupAdvantages(rewards);
      if (rewards.every((r) => r === rewards[0])) summary.degenerateGroups++;
      summary.groups++;
      scored.forEach(({ s, lr, matched }, k) => {
        summary.reasons[lr.reason]++;
        rewardSum += lr.reward;
        summary.lines++;
        const line: Record<string, unknown> = {
          group_id: `${opts.side}:${opts.round}:${input.id}`,
          side: opts.side,
          round: opts.round,
          entity_id: input.id,
          prompt,
          completion: [{ role: 'assistant', content: completionText(s) }],
          keywords: lr.keywords,
          reward: lr.reward,
          reason: lr.reason,
          advantage: adv[k],
          logprob: s.logProb,
        };
        if (matched >= 0) line.matched = matched;
        out.write(JSON.stringify(line) + '\n');
      });
      progress.tick();
    }
  }
  out.end();
  await once(out, 'finish');
  progress.end();
  summary.meanReward = summary.lines ? rewardSum / summary.lines : 0;
  logger.info('rollouts written', { out: opts.out, ...summary.reasons, lines: summary.lines });
  return summary;
}

// ---------------------------------------------------------------------------------------

const ImportLine = z.object({
  id: z.union([z.string().min(1), z.number()]).transform(String),
  keywords: z.array(z.string()),
  title: z.string().optional(),
});

export interface ImportRecord {
  side: Side;
  generation: number;
  source: string;
  entities: number;
  /** Held-out queries whose keywords came from the file (query side). */
  heldOutFromFile: number;
  metrics: HeldOutMetrics;
  importedAt: string;
}

/** Read `{"id", "keywords": [...], "title"?}` lines; every id must be a known entity. */
export function readKeywordFile(path: string, known: ReadonlySet<string>, side: Side): Map<string, { keywords: string[]; title?: string }> {
  if (!existsSync(path)) throw cogrError('DATA_MISSING', `--from: ${path} does not exist`);
  const out = new Map<string, { keywords: string[]; title?: string }>();
  for (const { value, line } of readJsonl(path, ImportLine)) {
    if (!known.has(value.id)) throw cogrError('NOT_FOUND', `${path}:${line}: unknown ${side} id ${JSON.stringify(value.id)} (not in the run's dataset)`);
    if (out.has(value.id)) throw cogrError('DUPLICATE_ID', `${path}:${line}: id ${JSON.stringify(value.id)} occurs twice`);
    out.set(value.id, { keywords: normalizeKeywordSet(value.keywords).keywords, ...(value.title !== undefined ? { title: value.title } : {}) });
  }
  if (out.size === 0) throw cogrError('DATA_FORMAT', `${path}: no keyword lines`);
  return out;
}

export async function importGeneration(db: CogrDb, corpus: Corpus, side: Side, path: string, logger: Logger = silentLogger): Promise<ImportRecord> {
  const run = await readStoredRun(db);
  const store = new KeywordIndexStore(db);
  const policies = db.sublevel(POLICY_SUBLEVEL) as unknown as KeyValueStore;
  const known = new Set(side === 'item' ? corpus.items.map((i) => i.id) : corpus.queries.map((q) => q.id));
  const lines = readKeywordFile(path, known, side);
  const evalSet = new Set(run.split.eval);
  const trainSet = new Set(run.split.train);
  const byQuery = new Map(corpus.queries.map((q) => [q.id, q]));
  const byItem = new Map(corpus.items.map((i) => [i.id, i]));
  const evalQueries = run.split.eval.map((id) => byQuery.get(id)!);
  let generation: number;
  let metrics: HeldOutMetrics;
  let heldOutFromFile = 0;
  if (side === 'item') {
    const w = store.writer('item', { base: await store.latest('item') });
    for (const [id, v] of lines) w.set(id, v.title ?? byItem.get(id)!.title, v.keywords);
    generation = await w.commit({ step: 'import', source: path });
    const view = await store.openView('item', generation);
    const qp = await loadPolicy(policies, 'query', 'latest');
    qp.attachOpposite(view);
    metrics = evaluateHeldOut(view, evalQueries, policyKeywords(qp, deriveSeed(run.config.seed, 'import'), run.config), corpus, run.config.beta);
  } else {
    // Held-out queries never enter a generation (they would reach item rewards).
    const w = store.writer('query', { base: await store.latest('query') });
    let written = 0;
    for (const [id, v] of lines) {
      if (!trainSet.has(id)) continue;
      w.set(id, byQuery.get(id)!.text, v.keywords);
      written++;
    }
    if (written === 0) logger.warn(`${path}: no training query in the file; the new query generation equals the previous one`);
    generation = await w.commit({ step: 'import', source: path });
    const latestItem = await store.latest('item');
    if (latestItem === null) throw cogrError('NOT_FOUND', 'no item generation to evaluate against');
    const view = await store.openView('item', latestItem);
    const fromFile: QueryKeywordsFn = (q) => lines.get(q.id)?.keywords ?? [];
    heldOutFromFile = run.split.eval.filter((id) => lines.has(id)).length;
    if (heldOutFromFile < evalSet.size) logger.warn(`${path}: ${evalSet.size - heldOutFromFile} held-out queries have no keywords in the file; they are evaluated with their raw text only`);
    metrics = evaluateHeldOut(view, evalQueries, fromFile, corpus, run.config.beta);
  }
  const rec: ImportRecord = { side, generation, source: path, entities: lines.size, heldOutFromFile, metrics, importedAt: new Date().toISOString() };
  const sub = db.sublevel('run');
  const imports = ((await sub.get('imports')) as ImportRecord[] | undefined) ?? [];
  imports.push(rec);
  await sub.put('imports', imports);
  return rec;
}
