/**
 * Rollouts for an external RL trainer (TRL, verl, OpenRLHF) against the frozen
 * generations of a stored run.
 *
 * `writeRollouts`: for round r of a side, every training entity (the training queries
 * outside the dev split on the query side, all items on the item side) gets G sampled
 * completions from the generator (the run's embedded generator the half-round starts
 * from — the query planner, planning each training query as held out, or the item policy
 * with the query side's offers — or an OpenAI-compatible LLM), each scored with the
 * layered reward (format → budget → result) against the frozen generations the half-round
 * trains against (the last adopted step before it: query side, its item generation, each
 * training query scored as held out — its own {q} not matched and its own names left out
 * of its keywords; item side, its query generation with the counterfactual reward
 * relative to its item generation), with group-normalised advantages. A GRPO group is one entity's G completions, or with semantic
 * grouping (`grouping: 'semantic'`, CoSearch) the completions of all near-identical
 * entities (token F1 of the query texts / item titles ≥ δ, at least k_min of them), whose
 * rewards are normalised together; `group_id` names the group by its first entity. One
 * JSONL line per completion:
 *   {group_id, side, round, entity_id, prompt: [chat messages], completion: [{role:
 *    "assistant", content}], keywords, reward, reason, advantage, logprob, matched?}
 * An input the generator fails on (an LLM endpoint, after its retries) does not discard
 * the others: its group is left out (a group's advantages need all its members), the
 * groups answered are written, generation stops after the batch of the failure, and the
 * summary lists the inputs without lines (`failed`) and the first failure.
 */
import { createWriteStream } from 'node:fs';
import { finished } from 'node:stream/promises';
import type { CogrDb } from '../../index/store/db.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import { deriveSeed } from '../../index/core/random.ts';
import type { Corpus, Side } from '../../index/core/types.ts';
import { OpenAIGenerator } from '../../generators/llm.ts';
import { trainingQueryExamples } from './examples.ts';
import { loadPromptTemplate, renderPrompt, type ChatMessage } from '../../generators/prompts.ts';
import { itemInput, queryInput } from '../../generators/sft.ts';
import { generateSettled, type GenerateInput, type KeywordGenerator, type KeywordSample } from '../../generators/types.ts';
import { batchGroups, grpoGroups } from '../../rewards/grouping.ts';
import { pooledAdvantages } from '../../rewards/grpo.ts';
import { outputError } from '../output.ts';
import type { ProgressSink } from '../progress.ts';
import { silentProgress } from '../progress.ts';
import { frozenHalfRound, openRun } from '../run/context.ts';

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
  /** GRPO groups: 'exact' (each entity's samples) or 'semantic' (near-identical entities pooled); default the run's. */
  grouping?: 'exact' | 'semantic';
  /** Token-F1 threshold δ of semantic grouping; default the run's. */
  groupingDelta?: number;
  logger?: Logger;
  progress?: ProgressSink;
}

export interface RolloutSummary {
  lines: number;
  groups: number;
  degenerateGroups: number;
  meanReward: number;
  reasons: Record<'ok' | 'over_budget' | 'invalid_format', number>;
  /** Inputs without lines, in input order: failed, in a group with a failed member, or not attempted after a failure. */
  failed: string[];
  /** The first failure, `<input id>: <message>`. */
  failure?: string;
}

function completionText(s: KeywordSample): string {
  return s.raw ?? JSON.stringify({ keywords: s.keywords });
}

export async function writeRollouts(db: CogrDb, corpus: Corpus, opts: RolloutOptions): Promise<RolloutSummary> {
  const logger = opts.logger ?? silentLogger;
  const progress = opts.progress ?? silentProgress;
  const run = await openRun(db, corpus);
  const { config } = run;
  const half = await frozenHalfRound(run, opts.side, opts.round);
  const G = opts.samples ?? config.groupSize;
  const temperature = opts.temperature ?? config.rolloutTemperature;
  // The training queries the run trains on: outside the dev split.
  const coreQueries = run.coreQueries;
  let generator = opts.generator;
  if (!generator) {
    if (opts.side === 'query') {
      half.planner.leaveOneOut = true;
      generator = half.planner;
    } else generator = await half.itemPolicy();
  }
  const template = loadPromptTemplate(opts.side);
  if (generator instanceof OpenAIGenerator && opts.side === 'query') {
    // Worked examples for the LLM: training queries (never held-out or dev ones) with their SFT targets, the query planner's plans as held out.
    generator.setExamples('query', await trainingQueryExamples(half.planner, coreQueries, deriveSeed(config.seed, opts.round)));
  }
  let inputs: GenerateInput[] = opts.side === 'query' ? coreQueries.map((q) => queryInput(q)) : corpus.items.map((it) => itemInput(it));
  if (opts.limit && opts.limit > 0) inputs = inputs.slice(0, opts.limit);

  // The side's scorer against the frozen generations the round trains against; a training
  // query is scored as held out (no {q}, its own names left out of the keywords).
  const { scorer } = half;

  // GRPO groups of the inputs (each input alone, or near-identical inputs pooled), in batches of whole groups.
  const grouping = opts.grouping ?? config.grouping;
  const groups = grpoGroups(
    inputs.map((x) => (opts.side === 'query' ? x.text : (x.title ?? ''))),
    grouping,
    { delta: opts.groupingDelta ?? config.groupingDelta, kMin: config.groupingMinSize },
  );

  const out = createWriteStream(opts.out, { encoding: 'utf8' });
  // A write that fails (a full device) is kept and reported naming the file, never an unhandled 'error' event.
  let writeError: unknown = null;
  out.on('error', (e) => (writeError ??= e));
  const summary: RolloutSummary = {
    lines: 0,
    groups: 0,
    degenerateGroups: 0,
    meanReward: 0,
    reasons: { ok: 0, over_budget: 0, invalid_format: 0 },
    failed: [],
  };
  let rewardSum = 0;
  const failed = new Set<number>();
  progress.start(`rollouts ${opts.side} round ${opts.round}`, inputs.length);
  for (const batchGroupsOfInputs of batchGroups(groups, 32)) {
    if (writeError !== null) break;
    const ordinals = batchGroupsOfInputs.flat();
    if (summary.failure !== undefined) {
      // Not attempted: the generator failed on an earlier batch.
      for (const i of ordinals) failed.add(i);
      continue;
    }
    const batch = ordinals.map((i) => inputs[i]);
    const settled = await generateSettled(generator, opts.side, batch, {
      samples: G,
      temperature,
      seed: deriveSeed(config.seed, 'rollouts', opts.side, opts.round),
    });
    let at = 0;
    for (const g of batchGroupsOfInputs) {
      const members = g.map((_, j) => at + j);
      at += g.length;
      const samples: KeywordSample[][] = [];
      for (const i of members) {
        const r = settled[i];
        if (r.ok) samples.push(r.samples);
        else summary.failure ??= `${batch[i].id}: ${r.error.message}`;
      }
      if (samples.length < members.length) {
        // A member failed: the group's advantages need all of them, so the group is left out.
        for (const i of members) {
          failed.add(ordinals[i]);
          progress.tick();
        }
        continue;
      }
      const scored = members.map((i, j) => {
        const input = batch[i];
        const r = scorer.score(
          samples[j].map((s) => ({ id: input.id, keywords: s.format === 'ok' ? s.keywords : null })),
          { details: true },
        );
        return samples[j].map((s, k) => ({
          s,
          lr: { reward: r.rewards[k]!, reason: r.reasons[k]!, keywords: r.keywords![k] },
          // Matched items of a query's keywords (the item side reports no such count).
          matched: opts.side === 'query' && r.reasons[k] === 'ok' ? r.details![k]!.matched : -1,
        }));
      });
      const adv = pooledAdvantages(
        scored.map((x) => x.map((y) => y.lr.reward)),
        [members.map((_, j) => j)],
      );
      summary.groups++;
      summary.degenerateGroups += adv.degenerate;
      // A group is named after its first member (for an input alone: that input).
      const groupId = `${opts.side}:${opts.round}:${batch[members[0]].id}`;
      members.forEach((i, j) => {
        const input = batch[i];
        // What was sent (the LLM's prompt: its keyword limit and examples), else the prompt an LLM would get.
        const prompt: ChatMessage[] =
          generator instanceof OpenAIGenerator ? generator.promptFor(opts.side, input) : renderPrompt(template, input, [], config.kMax);
        scored[j].forEach(({ s, lr, matched }, k) => {
          summary.reasons[lr.reason]++;
          rewardSum += lr.reward;
          summary.lines++;
          const line: Record<string, unknown> = {
            group_id: groupId,
            side: opts.side,
            round: opts.round,
            entity_id: input.id,
            prompt,
            completion: [{ role: 'assistant', content: completionText(s) }],
            keywords: lr.keywords,
            reward: lr.reward,
            reason: lr.reason,
            advantage: adv.advantages[j]![k],
            logprob: s.logProb,
          };
          if (matched >= 0) line.matched = matched;
          out.write(JSON.stringify(line) + '\n');
        });
        progress.tick();
      });
    }
  }
  if (writeError === null) {
    out.end();
    await finished(out).catch((e: unknown) => (writeError ??= e));
  } else out.destroy();
  progress.end();
  if (writeError !== null) throw outputError(writeError, opts.out);
  summary.failed = [...failed].sort((a, b) => a - b).map((i) => inputs[i].id);
  summary.meanReward = summary.lines ? rewardSum / summary.lines : 0;
  logger.info('rollouts written', { out: opts.out, ...summary.reasons, lines: summary.lines });
  return summary;
}
