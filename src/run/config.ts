/**
 * Configuration of one co-evolution run, validated with zod at the boundary. Defaults
 * (index/core/defaults.ts) follow the paper where it gives one — R = 5 rounds, G = 8 samples
 * per input, K_max = 30, rollouts at temperature 1.0, indexing and evaluation at 0.7,
 * top-p 0.8, GRPO clip ε = 0.2 — with 3 GRPO epochs per half-round (the paper's 10 / 5
 * trained LLMs; see DEFAULTS.run).
 */
import { z } from 'zod';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import { ANALYZERS, DEFAULT_ANALYZER } from '../../index/text/analyzer.ts';
import { TEXT_ANALYSES } from '../../index/text/english.ts';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import type { ScorerOptions } from '../../rewards/scorer.ts';
import { RANKERS } from '../../generators/planner/rankers.ts';

/**
 * How a run option's flag value is read: an integer, a number, a word (checked by the
 * schema), yes|no (a boolean), or an integer or "auto".
 */
export type RunFlagKind = 'int' | 'number' | 'string' | 'yesno' | 'intOrAuto';

/** A run option's command-line flag: its commander spelling, help and kind; `only` limits it to one command. */
export interface RunFlag {
  flag: string;
  help: string;
  kind: RunFlagKind;
  only?: 'demo' | 'evolve';
}

/** One row of the run-option table: the config field's schema (with its default), whether a resume must match it, and its flag. */
export interface RunOption {
  schema: z.ZodType;
  identity: boolean;
  cli?: RunFlag;
}

const opt = <S extends z.ZodType>(schema: S, identity: boolean, cli?: RunFlag) => ({ schema, identity, ...(cli ? { cli } : {}) });
const r = DEFAULTS.run;

/**
 * The run options, one row each, in the config's field order: the schema
 * (`RunConfigSchema`), the identity fields (`IDENTITY_FIELDS`), the flags of `cogr evolve`
 * and `cogr demo`, their help and their parsing (commands/options.ts `addRunFlags`,
 * `runFlagValues`) all come from here. Adding a run option is one row.
 */
export const RUN_OPTIONS = {
  dataset: opt(z.string().min(1), true),
  format: opt(z.string().optional(), true),
  seed: opt(z.number().int().nonnegative().default(r.seed), true, {
    flag: '--seed <n>',
    help: `seed of the split, sampling and training (default ${r.seed})`,
    kind: 'int',
  }),
  /** Which held-out split: a train/eval split (fold = -1) or fold `fold` of `folds`. */
  folds: opt(z.number().int().min(2).max(20).default(r.folds), true),
  fold: opt(z.number().int().min(-1).default(-1), true),
  evalFraction: opt(z.number().gt(0).lt(1).default(r.evalFraction), true, {
    flag: '--eval-fraction <x>',
    help: `share of judged queries held out (default ${r.evalFraction})`,
    kind: 'number',
    only: 'demo',
  }),
  /**
   * A seeded share of the items kept out of the run entirely (its SFT, rounds, indexes and
   * relevance model never see them or their judgements), keyworded at the end by the final
   * item generator from their text alone and added to the index (`cogr evolve`'s new_items
   * report, src/evolve/newItems.ts). 0: none.
   */
  newItems: opt(z.number().min(0).lt(1).default(0), true, {
    flag: '--new-items <fraction>',
    help: 'a seeded share of the items kept out of training entirely, keyworded at the end by the final item generator from their text alone; reports their recall beside the others (default 0: none)',
    kind: 'number',
    only: 'evolve',
  }),
  rounds: opt(z.number().int().min(0).max(50).default(r.rounds), false, {
    flag: '--rounds <n>',
    help: `co-evolution rounds R (paper: ${r.rounds})`,
    kind: 'int',
  }),
  groupSize: opt(z.number().int().min(2).max(64).default(r.groupSize), true, {
    flag: '--group-size <n>',
    help: `GRPO samples per input G (paper: ${r.groupSize})`,
    kind: 'int',
  }),
  kMax: opt(z.number().int().min(1).max(200).default(K_MAX), true, {
    flag: '--k-max <n>',
    help: `keyword budget K_max on both sides (paper: ${DEFAULTS.kMax})`,
    kind: 'int',
  }),
  queryEpochs: opt(z.number().int().min(0).max(100).default(r.queryEpochs), true, {
    flag: '--query-epochs <n>',
    help: `query-side GRPO epochs per round (default ${r.queryEpochs}; the paper: 10)`,
    kind: 'int',
  }),
  itemEpochs: opt(z.number().int().min(0).max(100).default(r.itemEpochs), true, {
    flag: '--item-epochs <n>',
    help: `item-side GRPO epochs per round (default ${r.itemEpochs}; the paper: 5)`,
    kind: 'int',
  }),
  sftEpochs: opt(z.number().int().min(0).max(100).default(r.sftEpochs), true, {
    flag: '--sft-epochs <n>',
    help: 'SFT epochs',
    kind: 'int',
  }),
  /** Items sampled per item-side epoch (0 = all). */
  itemsPerEpoch: opt(z.number().int().min(0).default(0), true, {
    flag: '--items-per-epoch <n>',
    help: 'items sampled per item-side epoch (0 = all)',
    kind: 'int',
  }),
  rolloutTemperature: opt(z.number().positive().default(DEFAULTS.decoding.rollout.temperature), true),
  decodeTemperature: opt(z.number().positive().default(DEFAULTS.decoding.index.temperature), true),
  /**
   * How indexing and evaluation decode keywords: 'greedy' (the embedded policy's argmax
   * sequence with its stop rule: stable across generations, the default) or 'sample'
   * (temperature `decodeTemperature`, seeded per entity, as the paper does with LLMs).
   */
  decode: opt(z.enum(['greedy', 'sample']).default('greedy'), true, {
    flag: '--decode <mode>',
    help: 'indexing/evaluation decoding: greedy | sample',
    kind: 'string',
  }),
  /** Nucleus mass of indexing and evaluation decoding when decode is 'sample' (rollouts are not truncated). */
  topP: opt(z.number().gt(0).max(1).default(DEFAULTS.decoding.index.topP), true),
  lr: opt(z.number().positive().default(r.lr), true, { flag: '--lr <x>', help: 'learning rate of the GRPO updates', kind: 'number' }),
  clip: opt(z.number().positive().default(r.clip), true),
  klCoef: opt(z.number().nonnegative().default(r.klCoef), true, {
    flag: '--kl <x>',
    help: 'KL coefficient to the SFT policy',
    kind: 'number',
  }),
  beta: opt(z.number().positive().default(r.beta), true, {
    flag: '--beta <x>',
    help: 'F-beta instead of F1 in the rewards and metrics',
    kind: 'number',
  }),
  /** SFT: keywords per item (M) from the base generator, or 'auto' (the M of DEFAULTS.sft.itemKeywordsGrid with the best training F1). */
  sftItemKeywords: opt(z.union([z.number().int().min(1).max(200), z.literal('auto')]).default('auto'), true, {
    flag: '--sft-item-keywords <m>',
    help: `keywords per item from the base generator: a number, or auto (the best on training F1 of ${DEFAULTS.sft.itemKeywordsGrid.join(', ')}; default)`,
    kind: 'intOrAuto',
  }),
  /** How keywords are matched (index/text/analyzer.ts). */
  analyzer: opt(z.enum(ANALYZERS).default(DEFAULT_ANALYZER), true, {
    flag: '--analyzer <name>',
    help: `how keywords match: english (Porter2 stems) | none (surface forms) (default ${DEFAULT_ANALYZER})`,
    kind: 'string',
  }),
  /** Share of the training queries carved out (seeded) as the dev split that decides which half-rounds are adopted. */
  devFraction: opt(z.number().min(0).max(0.5).default(r.devFraction), true, {
    flag: '--dev-fraction <x>',
    help: `share of the training queries carved out as the dev split that decides adoption (default ${r.devFraction}; 0: every step adopted)`,
    kind: 'number',
  }),
  /** The adoption test's z: a half-round is adopted when its mean dev gain is ≥ 0 and ≥ z standard errors (run/state.ts adoptionTest). */
  adoptZ: opt(z.number().min(0).max(10).default(r.adoptZ), true, {
    flag: '--adopt-z <z>',
    help: `a half-round is adopted when its mean dev gain is ≥ 0 and ≥ z standard errors (default ${r.adoptZ})`,
    kind: 'number',
  }),
  /**
   * The queries the adoption test pairs: 'leaveout' (the default: an item half-round on the
   * dev queries and every core training query, each against items decoded without its
   * group's offers; a query half-round on the dev queries), 'dev', 'pooled' (the dev queries
   * and the core training queries planned and searched as held out, with the dev gain alone
   * still ≥ 0) or 'crossfit'. Runs written before this field were 'dev'.
   */
  adoptOn: opt(z.enum(['dev', 'pooled', 'crossfit', 'leaveout']).default(r.adoptOn), true, {
    flag: '--adopt-on <queries>',
    help: `what the adoption test pairs: dev | pooled (dev and core training queries scored as held out; dev gain still ≥ 0) | crossfit (dev and every core training query scored by a shadow half-round trained without its inner fold) | leaveout (an item half-round: dev and every core training query scored as held out, against its items decoded without the offers of the query's group, one of ${DEFAULTS.run.leaveOutGroups}; a query half-round: dev) (default ${r.adoptOn})`,
    kind: 'string',
  }),
  /**
   * How α is tuned on training queries (SFT, query half-rounds, the refit; run.ts
   * tuneAlpha): 'insample' plans them as held out with the relevance model fitted on them;
   * 'crossfit' plans each inner fold with a model fitted without it, so α is chosen as it
   * will serve unseen queries. Runs written before this field were 'insample'.
   */
  alphaTuning: opt(z.enum(['insample', 'crossfit']).default(r.alphaTuning), true, {
    flag: '--alpha-tuning <how>',
    help: `how α is tuned on training queries: insample (the relevance model fitted on them) | crossfit (${r.alphaFolds} inner folds, each planned with a model fitted without it) (default ${r.alphaTuning})`,
    kind: 'string',
  }),
  /**
   * The final refit (refit.ts refitStep): after the last round, the step the dev split chose
   * is refitted on all training queries, dev ones included (their judgements train the
   * relevance model, tune α and offer items keywords), and that refit is what the run
   * serves. Not an identity field: it is one extra step at the end, added to a finished run
   * or dropped from it when asked.
   */
  refit: opt(z.boolean().default(r.refit), false, {
    flag: '--refit <yes|no>',
    help: `after the rounds, refit the chosen step on all training queries, dev ones included, and serve the refit (default ${r.refit ? 'yes' : 'no'})`,
    kind: 'yesno',
  }),
  /**
   * The refit's test (refit.ts refitTest): refit only when a cross-fitted learning curve over
   * the training queries says a fit on |dev| more queries helps (as a half-round's
   * adoption test: gain ≥ 0 and ≥ z standard errors); otherwise the refit step serves the
   * chosen step as it is. Runs written before this field refitted without a test.
   */
  refitTest: opt(z.boolean().default(r.refitTest), true, {
    flag: '--refit-test <yes|no>',
    help: `refit only when a cross-fitted learning curve over the training queries says |dev| more queries in the fit help (gain ≥ --refit-z standard errors); otherwise serve the chosen step as it is (default ${r.refitTest ? 'yes' : 'no'})`,
    kind: 'yesno',
  }),
  /**
   * The refit test's z: the refit stands when the learning curve's mean gain is ≥ z standard
   * errors (and, for z ≥ 0, ≥ 0). Runs written before this field used the run's adoptZ
   * (parseStoredConfig).
   */
  refitZ: opt(z.number().min(-10).max(10).default(r.refitZ), true, {
    flag: '--refit-z <z>',
    help: `with --refit-test yes, the refit stands when the curve's mean gain is ≥ z standard errors: 1 (must earn its place, as a half-round), 0 (declined only when the curve falls), -1 (only when it falls by more than one SE) (default ${r.refitZ})`,
    kind: 'number',
  }),
  /**
   * The refit's α (refit.ts refitStep): 'tune' tunes it again on every training query against
   * the refit's item index; 'keep' serves the chosen step's α (the refit from SFT keeps
   * SFT's), as a model refitted on train + dev keeps the hyper-parameters chosen before.
   * Runs written before this field were 'tune'.
   */
  refitAlpha: opt(z.enum(['tune', 'keep']).default(r.refitAlpha), true, {
    flag: '--refit-alpha <how>',
    help: `the refit's α: tune (again, on every training query) | keep (the chosen step's) (default ${r.refitAlpha})`,
    kind: 'string',
  }),
  /**
   * What the final refit serves (refit.ts setGuard; records.ts RefitStats.served): 'keywords'
   * — the keyword plans' matched sets (with the floor); 'model' — every query's expected-F1
   * cut of the relevance model's p, no keyword constraint; 'auto' — the model's sets when,
   * over every training query scored by inner models that never saw it, their F1 beats the
   * keyword plans' by at least one standard error (and is not lower). Runs written before
   * this field were 'keywords'.
   */
  servedSet: opt(z.enum(['keywords', 'model', 'auto']).default(r.servedSet), true, {
    flag: '--served-set <what>',
    help: `what the final refit serves: keywords (the keyword plans' matched sets) | model (the relevance model's expected-F1 sets) | auto (the model's when, cross-fitted over the training queries, they beat the keywords by one SE) (default ${r.servedSet})`,
    kind: 'string',
  }),
  /**
   * Whether every step's matched sets (SFT, the rounds, the refit) are cut where their own
   * expected F1 peaks (generators/planner/ranking.ts matchedCut: only matched items, the
   * likeliest by p, at the planner's α): 'no', 'yes', or 'auto' — decided once at SFT, cut
   * when over the core training queries planned as held out the cut sets beat the whole
   * ones by the adoption test (gain ≥ 0 and ≥ --adopt-z standard errors; records.ts
   * SetFloor.cut). Runs written before this field were 'no'.
   */
  cut: opt(z.enum(['no', 'yes', 'auto']).default(r.cut), true, {
    flag: '--cut <no|yes|auto>',
    help: `cut every matched set where its own expected F1 peaks (the likeliest matched items by p): no | yes | auto (when, over the training queries planned as held out, the cut sets beat the whole ones by the adoption test) (default ${r.cut})`,
    kind: 'string',
  }),
  /**
   * The served set's floor (run/state.ts SetFloor): 'fallback' — a query whose keywords
   * match nothing gets the top c items by p(item | query) instead of an empty list, c
   * chosen at SFT on the core training queries planned as held out; 'auto' — also every
   * matched set gains the top m by p when m passes the adoption test on those queries;
   * 'none' — the matched set alone, possibly empty. Runs written before this field were 'none'.
   */
  floor: opt(z.enum(['fallback', 'auto', 'none']).default(r.floor), true, {
    flag: '--floor <mode>',
    help: `the served set's floor: fallback (a query whose keywords match nothing gets the top c items by p) | auto (and every set the top m by p, when m passes the adoption test on training queries) | none (default ${r.floor})`,
    kind: 'string',
  }),
  /**
   * The served list's depth (generators/planner/ranking.ts backfill): the served set in the
   * ranker's order, then the other items in the same order until this many are listed; 0
   * for the served set alone. Neither the set nor F1 depends on it. Runs written before
   * this field had none.
   */
  backfill: opt(z.number().int().min(0).max(100_000).default(r.backfill), true, {
    flag: '--backfill <n>',
    help: `the served list's depth: the served set ranked, then the other items by the same ranker (0: the set alone; default ${r.backfill})`,
    kind: 'number',
  }),
  /** The query planner: items whose keywords are candidates, the scale λ of its log-gain, its GRPO learning rate and parameters. */
  plannerTopItems: opt(z.number().int().min(1).max(10_000).default(DEFAULTS.planner.topItems), true),
  plannerLambda: opt(z.number().positive().default(DEFAULTS.planner.lambda), true),
  plannerLr: opt(z.number().positive().default(DEFAULTS.planner.lr), true, {
    flag: '--planner-lr <x>',
    help: `learning rate of the planner's GRPO (default ${DEFAULTS.planner.lr})`,
    kind: 'number',
  }),
  plannerParams: opt(z.enum(['all', 'terms', 'global']).default(DEFAULTS.planner.grpoParams), true, {
    flag: '--planner-params <which>',
    help: `what the planner's GRPO moves: global (stop term and α) | terms (per-keyword terms) | all (and the relevance weights) (default ${DEFAULTS.planner.grpoParams})`,
    kind: 'string',
  }),
  /** The relevance model: nearest training queries per similarity, and whether training judgements are features. */
  relevanceNeighbours: opt(z.number().int().min(1).max(1000).default(DEFAULTS.relevance.neighbours), true),
  relevanceJudgements: opt(z.boolean().default(DEFAULTS.relevance.judgements), true),
  /** The relevance model's query-term-frequency BM25 features (relevance.ts QUERY_TF_FEATURES); runs written before them had none. */
  relevanceQueryTf: opt(z.boolean().default(DEFAULTS.relevance.queryTf), true, {
    flag: '--relevance-query-tf <yes|no>',
    help: `the relevance model's query-term-count BM25 features (default ${DEFAULTS.relevance.queryTf ? 'yes' : 'no'}; runs stored before them resume with no)`,
    kind: 'yesno',
  }),
  /** The relevance model's BM25 + RM3 features (relevance.ts RM3_FEATURES); runs written before them had none. */
  relevanceRm3: opt(z.boolean().default(DEFAULTS.relevance.rm3), true, {
    flag: '--relevance-rm3 <yes|no>',
    help: `the relevance model's BM25 + RM3 features (pseudo-relevance feedback: 10 items, 10 words, original weight 0.5) (default ${DEFAULTS.relevance.rm3 ? 'yes' : 'no'}; runs stored before them resume with no)`,
    kind: 'yesno',
  }),
  /** The words of the relevance model's text BM25 features (index/text/english.ts): 'wink' (Porter2, wink's stop words) or 'lucene' (Lucene's EnglishAnalyzer chain); runs written before it had 'wink'. */
  relevanceAnalysis: opt(z.enum(TEXT_ANALYSES).default(DEFAULTS.relevance.textAnalysis), true, {
    flag: '--relevance-analysis <name>',
    help: `the words of the relevance model's text BM25 features: wink (letter/digit runs, wink's stop words, Porter2) | lucene (Lucene's EnglishAnalyzer: UAX #29 words, 33 stop words, Porter v1) (default ${DEFAULTS.relevance.textAnalysis}; runs stored before it resume with wink)`,
    kind: 'string',
  }),
  /**
   * The run's encoder (vectors from `--embeddings`, whose flags are the embeddings options of
   * commands/options.ts; `cogr evolve` and `cogr demo` default to all-MiniLM-L6-v2): it judges
   * the planned keywords (`keywordCosine`) and, with `embeddingsFeatures`, its query–item
   * cosines are relevance features (relevance.ts DENSE_FEATURES); null for none. Runs written
   * before this field had none; a resume with another model is refused naming both.
   */
  embeddingsModel: opt(z.string().min(1).nullable().default(null), true),
  /**
   * With `embeddingsModel`: whether its query–item cosines are relevance features
   * (DENSE_FEATURES; every item is embedded) or the encoder only judges the planned keywords
   * (`keywordCosine`; only query and keyword texts are embedded), the default. Runs stored
   * before it had the features (STORED_BEFORE); without a model it does nothing.
   */
  embeddingsFeatures: opt(z.boolean().default(false), true, {
    flag: '--embeddings-features <yes|no>',
    help: 'with an encoder: yes makes its query–item cosines relevance features too (every item is embedded); no keeps it a judge of the planned keywords only (--keyword-cosine), so no item is embedded (default no)',
    kind: 'yesno',
  }),
  /**
   * What the query side offers items in item half-rounds: 'labels' (each judging or
   * high-ranking training query's own name: its string, or its label when the string
   * is over the keyword limits) or 'keywords' (every keyword of those queries).
   */
  itemQuerySide: opt(z.enum(['labels', 'keywords']).default(r.itemQuerySide), true, {
    flag: '--item-query-side <what>',
    help: `what the query side offers items: labels (the names of training queries) | keywords (all their keywords) (default ${r.itemQuerySide})`,
    kind: 'string',
  }),
  /**
   * The keywords' vocabulary (generators/policy/vocabulary.ts): 'shared' (item keywords are
   * phrases that several items' texts hold; the query planner plans only keywords that
   * `minCarriers` items carry and that are related to the query; no query labels, no item
   * titles as keywords) or 'open' (any n-gram and the title; runs stored before it).
   */
  vocabulary: opt(z.enum(['shared', 'open']).default(r.vocabulary), true, {
    flag: '--vocabulary <kind>',
    help: `the keywords' vocabulary: shared (phrases several items hold, planned only when ${r.minCarriers}+ items carry them and related to the query) | open (any n-gram or title, as runs stored before it) (default ${r.vocabulary})`,
    kind: 'string',
  }),
  /** With the shared vocabulary: the fewest items that carry a keyword of the index (and of a plan). */
  minCarriers: opt(z.number().int().min(2).max(1000).default(r.minCarriers), true, {
    flag: '--min-carriers <n>',
    help: `shared vocabulary: the fewest items that carry any keyword of the index or of a query's plan (default ${r.minCarriers})`,
    kind: 'int',
  }),
  /** With the shared vocabulary: the least NPMI of a planned keyword with a query word when it shares none (generators/planner/related.ts). */
  relatedness: opt(z.number().min(-1).max(1).default(r.relatedness), true, {
    flag: '--relatedness <npmi>',
    help: `shared vocabulary: a planned keyword that shares no word with the query must co-occur with one of its words in the items' texts with at least this NPMI (-1: any; default ${r.relatedness})`,
    kind: 'number',
  }),
  /** With the shared vocabulary and an embeddings model: the least cosine of a planned keyword to its query under that model (-1: no such rule). */
  keywordCosine: opt(z.number().min(-1).max(1).default(r.keywordCosine), true, {
    flag: '--keyword-cosine <c>',
    help: `with --embeddings and the shared vocabulary: a planned keyword's least cosine to its query under the embeddings model (-1: no such rule; default ${r.keywordCosine})`,
    kind: 'number',
  }),
  /** A training query "ranks an item high" when the item is among its top this-many by relevance. */
  itemRankDepth: opt(z.number().int().min(0).max(1000).default(r.itemRankDepth), true),
  workers: opt(z.number().int().min(1).max(64).optional(), false, {
    flag: '--workers <n>',
    help: 'reward worker threads (default: number of cores)',
    kind: 'int',
  }),
  dropDegenerateGroups: opt(z.boolean().default(r.dropDegenerateGroups), true),
  /**
   * GRPO groups: 'exact' (each input's G samples) or 'semantic' (CoSearch: inputs whose
   * texts — query text, item title — reach token F1 ≥ groupingDelta form one group when
   * at least groupingMinSize of them do; rewards are normalised over all their samples).
   */
  grouping: opt(z.enum(['exact', 'semantic']).default('exact'), true, {
    flag: '--grouping <mode>',
    help: 'GRPO groups: exact (each input) | semantic (near-identical inputs pooled, CoSearch; default exact)',
    kind: 'string',
  }),
  groupingDelta: opt(z.number().gt(0).max(1).default(DEFAULTS.grouping.delta), true, {
    flag: '--grouping-delta <x>',
    help: `semantic grouping: token-F1 threshold δ (default ${DEFAULTS.grouping.delta})`,
    kind: 'number',
  }),
  groupingMinSize: opt(z.number().int().min(2).default(DEFAULTS.grouping.minSize), true),
  /**
   * How matched sets are ranked (generators/planner/ranking.ts): 'auto' (the ranker with
   * the best nDCG@10 over the dev queries and the core training queries planned as held
   * out, chosen once at SFT), or a ranker. Not an identity field: it changes no
   * generation; every step records every ranker's figures.
   */
  rank: opt(z.enum(['auto', ...RANKERS]).default(r.rank), false, {
    flag: '--rank <ranker>',
    help: `how matched sets are ranked: auto (best nDCG@10 on dev + training queries) | model (p(item | query)) | text (text BM25) | mix ((p / p_max + text) / 2) | keywords (keyword-bag BM25, the paper's rule) (default ${r.rank})`,
    kind: 'string',
  }),
} satisfies Record<string, RunOption>;

type RunOptionKey = keyof typeof RUN_OPTIONS;

export const RunConfigSchema = z
  .object(
    Object.fromEntries(Object.entries(RUN_OPTIONS).map(([k, o]) => [k, o.schema])) as {
      [K in RunOptionKey]: (typeof RUN_OPTIONS)[K]['schema'];
    },
  )
  .strict();

export type RunConfig = z.output<typeof RunConfigSchema>;

/**
 * Identity fields added after runs were stored, with the behaviour those runs had: a
 * stored config without one reads as this value, not as today's default.
 */
const STORED_BEFORE: Partial<RunConfigInput> = {
  adoptOn: 'dev',
  alphaTuning: 'insample',
  refitTest: false,
  refitZ: 1,
  refitAlpha: 'tune',
  servedSet: 'keywords',
  cut: 'no',
  floor: 'none',
  backfill: 0,
  relevanceQueryTf: false,
  relevanceRm3: false,
  relevanceAnalysis: 'wink',
  vocabulary: 'open',
  itemQuerySide: 'labels',
  embeddingsFeatures: true,
  // Not an identity field: a resume adds the refit as asked; a stored config without it was made without one.
  refit: false,
};

/** A stored run config, validated; fields it predates get the behaviour it ran with (STORED_BEFORE), later ones their defaults. */
export function parseStoredConfig(raw: unknown): ReturnType<typeof RunConfigSchema.safeParse> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return RunConfigSchema.safeParse(raw);
  const stored = raw as Record<string, unknown>;
  // The refit test's z was the run's adoption z before it had its own field (it mattered only with the test on).
  const refitZ = stored.refitZ === undefined && stored.refitTest === true && stored.adoptZ !== undefined ? { refitZ: stored.adoptZ } : {};
  // The encoder's keyword rule came after runs with embeddings were stored: those ran without it (without embeddings it does nothing).
  const cosine = stored.keywordCosine === undefined && (stored.embeddingsModel ?? null) !== null ? { keywordCosine: -1 } : {};
  const withLegacy = { ...STORED_BEFORE, ...refitZ, ...cosine, ...stored };
  return RunConfigSchema.safeParse(withLegacy);
}
export type RunConfigInput = z.input<typeof RunConfigSchema>;

export function parseRunConfig(input: unknown): RunConfig {
  const r = RunConfigSchema.safeParse(input);
  if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error, { what: 'run config' });
  if (r.data.vocabulary === 'shared' && r.data.itemQuerySide === 'labels')
    throw cogrError(
      'INVALID_ARGUMENT',
      'run config: itemQuerySide: labels (the names of training queries) are not keywords of the shared vocabulary; use keywords, or vocabulary open',
    );
  return r.data;
}

/** The query planner's vocabulary rules of a run (generators/planner/config.ts): the shared vocabulary's, or none (open). */
export function plannerVocabulary(
  config: Pick<RunConfig, 'vocabulary' | 'minCarriers' | 'relatedness'> & Partial<Pick<RunConfig, 'keywordCosine' | 'embeddingsModel'>>,
): {
  minCarriers: number;
  relatedness: number | null;
  keywordCosine: number | null;
  keywordModel: string | null;
  labels: boolean;
  names: boolean;
} {
  const cos = config.keywordCosine ?? -1;
  // The encoder's rule: the run's model judges the planned keywords, unless there is none or the rule is off.
  const judge = (config.embeddingsModel ?? null) !== null && cos > -1 ? config.embeddingsModel! : null;
  return config.vocabulary === 'shared'
    ? {
        minCarriers: config.minCarriers,
        relatedness: config.relatedness,
        keywordCosine: judge !== null ? cos : null,
        keywordModel: judge,
        labels: false,
        names: true,
      }
    : { minCarriers: 0, relatedness: null, keywordCosine: null, keywordModel: null, labels: true, names: false };
}

/**
 * Fields whose change makes a stored run a different experiment (refused on resume).
 * `rounds` is not one of them: asking for more rounds extends a finished run.
 */
export const IDENTITY_FIELDS: readonly (keyof RunConfig)[] = (Object.keys(RUN_OPTIONS) as RunOptionKey[]).filter(
  (k) => RUN_OPTIONS[k].identity,
);

/** Identity fields that change nothing while another is off: the refit test's z without the test. */
const INERT_UNLESS: Partial<Record<keyof RunConfig, (c: RunConfig) => boolean>> = {
  refitZ: (c) => c.refitTest,
  // The set guard is made at the final refit; a run without one never served anything else.
  servedSet: (c) => c.refit,
  // Without an encoder there are no cosines to make features of.
  embeddingsFeatures: (c) => c.embeddingsModel !== null,
};

export function configDifferences(stored: RunConfig, wanted: RunConfig): string[] {
  const out: string[] = [];
  for (const k of IDENTITY_FIELDS) {
    const live = INERT_UNLESS[k];
    if (live && !live(stored) && !live(wanted)) continue;
    if (JSON.stringify(stored[k]) !== JSON.stringify(wanted[k]))
      out.push(`${k}: stored ${JSON.stringify(stored[k])}, asked ${JSON.stringify(wanted[k])}`);
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
