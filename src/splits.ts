/**
 * Deterministic, seeded splits along queries only (items are shared by every split),
 * as in the CoGR paper. Only judged queries (at least one relevant item) take part.
 * Given the same ids in the same order and the same seed, the result is identical.
 * Every subset keeps the input order of the ids.
 */
import { cogrError } from '../index/core/errors.ts';
import { createRng, shuffle } from '../index/core/random.ts';
import type { Corpus } from '../index/core/types.ts';

export interface Split {
  train: string[];
  eval: string[];
}

/** Ids of queries with at least one relevant item, in corpus order. */
export function judgedQueryIds(corpus: Pick<Corpus, 'queries' | 'relevant'>): string[] {
  return corpus.queries.filter((q) => (corpus.relevant.get(q.id)?.size ?? 0) > 0).map((q) => q.id);
}

function checkIds(ids: readonly string[]): void {
  if (new Set(ids).size !== ids.length) throw cogrError('INVALID_ARGUMENT', 'ids: a query id occurs twice');
}

function inOrder(ids: readonly string[], chosen: Set<string>): string[] {
  return ids.filter((id) => chosen.has(id));
}

/**
 * One train/eval split. `evalFraction` in (0, 1): round(n · evalFraction) ids go to
 * eval, at least 1 and at most n − 1 (needs n ≥ 2).
 */
export function trainEvalSplit(ids: readonly string[], opts: { evalFraction?: number; seed: number }): Split {
  const frac = opts.evalFraction ?? 0.2;
  if (!(frac > 0 && frac < 1)) throw cogrError('INVALID_ARGUMENT', `evalFraction: must be in (0, 1), got ${frac}`);
  if (!Number.isFinite(opts.seed)) throw cogrError('INVALID_ARGUMENT', `seed: must be a number, got ${opts.seed}`);
  checkIds(ids);
  if (ids.length < 2) throw cogrError('INVALID_ARGUMENT', `ids: a split needs at least 2 queries, got ${ids.length}`);
  const n = ids.length;
  const nEval = Math.min(n - 1, Math.max(1, Math.round(n * frac)));
  const order = shuffle(ids, createRng(opts.seed));
  const evalSet = new Set(order.slice(0, nEval));
  return { train: ids.filter((id) => !evalSet.has(id)), eval: inOrder(ids, evalSet) };
}

/**
 * k-fold cross-validation: the ids are shuffled once with the seed and dealt round
 * robin into k folds (sizes differ by at most one). Fold f evaluates on its own ids
 * and trains on all the others; every id is held out exactly once.
 */
export function kFolds(ids: readonly string[], k: number, seed: number): Split[] {
  if (!Number.isInteger(k) || k < 2) throw cogrError('INVALID_ARGUMENT', `folds: must be an integer >= 2, got ${k}`);
  if (!Number.isFinite(seed)) throw cogrError('INVALID_ARGUMENT', `seed: must be a number, got ${seed}`);
  checkIds(ids);
  if (ids.length < k) throw cogrError('INVALID_ARGUMENT', `folds: ${k} folds need at least ${k} judged queries, got ${ids.length}`);
  const order = shuffle(ids, createRng(seed));
  const foldOf = new Map<string, number>();
  order.forEach((id, i) => foldOf.set(id, i % k));
  const out: Split[] = [];
  for (let f = 0; f < k; f++) {
    out.push({ train: ids.filter((id) => foldOf.get(id) !== f), eval: ids.filter((id) => foldOf.get(id) === f) });
  }
  return out;
}
