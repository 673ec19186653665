/**
 * A layered reward in the spirit of ProRetrieval: format → budget → result. Each layer
 * can end the evaluation with a fixed reward and a reason that rollout logs and
 * metrics count.
 *
 * | reason           | when                                                         | query side | item side |
 * |------------------|--------------------------------------------------------------|-----------:|----------:|
 * | `invalid_format` | the output did not parse into a keyword list (null), or not one keyword survived normalisation | −1 | −1 |
 * | `over_budget`    | more than K_max keywords after normalisation and de-duplication | 0 | −1 |
 * | `ok`             | the result reward (query: F_β; item: the marginal ΔΣF)        | result | result |
 *
 * The over-budget values are the paper's (R_q = 0, R_i = −1 when |S| > K_max); the
 * format penalty is ours: it is the lowest reward either side can otherwise get, so a
 * parse failure never beats a poor but parsable answer. Every value can be overridden.
 */
import { DEFAULTS, K_MAX } from '../index/core/defaults.ts';
import type { Side } from '../index/core/types.ts';

export type RewardReason = 'invalid_format' | 'over_budget' | 'ok';

export interface LayeredOptions {
  side: Side;
  kMax?: number;
  /** Reward of an unparsable output; default −1 on both sides. */
  invalidFormatReward?: number;
  /** Reward of an over-budget output; default 0 for queries, −1 for items. */
  overBudgetReward?: number;
}

/** The budget layer alone: the side's fixed reward when `size` (distinct normalised keywords) exceeds K_max, else null. */
export function budgetPenalty(size: number, opts: Omit<LayeredOptions, 'invalidFormatReward'>): number | null {
  return size > (opts.kMax ?? K_MAX) ? (opts.overBudgetReward ?? DEFAULTS.layered.overBudgetReward[opts.side]) : null;
}

/** A sample prepared for the result layer: its distinct normalised keywords (and whatever else the side resolved). */
export interface Prepared {
  keywords: string[];
}

/**
 * The three layers over a side's own preparation: `prepare` normalises (and may resolve)
 * the parsed keywords once; `result` scores what passed the format and budget layers.
 */
export function layered<P extends Prepared>(
  parsed: readonly string[] | null | undefined,
  prepare: (list: readonly string[]) => P,
  result: (prepared: P) => number,
  opts: LayeredOptions,
): { reward: number; reason: RewardReason; prepared: P | null } {
  if (!Array.isArray(parsed) || parsed.some((k) => typeof k !== 'string')) {
    return {
      reward: opts.invalidFormatReward ?? DEFAULTS.layered.invalidFormatReward[opts.side],
      reason: 'invalid_format',
      prepared: null,
    };
  }
  const prepared = prepare(parsed);
  if (prepared.keywords.length === 0) {
    return {
      reward: opts.invalidFormatReward ?? DEFAULTS.layered.invalidFormatReward[opts.side],
      reason: 'invalid_format',
      prepared: null,
    };
  }
  const penalty = budgetPenalty(prepared.keywords.length, opts);
  if (penalty !== null) return { reward: penalty, reason: 'over_budget', prepared };
  return { reward: result(prepared), reason: 'ok', prepared };
}
