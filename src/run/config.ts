/**
 * Configuration of one co-evolution run, validated with zod at the boundary. Defaults
 * (index/defaults.ts) follow the paper where it gives one — R = 5 rounds, G = 8 samples
 * per input, K_max = 30, rollouts at temperature 1.0, indexing and evaluation at 0.7,
 * top-p 0.8, GRPO clip ε = 0.2 — with 3 GRPO epochs per half-round (the paper's 10 / 5
 * trained LLMs; see DEFAULTS.run).
 */
import { z } from 'zod';
import { DEFAULTS, K_MAX } from '../../index/defaults.ts';
import { ANALYZERS, DEFAULT_ANALYZER } from '../../index/analyzer.ts';
import { schemaError } from '../../index/errors.ts';
import type { ScorerOptions } from '../../rewards/scorer.ts';
import { RANKERS } from '../../generators/planner/ranking.ts';

export const RunConfigSchema = z
  .object({
    dataset: z.string().min(1),
    format: z.string().optional(),
    seed: z.number().int().nonnegative().default(DEFAULTS.run.seed),
    /** Which held-out split: a train/eval split (fold = -1) or fold `fold` of `folds`. */
    folds: z.number().int().min(2).max(20).default(DEFAULTS.run.folds),
    fold: z.number().int().min(-1).default(-1),
    evalFraction: z.number().gt(0).lt(1).default(DEFAULTS.run.evalFraction),
    rounds: z.number().int().min(0).max(50).default(DEFAULTS.run.rounds),
    groupSize: z.number().int().min(2).max(64).default(DEFAULTS.run.groupSize),
    kMax: z.number().int().min(1).max(200).default(K_MAX),
    queryEpochs: z.number().int().min(0).max(100).default(DEFAULTS.run.queryEpochs),
    itemEpochs: z.number().int().min(0).max(100).default(DEFAULTS.run.itemEpochs),
    sftEpochs: z.number().int().min(0).max(100).default(DEFAULTS.run.sftEpochs),
    /** Items sampled per item-side epoch (0 = all). */
    itemsPerEpoch: z.number().int().min(0).default(0),
    rolloutTemperature: z.number().positive().default(DEFAULTS.decoding.rollout.temperature),
    decodeTemperature: z.number().positive().default(DEFAULTS.decoding.index.temperature),
    /**
     * How indexing and evaluation decode keywords: 'greedy' (the embedded policy's argmax
     * sequence with its stop rule: stable across generations, the default) or 'sample'
     * (temperature `decodeTemperature`, seeded per entity, as the paper does with LLMs).
     */
    decode: z.enum(['greedy', 'sample']).default('greedy'),
    /** Nucleus mass of indexing and evaluation decoding when decode is 'sample' (rollouts are not truncated). */
    topP: z.number().gt(0).max(1).default(DEFAULTS.decoding.index.topP),
    lr: z.number().positive().default(DEFAULTS.run.lr),
    clip: z.number().positive().default(DEFAULTS.run.clip),
    klCoef: z.number().nonnegative().default(DEFAULTS.run.klCoef),
    beta: z.number().positive().default(DEFAULTS.run.beta),
    /** SFT: keywords per item (M) from the base generator, or 'auto' (the M of DEFAULTS.sft.itemKeywordsGrid with the best training F1). */
    sftItemKeywords: z.union([z.number().int().min(1).max(200), z.literal('auto')]).default('auto'),
    /** How keywords are matched (index/analyzer.ts). */
    analyzer: z.enum(ANALYZERS).default(DEFAULT_ANALYZER),
    /** Share of the training queries carved out (seeded) as the dev split that decides which half-rounds are adopted. */
    devFraction: z.number().min(0).max(0.5).default(DEFAULTS.run.devFraction),
    /** The adoption test's z: a half-round is adopted when its mean dev gain is ≥ 0 and ≥ z standard errors (run/state.ts adoptionTest). */
    adoptZ: z.number().min(0).max(10).default(DEFAULTS.run.adoptZ),
    /**
     * The queries the adoption test pairs: 'dev' or 'pooled' (the dev queries and the core
     * training queries planned and searched as held out, with the dev gain alone still ≥ 0).
     * Runs written before this field were 'dev'.
     */
    adoptOn: z.enum(['dev', 'pooled']).default(DEFAULTS.run.adoptOn),
    /**
     * The served set's floor (run/state.ts SetFloor): 'fallback' — a query whose keywords
     * match nothing gets the top c items by p(item | query) instead of an empty list, c
     * chosen at SFT on the core training queries planned as held out; 'auto' — also every
     * matched set gains the top m by p when m passes the adoption test on those queries;
     * 'none' — the matched set alone, possibly empty. Runs written before this field were 'none'.
     */
    floor: z.enum(['fallback', 'auto', 'none']).default(DEFAULTS.run.floor),
    /** The query planner: items whose keywords are candidates, the scale λ of its log-gain, its GRPO learning rate and parameters. */
    plannerTopItems: z.number().int().min(1).max(10_000).default(DEFAULTS.planner.topItems),
    plannerLambda: z.number().positive().default(DEFAULTS.planner.lambda),
    plannerLr: z.number().positive().default(DEFAULTS.planner.lr),
    plannerParams: z.enum(['all', 'terms', 'global']).default(DEFAULTS.planner.grpoParams),
    /** The relevance model: nearest training queries per similarity, and whether training judgements are features. */
    relevanceNeighbours: z.number().int().min(1).max(1000).default(DEFAULTS.relevance.neighbours),
    relevanceJudgements: z.boolean().default(DEFAULTS.relevance.judgements),
    /** The relevance model's query-term-frequency BM25 features (relevance.ts QUERY_TF_FEATURES); runs written before them had none. */
    relevanceQueryTf: z.boolean().default(DEFAULTS.relevance.queryTf),
    /**
     * What the query side offers items in item half-rounds: 'labels' (each judging or
     * high-ranking training query's own name: its string, or its label when the string
     * is over the keyword limits) or 'keywords' (every keyword of those queries).
     */
    itemQuerySide: z.enum(['labels', 'keywords']).default(DEFAULTS.run.itemQuerySide),
    /** A training query "ranks an item high" when the item is among its top this-many by relevance. */
    itemRankDepth: z.number().int().min(0).max(1000).default(DEFAULTS.run.itemRankDepth),
    workers: z.number().int().min(1).max(64).optional(),
    dropDegenerateGroups: z.boolean().default(DEFAULTS.run.dropDegenerateGroups),
    /**
     * GRPO groups: 'exact' (each input's G samples) or 'semantic' (CoSearch: inputs whose
     * texts — query text, item title — reach token F1 ≥ groupingDelta form one group when
     * at least groupingMinSize of them do; rewards are normalised over all their samples).
     */
    grouping: z.enum(['exact', 'semantic']).default('exact'),
    groupingDelta: z.number().gt(0).max(1).default(DEFAULTS.grouping.delta),
    groupingMinSize: z.number().int().min(2).default(DEFAULTS.grouping.minSize),
    /**
     * How matched sets are ranked (generators/planner/ranking.ts): 'auto' (the ranker with
     * the best nDCG@10 over the dev queries and the core training queries planned as held
     * out, chosen once at SFT), or a ranker. Not an identity field: it changes no
     * generation; every step records every ranker's figures.
     */
    rank: z.enum(['auto', ...RANKERS]).default(DEFAULTS.run.rank),
  })
  .strict();

export type RunConfig = z.output<typeof RunConfigSchema>;

/**
 * Identity fields added after runs were stored, with the behaviour those runs had: a
 * stored config without one reads as this value, not as today's default.
 */
const STORED_BEFORE: Partial<RunConfigInput> = { adoptOn: 'dev', floor: 'none', relevanceQueryTf: false };

/** A stored run config, validated; fields it predates get the behaviour it ran with (STORED_BEFORE), later ones their defaults. */
export function parseStoredConfig(raw: unknown): ReturnType<typeof RunConfigSchema.safeParse> {
  const withLegacy = raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? { ...STORED_BEFORE, ...(raw as Record<string, unknown>) } : raw;
  return RunConfigSchema.safeParse(withLegacy);
}
export type RunConfigInput = z.input<typeof RunConfigSchema>;

export function parseRunConfig(input: unknown): RunConfig {
  const r = RunConfigSchema.safeParse(input);
  if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error, { what: 'run config' });
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
  'analyzer',
  'devFraction',
  'adoptZ',
  'adoptOn',
  'floor',
  'plannerTopItems',
  'plannerLambda',
  'plannerLr',
  'plannerParams',
  'relevanceNeighbours',
  'relevanceJudgements',
  'relevanceQueryTf',
  'itemQuerySide',
  'itemRankDepth',
  'dropDegenerateGroups',
  'grouping',
  'groupingDelta',
  'groupingMinSize',
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

/** The M values SFT tries (one when the config names it). */
export function sftItemKeywordGrid(config: Pick<RunConfig, 'sftItemKeywords'>): readonly number[] {
  return config.sftItemKeywords === 'auto' ? DEFAULTS.sft.itemKeywordsGrid : [config.sftItemKeywords];
}
