/**
 * Configuration of one co-evolution run, validated with zod at the boundary. Defaults
 * follow the paper (R = 5 rounds, G = 8 samples per input, K_max = 30, 10 query-side
 * and 5 item-side epochs per round, rollouts at temperature 1.0, indexing and
 * evaluation at 0.7, top-p 0.8, GRPO clip ε = 0.2).
 */
import { z } from 'zod';
import { cogrError } from '../../index/errors.ts';
import type { ScorerOptions } from '../../rewards/scorer.ts';

export const RunConfigSchema = z
  .object({
    dataset: z.string().min(1),
    format: z.string().optional(),
    seed: z.number().int().nonnegative().default(1),
    /** Which held-out split: a train/eval split (fold = -1) or fold `fold` of `folds`. */
    folds: z.number().int().min(2).max(20).default(5),
    fold: z.number().int().min(-1).default(-1),
    evalFraction: z.number().gt(0).lt(1).default(0.2),
    rounds: z.number().int().min(0).max(50).default(5),
    groupSize: z.number().int().min(2).max(64).default(8),
    kMax: z.number().int().min(1).max(200).default(30),
    queryEpochs: z.number().int().min(0).max(100).default(10),
    itemEpochs: z.number().int().min(0).max(100).default(5),
    sftEpochs: z.number().int().min(0).max(100).default(5),
    /** Items sampled per item-side epoch (0 = all). */
    itemsPerEpoch: z.number().int().min(0).default(0),
    rolloutTemperature: z.number().positive().default(1.0),
    decodeTemperature: z.number().positive().default(0.7),
    /**
     * How indexing and evaluation decode keywords: 'greedy' (the embedded policy's argmax
     * sequence with its stop rule: stable across generations, the default) or 'sample'
     * (temperature `decodeTemperature`, seeded per entity, as the paper does with LLMs).
     */
    decode: z.enum(['greedy', 'sample']).default('greedy'),
    topP: z.number().gt(0).max(1).default(0.8),
    lr: z.number().positive().default(0.05),
    clip: z.number().positive().default(0.2),
    klCoef: z.number().nonnegative().default(0),
    beta: z.number().positive().default(1),
    /** SFT: keywords per item (M) and per query target (N). */
    sftItemKeywords: z.number().int().min(1).default(10),
    sftQueryKeywords: z.number().int().min(1).default(15),
    workers: z.number().int().min(1).max(64).optional(),
    dropDegenerateGroups: z.boolean().default(true),
  })
  .strict();

export type RunConfig = z.output<typeof RunConfigSchema>;
export type RunConfigInput = z.input<typeof RunConfigSchema>;

export function parseRunConfig(input: unknown): RunConfig {
  const r = RunConfigSchema.safeParse(input);
  if (!r.success) {
    const issue = r.error.issues[0];
    const path = issue.path.length ? issue.path.join('.') : '(config)';
    throw cogrError('INVALID_ARGUMENT', `run config field ${path}: ${issue.message}`, { issues: r.error.issues });
  }
  return r.data;
}

/**
 * Fields whose change makes a stored run a different experiment (refused on resume).
 * `rounds` is not one of them: asking for more rounds extends a finished run.
 */
export const IDENTITY_FIELDS: readonly (keyof RunConfig)[] = [
  'dataset',
  'format',
  'seed',
  'folds',
  'fold',
  'evalFraction',
  'groupSize',
  'kMax',
  'queryEpochs',
  'itemEpochs',
  'sftEpochs',
  'itemsPerEpoch',
  'rolloutTemperature',
  'decodeTemperature',
  'decode',
  'topP',
  'lr',
  'clip',
  'klCoef',
  'beta',
  'sftItemKeywords',
  'sftQueryKeywords',
  'dropDegenerateGroups',
];

export function configDifferences(stored: RunConfig, wanted: RunConfig): string[] {
  const out: string[] = [];
  for (const k of IDENTITY_FIELDS) {
    if (JSON.stringify(stored[k]) !== JSON.stringify(wanted[k])) out.push(`${k}: stored ${JSON.stringify(stored[k])}, asked ${JSON.stringify(wanted[k])}`);
  }
  return out;
}

/** The reward options of a run: its budget and F-beta. */
export function scorerOptions(config: Pick<RunConfig, 'kMax' | 'beta'>): ScorerOptions {
  return { kMax: config.kMax, beta: config.beta };
}
