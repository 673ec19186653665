/**
 * The BM25 baseline on a run's own split (the demo's reference row): BM25 over raw item
 * text (wink-bm25-text-search, src/baseline/bm25.ts), the retrieval cut-off tuned on the
 * training queries to maximise F1 and applied to the held-out ones.
 */
import type { Corpus } from '../../index/types.ts';
import { DEFAULTS } from '../../index/defaults.ts';
import { Bm25Index, tuneCutoff, type FoldResult } from '../baseline/bm25.ts';
import { evaluateRun, setF1Curve, type RunEntry } from '../metrics.ts';
import type { RunSplit } from '../run/state.ts';

/** A fold's figures without its fold and query counts. */
export type SplitBaseline = Omit<FoldResult, 'fold' | 'trainQueries' | 'evalQueries'>;

export function bm25OnSplit(corpus: Corpus, split: RunSplit, maxCutoff: number = DEFAULTS.baseline.maxCutoff, index?: Bm25Index): SplitBaseline {
  const bm25 = index ?? new Bm25Index(corpus.items);
  const text = new Map(corpus.queries.map((q) => [q.id, q.text]));
  const ranked = new Map<string, string[]>();
  for (const id of [...split.train, ...split.eval]) ranked.set(id, bm25.search(text.get(id) ?? '', maxCutoff).map((h) => h.id));
  const curves = split.train.map((id) => setF1Curve(ranked.get(id)!, corpus.relevant.get(id) ?? new Set(), maxCutoff));
  const { cutoff, f1: trainF1 } = tuneCutoff(curves, maxCutoff);
  const entries: RunEntry[] = split.eval.map((id) => {
    const r = ranked.get(id)!;
    return { queryId: id, ranked: r, matched: r.slice(0, cutoff) };
  });
  const ev = evaluateRun(entries, corpus);
  return {
    cutoff,
    trainF1,
    f1: ev.set?.f1 ?? 0,
    precision: ev.set?.precision ?? 0,
    recall: ev.set?.recall ?? 0,
    ndcg10: ev.ranked['ndcg@10'] ?? 0,
  };
}
