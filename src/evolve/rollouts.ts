/**
 * Rollouts for an external RL trainer (TRL, verl, OpenRLHF) against the frozen
 * generations of a stored run.
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
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { CogrDb } from '../../index/db.ts';
import { silentLogger, type Logger } from '../../index/log.ts';
import { deriveSeed } from '../../index/random.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import type { Corpus, Side } from '../../index/types.ts';
import { loadPromptTemplate, renderPrompt, type ChatMessage } from '../../generators/prompts.ts';
import { itemInput, queryInput } from '../../generators/sft.ts';
import type { GenerateInput, KeywordGenerator, KeywordSample } from '../../generators/types.ts';
import { groupAdvantages } from '../../rewards/grpo.ts';
import { createItemScorer, createQueryScorer } from '../../rewards/scorer.ts';
import type { ProgressSink } from '../progress.ts';
import { silentProgress } from '../progress.ts';
import { scorerOptions } from '../run/config.ts';
import { loadPolicy, policyStore } from '../run/policies.ts';
import { frozenFor, readStoredRun } from '../run/state.ts';

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
    const policy = await loadPolicy(policyStore(db), opts.side, opts.round - 1);
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
