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
import { normalizeKeywordSet } from '../index/normalize.ts';
import type { Side } from '../index/types.ts';
import { DEFAULT_K_MAX } from './itemReward.ts';

export type RewardReason = 'invalid_format' | 'over_budget' | 'ok';
export const REWARD_REASONS: readonly RewardReason[] = ['invalid_format', 'over_budget', 'ok'];

export interface LayeredResult {
  reward: number;
  reason: RewardReason;
  /** The normalised keywords the result layer saw (empty for invalid_format). */
  keywords: string[];
}

export interface LayeredOptions {
  side: Side;
  kMax?: number;
  /** Reward of an unparsable output; default −1 on both sides. */
  invalidFormatReward?: number;
  /** Reward of an over-budget output; default 0 for queries, −1 for items. */
  overBudgetReward?: number;
}

export const LAYERED_DEFAULTS = {
  invalidFormatReward: { query: -1, item: -1 },
  overBudgetReward: { query: 0, item: -1 },
} as const;

/**
 * `parsed` is the generator output already parsed into raw keywords, or null when it
 * could not be parsed. `result` computes the result reward of the normalised keywords
 * (it is only called for outputs that pass both earlier layers).
 */
export function layeredReward(
  parsed: readonly string[] | null | undefined,
  result: (keywords: string[]) => number,
  opts: LayeredOptions,
): LayeredResult {
  const side = opts.side;
  if (!Array.isArray(parsed) || parsed.some((k) => typeof k !== 'string')) {
    return { reward: opts.invalidFormatReward ?? LAYERED_DEFAULTS.invalidFormatReward[side], reason: 'invalid_format', keywords: [] };
  }
  const { keywords } = normalizeKeywordSet(parsed);
  if (keywords.length === 0) {
    return { reward: opts.invalidFormatReward ?? LAYERED_DEFAULTS.invalidFormatReward[side], reason: 'invalid_format', keywords: [] };
  }
  if (keywords.length > (opts.kMax ?? DEFAULT_K_MAX)) {
    return { reward: opts.overBudgetReward ?? LAYERED_DEFAULTS.overBudgetReward[side], reason: 'over_budget', keywords };
  }
  return { reward: result(keywords), reason: 'ok', keywords };
}

/** How many results ended in each layer. */
export function countReasons(results: Iterable<{ reason: RewardReason }>): Record<RewardReason, number> {
  const out: Record<RewardReason, number> = { invalid_format: 0, over_budget: 0, ok: 0 };
  for (const r of results) out[r.reason]++;
  return out;
}
