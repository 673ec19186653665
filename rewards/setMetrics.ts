/**
 * Quality of a whole retrieved set against the relevant set (the CoGR metric).
 * F-beta = (1 + β²)·tp / (β²·n_rel + n_ret); β = 1 gives F1 = 2·tp / (n_ret + n_rel).
 * All are 0 when tp = 0 (including the empty cases).
 */
import { DEFAULTS } from '../index/core/defaults.ts';

export interface SetCounts {
  /** |retrieved| */
  nRet: number;
  /** |relevant| */
  nRel: number;
  /** |retrieved ∩ relevant| */
  tp: number;
}

export function fBetaFromCounts(nRet: number, nRel: number, tp: number, beta: number = DEFAULTS.run.beta): number {
  if (tp <= 0) return 0;
  const b2 = beta * beta;
  return ((1 + b2) * tp) / (b2 * nRel + nRet);
}

export function f1FromCounts(nRet: number, nRel: number, tp: number): number {
  return tp <= 0 ? 0 : (2 * tp) / (nRet + nRel);
}

export function precisionFromCounts(nRet: number, tp: number): number {
  return nRet === 0 ? 0 : tp / nRet;
}

export function recallFromCounts(nRel: number, tp: number): number {
  return nRel === 0 ? 0 : tp / nRel;
}

/** Counts of a retrieved list (duplicates ignored) against a relevant set. */
export function setCounts(retrieved: Iterable<string>, relevant: ReadonlySet<string>): SetCounts {
  const seen = new Set<string>();
  let tp = 0;
  for (const r of retrieved) {
    if (seen.has(r)) continue;
    seen.add(r);
    if (relevant.has(r)) tp++;
  }
  return { nRet: seen.size, nRel: relevant.size, tp };
}

export interface SetScores {
  precision: number;
  recall: number;
  f1: number;
  fBeta: number;
}

export function setScores(retrieved: Iterable<string>, relevant: ReadonlySet<string>, beta: number = DEFAULTS.run.beta): SetScores {
  const c = setCounts(retrieved, relevant);
  return {
    precision: precisionFromCounts(c.nRet, c.tp),
    recall: recallFromCounts(c.nRel, c.tp),
    f1: f1FromCounts(c.nRet, c.nRel, c.tp),
    fBeta: fBetaFromCounts(c.nRet, c.nRel, c.tp, beta),
  };
}

/** Macro average (mean over queries) of per-query set scores. */
export function macroAverage(perQuery: readonly SetScores[]): SetScores {
  const n = perQuery.length;
  const sum = { precision: 0, recall: 0, f1: 0, fBeta: 0 };
  for (const s of perQuery) {
    sum.precision += s.precision;
    sum.recall += s.recall;
    sum.f1 += s.f1;
    sum.fBeta += s.fBeta;
  }
  return n === 0 ? sum : { precision: sum.precision / n, recall: sum.recall / n, f1: sum.f1 / n, fBeta: sum.fBeta / n };
}
