/**
 * The records of a run's state (steps, imports, split and their figures): plain data that
 * the run state (state.ts) keeps in the database and its published copy (published.ts)
 * keeps in run.json. Both import these types from here, neither from the other's records.
 */
import type { Side } from '../../index/core/types.ts';
import type { RankingMetrics } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';

import type { ItemKeywordAudit, QueryKeywordAudit } from '../drift/keywordAudit.ts';

export interface HeldOutMetrics {
  queries: number;
  f1: number;
  precision: number;
  recall: number;
  ndcg10: number;
  mrr10: number;
  hit3: number;
  /** Mean size of the whole matched set per held-out query. */
  meanMatched: number;
  /** Mean number of generated keywords per held-out query. */
  meanKeywords: number;
  /** Every ranked metric (mrr, ndcg, ndcgBinary, p, r, f1, hit, ap at 1, 3, 10, 100, 1000) of the matched set ranked by keyword-bag BM25 (the paper's rule). */
  ranked: Record<string, number>;
  /** Queries whose keywords matched nothing and got the floor's fallback set instead (absent without a floor). */
  fallbacks?: number;
  /** The keyword audit of these queries' keywords against the item generation (src/drift/keywordAudit.ts; absent in runs written before it). */
  keywords?: QueryKeywordAudit;
  /** nDCG@10, MAP and MRR@10 of the same matched sets under every ranker (generators/planner/ranking.ts); absent in runs written before rankers. */
  rankings?: Record<Ranker, RankingMetrics>;
}

/** Whole-set quality of the dev queries (a part of the training queries, held out from training). */
export interface DevMetrics {
  queries: number;
  f1: number;
  precision: number;
  recall: number;
  meanMatched: number;
  meanKeywords: number;
  /** F (F1 unless the run sets beta) of every dev query, in the split's dev order (the adoption test pairs them). */
  perQuery: number[];
  /** Every ranker's nDCG@10 / MAP / MRR@10 on the dev queries (absent in runs written before rankers). */
  rankings?: Record<Ranker, RankingMetrics>;
}

/**
 * How the run ranks its matched sets (chosen once, at SFT): the ranker served, and what
 * it was chosen on — every ranker's figures over the dev queries and the core training
 * queries planned as held out (`--rank auto`), or the ranker the run names.
 */
export interface RankChoice {
  served: Ranker;
  asked: Ranker | 'auto';
  /** Every ranker's figures over the queries of the choice, and how many there were. */
  on: { queries: number; rankings: Record<Ranker, RankingMetrics> } | null;
}

/**
 * The floor of the served set (generators/planner/ranking.ts servedSet): every matched set
 * gains the top `floor` items by p(item | query), and a query whose keywords match nothing
 * gets the top `fallback` items by p, flagged as a fallback. Chosen at SFT on the core
 * training queries planned as held out: `fallback` the c with the best mean F1 of the top c
 * by p, then `floor` the m of DEFAULTS.run.floorGrid with the best mean F1 of the served
 * sets, kept only when its paired gain over no floor passes the adoption test (else 0).
 */
export interface SetFloor {
  floor: number;
  fallback: number;
  /** The served list's depth (ranking.ts backfill); absent in runs written before it: none. */
  backfill?: number;
  /** Mean F1 of the training queries' served sets for each floor tried, and of the top-c sets at the chosen c. */
  trainF1?: { floors: [number, number][]; fallback: number };
  /** `--cut yes`, or `auto` when its test passed: every matched set is cut where its expected F1 peaks (ranking.ts matchedCut); absent: not cut. */
  cut?: boolean;
  /** `--cut auto`: the cut sets against the whole ones over the core training queries planned as held out (paired F1, the adoption test at z). */
  cutTest?: { gain: number; se: number; queries: number; z: number; f1: { whole: number; cut: number } };
}

/** Per-query F of a query set, in a fixed order (the core training queries scored as held out). */
export interface QuerySetF {
  queries: number;
  f1: number;
  perQuery: number[];
}

/** What the SFT step fitted (deterministic, so a resumed run records the same). */
export interface SftStats {
  epochs: number;
  /** Item policy: examples, mean negative log-likelihood per example and epoch, share of targets among its candidates. */
  itemExamples: number;
  itemLoss: number[];
  itemCoverage: number;
  /** Keywords per item from the base generator, and the training F1 of every M tried. */
  itemKeywords: number;
  itemKeywordsCurve: [number, number][];
  /** The relevance model's fit: (query, item) pairs, distinct rows, Newton iterations, mean log-likelihood, weights. */
  relevance: { pairs: number; rows: number; iterations: number; logLik: number; weights: Record<string, number> };
  /** Training queries the planner was fitted on. */
  queryExamples: number;
}

/** What a GRPO half-round trained. */
export interface TrainStats {
  epochs: number;
  samples: number;
  meanReward: number;
  /** Mean reward of the last epoch. */
  lastEpochReward: number;
  degenerateGroups: number;
  reasons: { ok: number; over_budget: number; invalid_format: number };
  seconds: number;
}

/** A generation imported from an external model (`cogr import-generation`), evaluated like a step. */
export interface ImportRecord {
  side: Side;
  generation: number;
  source: string;
  entities: number;
  /** Held-out queries whose keywords came from the file (query side). */
  heldOutFromFile: number;
  metrics: HeldOutMetrics;
  importedAt: string;
  /** sha256 of the keyword file (also in the generation's commit meta). */
  digest?: string;
  /** The item generation the held-out queries were matched against (an item import: the generation itself). */
  itemGeneration?: number;
  /**
   * `--half rR-side`: the half-round whose result this import is (an external trainer's, trained
   * against that half-round's frozen generations); later half-rounds build on it when the run
   * has no step of that name (state.ts frozenFor).
   */
  half?: string;
  /** With `half`: the query generation of the half-round's result (the import itself on the query side, the frozen one on the item side). */
  queryGeneration?: number;
  /** With `half`: the mean reward of the file's training entities under the half-round's scorer, and how many it scored. */
  trainReward?: { mean: number; entities: number };
  /** True when the side's latest generation already was this file's import (a re-run): nothing was committed. */
  reused?: boolean;
}

export interface StepRecord {
  step: string;
  round: number;
  /** 'sft' for the initialisation, the side trained in a half-round, or 'refit' for the final refit (refit.ts refitStep). */
  phase: 'sft' | Side | 'refit';
  itemGeneration: number;
  queryGeneration: number;
  /** The adopted step this one started from (null for SFT). */
  base: string | null;
  /** Whether later steps build on this one: SFT always; a half-round when its dev F1 does not fall below the best adopted so far. */
  adopted: boolean;
  /** Quality on the dev queries (null without a dev split: every step is then adopted). */
  dev: DevMetrics | null;
  /** The adoption test against the best adopted step (half-rounds with dev queries): mean per-query gain and its standard error (over `queries` paired queries with `--adopt-on pooled`). */
  devGain?: { gain: number; se: number; queries?: number };
  /** The core training queries planned and searched as held out (own {q}, names and judgements left out): what `--adopt-on pooled` pairs beside the dev queries. */
  trainEval?: QuerySetF;
  /**
   * `--adopt-on crossfit`: the mean paired gain (and its standard error) of the core training
   * queries, each scored by a shadow of the half-round trained without its inner fold.
   */
  crossfit?: { gain: number; se: number; queries: number; folds: number };
  /**
   * `--adopt-on leaveout` (item half-rounds): the mean paired gain (and its standard error) of
   * the core training queries, each scored as held out against items decoded without the
   * offers of its group (one of `groups`; run.ts leaveOutScores), the half-round against the
   * step it builds on.
   */
  leaveOut?: { gain: number; se: number; queries: number; groups: number };
  /** The planner's α after this step (query-side steps and SFT). */
  alpha?: number;
  metrics: HeldOutMetrics;
  vocabulary: { item: number; query: number };
  /** The keyword audit of the step's item generation (src/drift/keywordAudit.ts; absent in runs written before it). */
  itemKeywords?: ItemKeywordAudit;
  /** The GRPO half-round's statistics; null for the SFT step. */
  train: TrainStats | null;
  /** The SFT step's statistics (SFT step only). */
  sft?: SftStats;
  /** The served ranker and what chose it (SFT step only; absent in runs written before rankers: they rank by keywords). */
  rank?: RankChoice;
  /** The served set's floor chosen at SFT (SFT step only; absent: no floor, as runs written before it). */
  floor?: SetFloor;
  /** The final refit's statistics (refit step only). */
  refit?: RefitStats;
  finishedAt: string;
}

/**
 * What the final refit did: how many training queries it was fitted on (core and dev), the
 * item policy round that re-indexed the items, and the same refit made from the SFT step
 * (its held-out F1, P, R): what the run would serve with no round adopted, so the rounds'
 * own share of the gain can be read beside the refit's.
 */
export interface RefitStats {
  queries: number;
  itemPolicyRound: number;
  plannerRound: number;
  fromSft: { f1: number; precision: number; recall: number };
  /**
   * The refit's test (`--refit-test yes`, refit.ts refitTest): the cross-fitted gain of |dev|
   * more queries in the relevance fit, its standard error, the training queries it paired,
   * the z it was held to (absent in runs made before --refit-z: the run's adoptZ) and
   * whether it passed. Not passed: the step serves the chosen step as it is (its item
   * generation and planner), and `fromSft` is the SFT step's own held-out figures.
   */
  test?: { gain: number; se: number; queries: number; z?: number; passed: boolean };
  /**
   * What the step serves (`--served-set`, refit.ts setGuard); absent in runs made before it
   * and with 'keywords': the keyword plans. `set` 'model': every query gets the relevance
   * model's expected-F1 cut at `alpha` (ranking.ts servedSet). With 'auto', the guard's
   * cross-fitted figures over the training queries: the model's sets' mean F1 gain over the
   * keyword plans', its standard error, the queries paired, the z it was held to;
   * `keywords` is the held-out figure of the keyword plans it did not serve (or served).
   */
  served?: {
    set: 'keywords' | 'model' | 'cut';
    alpha?: number;
    guard?: { gain: number; se: number; queries: number; z: number };
    keywords: { f1: number; precision: number; recall: number };
  };
  seconds: number;
}

export interface RunSplit {
  train: string[];
  /** Training queries carved out to choose which half-rounds are adopted (never trained on). */
  dev: string[];
  eval: string[];
}
