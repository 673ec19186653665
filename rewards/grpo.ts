/**
 * GRPO advantages: within a group of G rollouts for the same input,
 *   A_j = (r_j − mean(r)) / (std(r) + ε),
 * with the population standard deviation (divide by G). A group whose rewards are all
 * equal carries no learning signal (every advantage is 0); it is reported as
 * degenerate and can be dropped (dynamic sampling, as in DAPO).
 */
import { cogrError } from '../index/core/errors.ts';
import { DEFAULTS } from '../index/core/defaults.ts';

export function groupAdvantages(rewards: readonly number[], eps: number = DEFAULTS.grpo.eps): number[] {
  const n = rewards.length;
  if (n === 0) return [];
  for (const r of rewards) {
    if (!Number.isFinite(r)) throw cogrError('INVALID_ARGUMENT', `rewards must be finite numbers, got ${r}`);
  }
  let mean = 0;
  for (const r of rewards) mean += r;
  mean /= n;
  let v = 0;
  for (const r of rewards) v += (r - mean) * (r - mean);
  const std = Math.sqrt(v / n);
  return rewards.map((r) => (r - mean) / (std + eps));
}

/** True when all rewards of a group are equal (within `tol`), or the group is empty. */
export function isDegenerate(rewards: readonly number[], tol = 0): boolean {
  if (rewards.length === 0) return true;
  let lo = rewards[0];
  let hi = rewards[0];
  for (const r of rewards) {
    if (r < lo) lo = r;
    if (r > hi) hi = r;
  }
  return hi - lo <= tol;
}

export interface GroupAdvantages {
  /**
   * One entry per input group, in order. A degenerate group gets all-zero advantages,
   * or null when `dropDegenerate` is set.
   */
  advantages: (number[] | null)[];
  /** Indices of the groups that carry a signal (kept). */
  kept: number[];
  /** Indices of the degenerate (all-equal) groups. */
  degenerateGroups: number[];
  degenerate: number;
}

export function advantagesForGroups(
  groups: readonly (readonly number[])[],
  opts: { dropDegenerate?: boolean; eps?: number; tol?: number } = {},
): GroupAdvantages {
  const advantages: (number[] | null)[] = [];
  const kept: number[] = [];
  const degenerateGroups: number[] = [];
  groups.forEach((g, idx) => {
    if (isDegenerate(g, opts.tol ?? 0)) {
      degenerateGroups.push(idx);
      advantages.push(opts.dropDegenerate ? null : g.map(() => 0));
    } else {
      kept.push(idx);
      advantages.push(groupAdvantages(g, opts.eps ?? DEFAULTS.grpo.eps));
    }
  });
  return { advantages, kept, degenerateGroups, degenerate: degenerateGroups.length };
}

/**
 * Advantages when GRPO groups pool several inputs (semantic grouping, grouping.ts): the
 * rewards of every sample of every input of a group are normalised together, then handed
 * back per input. `groups` lists input indices (each input in exactly one group); a
 * group of one input is the plain per-input group. A degenerate group gives all-zero
 * advantages to its inputs, or null when `dropDegenerate` is set.
 */
export function pooledAdvantages(
  rewards: readonly (readonly number[])[],
  groups: readonly (readonly number[])[],
  opts: { dropDegenerate?: boolean; eps?: number; tol?: number } = {},
): { advantages: (number[] | null)[]; degenerate: number } {
  const pooled = groups.map((g) => g.flatMap((i) => rewards[i]));
  const adv = advantagesForGroups(pooled, opts);
  const advantages: (number[] | null)[] = new Array(rewards.length).fill(null);
  groups.forEach((g, k) => {
    const a = adv.advantages[k];
    let at = 0;
    for (const i of g) {
      advantages[i] = a ? a.slice(at, at + rewards[i].length) : null;
      at += rewards[i].length;
    }
  });
  return { advantages, degenerate: adv.degenerate };
}
