/**
 * The BM25 baseline of the CoGR paper: BM25 over each item's raw text, with a
 * retrieval cut-off tuned on training queries.
 *
 * - Index: wink-bm25-text-search over one field, the item's title followed by its
 *   text (the title is not repeated when the text already begins with it, as for MED
 *   and NFCorpus). k1 = 1.2, b = 0.75; wink's IDF is ln(1 + (N − n + 0.5)/(n + 0.5))
 *   (its `k` = 1). wink cannot add documents after consolidate(), so the index is built
 *   once per dataset and then only searched.
 * - Tokens (`analysis`): `lucene` (the default) the chain of Lucene's EnglishAnalyzer, as
 *   Pyserini indexes and searches by default (UAX #29 words, possessive 's dropped, lower
 *   case, Lucene's 33 English stop words, Porter v1 stemming; index/text/english.ts), or
 *   `wink`, the paper-reference setting: lower case, split on anything that is not a
 *   letter or a digit, English stop words removed (wink-nlp-utils' list), no stemming.
 * - Order: score, highest first, ties by item id as trec_eval breaks them (src/trec.ts).
 * - Cut-off: for every fold, the k in 1..maxCutoff (default 1000) that maximises the
 *   mean F1 of the top-k set over the fold's TRAINING queries (ties: smallest k) is
 *   applied to its held-out queries; their whole-set P/R/F1 and ranked metrics are
 *   reported, per fold and as means over all held-out queries (each query is held out
 *   exactly once, so these are means over all judged queries).
 */
import bm25 from 'wink-bm25-text-search';
import { textTokens } from '../../index/text/analyzer.ts';
import { luceneEnglishTokens, TEXT_ANALYSES, type TextAnalysis } from '../../index/text/english.ts';
import { trecOrder, type RunQuery, type ScoredId } from '../trec.ts';
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';
import type { Corpus, Item } from '../../index/core/types.ts';
import { DEFAULT_CUTOFFS, evaluateRun, setF1Curve, type RankedScores, type RunEntry } from '../metrics.ts';
import { judgedQueryIds, kFolds } from '../splits.ts';
import { MIN_ITEMS } from '../datasets/requirements.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';

/** Lower-case word tokens (letters and digits), English stop words removed (the `wink` analysis). */
export function tokenize(text: string): string[] {
  return textTokens(text);
}

/** The tokenizer of a text analysis. */
export function tokenizerOf(analysis: TextAnalysis): (text: string) => string[] {
  return analysis === 'lucene' ? luceneEnglishTokens : tokenize;
}

/** The text BM25 indexes for an item: title + text, without repeating a leading title. */
export function itemText(item: Item): string {
  if (item.title === '' || item.text.startsWith(item.title)) return item.text;
  return `${item.title} ${item.text}`;
}

export interface Bm25Options {
  k1?: number;
  b?: number;
  analysis?: TextAnalysis;
}

export interface Bm25Hit {
  id: string;
  score: number;
}

/** A consolidated BM25 index over a corpus's items. */
export class Bm25Index {
  private readonly engine: ReturnType<typeof bm25>;
  readonly size: number;
  readonly analysis: TextAnalysis;

  constructor(items: readonly Item[], opts: Bm25Options = {}) {
    if (items.length < MIN_ITEMS) throw cogrError('INVALID_ARGUMENT', `items: BM25 needs at least ${MIN_ITEMS} items, got ${items.length}`);
    this.engine = bm25();
    this.engine.defineConfig({
      fldWeights: { body: 1 },
      bm25Params: { k1: opts.k1 ?? DEFAULTS.bm25.k1, b: opts.b ?? DEFAULTS.bm25.b, k: 1 },
    });
    this.analysis = opts.analysis ?? DEFAULTS.baseline.analysis;
    this.engine.definePrepTasks([tokenizerOf(this.analysis)]);
    for (const it of items) this.engine.addDoc({ body: itemText(it) }, it.id);
    this.engine.consolidate(9);
    this.size = items.length;
  }

  /** Items sharing at least one token with the text, best first (ties by id as trec_eval: src/trec.ts), at most `limit`. */
  search(text: string, limit: number = DEFAULTS.baseline.maxCutoff): Bm25Hit[] {
    const all = this.engine.search(text, this.size).map(([id, score]) => ({ id, score }));
    return trecOrder(all).slice(0, Math.max(1, limit));
  }
}

export const bm25BaselineOptionsSchema = z.object({
  folds: z
    .number({ message: 'folds must be a number' })
    .int('folds must be an integer')
    .min(2, 'folds must be >= 2')
    .default(DEFAULTS.run.folds),
  seed: z.number({ message: 'seed must be a number' }).int('seed must be an integer').default(DEFAULTS.run.seed),
  maxCutoff: z.number().int('maxCutoff must be an integer').min(1, 'maxCutoff must be >= 1').default(DEFAULTS.baseline.maxCutoff),
  k1: z.number().min(0, 'k1 must be >= 0').default(DEFAULTS.bm25.k1),
  b: z.number().min(0, 'b must be in [0, 1]').max(1, 'b must be in [0, 1]').default(DEFAULTS.bm25.b),
  analysis: z.enum(TEXT_ANALYSES, { message: `analysis must be one of ${TEXT_ANALYSES.join(', ')}` }).default(DEFAULTS.baseline.analysis),
});
/** `run`, when given, receives every judged query's ranking (top maxCutoff, trec order) for a run file. */
export type Bm25BaselineOptions = z.input<typeof bm25BaselineOptionsSchema> & { logger?: Logger; run?: RunQuery[] };

export interface FoldResult {
  fold: number;
  trainQueries: number;
  evalQueries: number;
  /** The tuned cut-off. */
  cutoff: number;
  /** Mean F1 of the training queries at that cut-off. */
  trainF1: number;
  f1: number;
  precision: number;
  recall: number;
  ndcg10: number;
  /** MAP of the unrestricted BM25 ranking (trec_eval's map over its top 1,000). */
  map: number;
}

export interface Bm25BaselineResult {
  dataset: string;
  items: number;
  judgedQueries: number;
  folds: number;
  seed: number;
  k1: number;
  b: number;
  /** The text analysis (index/text/english.ts). */
  analysis: TextAnalysis;
  /** The tuned cut-off of each fold. */
  cutoffs: number[];
  /** Means over all held-out queries. */
  f1: number;
  precision: number;
  recall: number;
  ndcg10: number;
  map: number;
  /** All ranked metrics (mrr, ndcg, ndcgBinary, p, r, f1, hit at 1, 3, 10, 100, 1000), means over held-out queries. */
  ranked: RankedScores;
  perFold: FoldResult[];
}

export function parseBm25Options(opts: Bm25BaselineOptions): z.output<typeof bm25BaselineOptionsSchema> {
  const { logger: _l, run: _r, ...rest } = opts;
  const r = bm25BaselineOptionsSchema.safeParse(rest);
  if (!r.success) throw schemaError('INVALID_ARGUMENT', r.error);
  return r.data;
}

/** The cut-off k in 1..maxK maximising mean F1 over the given curves (ties: smallest k). */
export function tuneCutoff(curves: readonly Float64Array[], maxK: number): { cutoff: number; f1: number } {
  let best = 1;
  let bestF1 = -1;
  for (let k = 1; k <= maxK; k++) {
    let s = 0;
    for (const c of curves) s += c[k];
    const m = curves.length > 0 ? s / curves.length : 0;
    if (m > bestF1 + 1e-12) {
      bestF1 = m;
      best = k;
    }
  }
  return { cutoff: best, f1: Math.max(0, bestF1) };
}

/** Run the k-fold BM25 baseline on a corpus. */
export function runBm25Baseline(corpus: Corpus, options: Bm25BaselineOptions = {}): Bm25BaselineResult {
  const o = parseBm25Options(options);
  const logger = options.logger ?? silentLogger;
  checkFolds(corpus, o.folds);
  logger.info(`bm25: indexing ${corpus.items.length} items of ${corpus.name} (${o.analysis} analysis)`);
  const index = new Bm25Index(corpus.items, { k1: o.k1, b: o.b, analysis: o.analysis });
  return runRankedBaseline(corpus, o, (text, limit) => index.search(text, limit), 'bm25', logger, options.run);
}

/** Refuse more folds than judged queries. */
export function checkFolds(corpus: Corpus, folds: number): void {
  const n = judgedQueryIds(corpus).length;
  if (n < folds)
    throw cogrError('INVALID_ARGUMENT', `folds: ${folds} folds need at least ${folds} judged queries, ${corpus.name} has ${n}`);
}

/**
 * A k-fold baseline over any ranking of the items for a query text: every judged query
 * ranked once, the cut-off tuned per fold on its training queries (maximum mean F1) and
 * applied to its held-out ones.
 */
export function runRankedBaseline(
  corpus: Corpus,
  o: z.output<typeof bm25BaselineOptionsSchema>,
  rank: (text: string, limit: number) => ScoredId[],
  name: string,
  logger: Logger = silentLogger,
  run?: RunQuery[],
): Bm25BaselineResult {
  const ids = judgedQueryIds(corpus);
  const limit = Math.max(o.maxCutoff, Math.max(...DEFAULT_CUTOFFS));
  const text = new Map(corpus.queries.map((q) => [q.id, q.text]));
  const rankings = new Map<string, string[]>();
  const curves = new Map<string, Float64Array>();
  for (const id of ids) {
    const hits = trecOrder(rank(text.get(id) ?? '', limit));
    run?.push({ queryId: id, hits: hits.slice(0, o.maxCutoff) });
    const ranked = hits.map((h) => h.id);
    rankings.set(id, ranked);
    curves.set(id, setF1Curve(ranked, corpus.relevant.get(id) ?? new Set(), o.maxCutoff));
  }
  logger.info(`${name}: searched ${ids.length} judged queries; tuning the cut-off over ${o.folds} folds`);
  const perFold: FoldResult[] = [];
  const heldOut: RunEntry[] = [];
  kFolds(ids, o.folds, o.seed).forEach((split, f) => {
    const { cutoff, f1: trainF1 } = tuneCutoff(
      split.train.map((id) => curves.get(id) as Float64Array),
      o.maxCutoff,
    );
    const entries: RunEntry[] = split.eval.map((id) => {
      const ranked = rankings.get(id) as string[];
      return { queryId: id, ranked, matched: ranked.slice(0, cutoff) };
    });
    heldOut.push(...entries);
    const ev = evaluateRun(entries, corpus);
    const set = ev.set as NonNullable<typeof ev.set>;
    perFold.push({
      fold: f + 1,
      trainQueries: split.train.length,
      evalQueries: split.eval.length,
      cutoff,
      trainF1,
      f1: set.f1,
      precision: set.precision,
      recall: set.recall,
      ndcg10: ev.ranked['ndcg@10'],
      map: ev.ranked['ap@1000'],
    });
    logger.info(`${name}: fold ${f + 1}/${o.folds} cutoff=${cutoff} trainF1=${trainF1.toFixed(4)} f1=${set.f1.toFixed(4)}`);
  });
  return baselineResult(corpus, { folds: o.folds, seed: o.seed, k1: o.k1, b: o.b, analysis: o.analysis }, perFold, heldOut);
}

/** A k-fold baseline's result: its per-fold figures and the means over every held-out query's entry. */
/** A baseline's figures on one split (a fold's result without its fold and query counts). */
export type SplitBaseline = Omit<FoldResult, 'fold' | 'trainQueries' | 'evalQueries'>;

export function baselineResult(
  corpus: Corpus,
  o: { folds: number; seed: number; k1: number; b: number; analysis: TextAnalysis },
  perFold: FoldResult[],
  heldOut: readonly RunEntry[],
): Bm25BaselineResult {
  const all = evaluateRun(heldOut, corpus);
  const set = all.set as NonNullable<typeof all.set>;
  return {
    dataset: corpus.name,
    items: corpus.items.length,
    judgedQueries: judgedQueryIds(corpus).length,
    folds: o.folds,
    seed: o.seed,
    k1: o.k1,
    b: o.b,
    analysis: o.analysis,
    cutoffs: perFold.map((f) => f.cutoff),
    f1: set.f1,
    precision: set.precision,
    recall: set.recall,
    ndcg10: all.ranked['ndcg@10'],
    map: all.ranked['ap@1000'],
    ranked: all.ranked,
    perFold,
  };
}
