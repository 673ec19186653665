/**
 * Which generations a server serves, and a catalog writer writes on: the round selector
 * (`--round best|latest|<n>`) resolved against the committed generations and the run, and
 * the catalog's newest generation on the selected one.
 *
 * A generation's round is `meta.round` (a number) as recorded by the writer. `latest`
 * selects the newest item generation (and the newest query generation); `n` the newest item
 * generation with meta.round = n and the newest query generation with meta.round ≤ n
 * (NOT_FOUND when no item generation has round n); `best` what the co-evolution run chose on
 * its dev queries (`bestServing`: the last adopted step's item and query generations and
 * its planner's round), the latest without a run or an adopted step. The selected item
 * generation is the catalog's root (state.ts); what is served is the catalog's newest
 * generation on it.
 */
import { cogrError } from '../../index/core/errors.ts';
import type { GenerationInfo } from '../../index/store/published.ts';
import { bestServing, type StoredRun } from '../run/state.ts';
import { catalogMeta } from './state.ts';

export type RoundSelector = number | 'latest' | 'best';

/** A selector as `selectGenerations` takes it: `best` resolved against the run, with the planner round it fixes. */
export function resolveSelector(
  run: Pick<StoredRun, 'steps'> | null,
  round: RoundSelector,
): { selector: Parameters<typeof selectGenerations>[2]; plannerRound?: number } {
  if (round !== 'best') return { selector: round };
  const best = run ? bestServing(run.steps) : null;
  return best ? { selector: { best }, plannerRound: best.plannerRound } : { selector: 'latest' };
}

function roundOf(g: GenerationInfo): number | null {
  const r = g.meta?.round;
  return typeof r === 'number' && Number.isInteger(r) ? r : null;
}

/** Which item and query generations serve a round selector. */
export function selectGenerations<G extends GenerationInfo>(
  items: readonly G[],
  queries: readonly G[],
  round: number | 'latest' | { best: { step: string; round: number; itemGeneration: number; queryGeneration: number } },
): { item: G; query: G | null; round: number | null } {
  if (items.length === 0)
    throw cogrError(
      'NOT_FOUND',
      'the database has no item generation to serve (run `cogr demo`, `cogr evolve` or `cogr index import` first)',
    );
  if (typeof round === 'object') {
    const b = round.best;
    const item = items.find((g) => g.generation === b.itemGeneration);
    if (!item)
      throw cogrError(
        'NOT_FOUND',
        `round best: the run's best step ${b.step} uses item generation ${b.itemGeneration}, which is not published`,
      );
    return { item, query: queries.find((g) => g.generation === b.queryGeneration) ?? null, round: b.round };
  }
  if (round === 'latest') {
    const item = items[items.length - 1];
    return { item, query: queries.length ? queries[queries.length - 1] : null, round: roundOf(item) };
  }
  const matching = items.filter((g) => roundOf(g) === round);
  if (matching.length === 0) {
    const known = [...new Set(items.map(roundOf).filter((r): r is number => r !== null))].sort((a, b) => a - b);
    throw cogrError(
      'NOT_FOUND',
      `round: no item generation of round ${round} (rounds: ${known.length ? known.join(', ') : 'none recorded'})`,
      { round },
    );
  }
  const qs = queries.filter((g) => {
    const r = roundOf(g);
    return r !== null && r <= round;
  });
  return { item: matching[matching.length - 1], query: qs.length ? qs[qs.length - 1] : null, round };
}

/**
 * The catalog's root of a selected item generation (its own number, or the root a catalog
 * generation names) and the catalog's newest generation on that root (the served one).
 */
export function servedHead<G extends Pick<GenerationInfo, 'generation' | 'meta'>>(
  items: readonly G[],
  selected: G,
): { root: number; head: G } {
  const root = catalogMeta(selected)?.root ?? selected.generation;
  let head = selected;
  for (const g of items) if (g.generation > head.generation && catalogMeta(g)?.root === root) head = g;
  return { root, head };
}
