/**
 * The dense baseline: every item ranked by the cosine of its embedding with the query's
 * (vectors from an OpenAI-compatible /v1/embeddings endpoint, src/embeddings/), the
 * retrieval cut-off tuned per fold on the training queries exactly as BM25's is
 * (runRankedBaseline in bm25.ts: the k in 1..maxCutoff maximising their mean F1),
 * nDCG@10 and MAP of the ranking over the held-out queries.
 */
import { silentLogger } from '../../index/core/log.ts';
import type { Corpus } from '../../index/core/types.ts';
import { DenseIndex, embedCorpus, type CorpusVectors, type EmbeddingsSetup } from '../embeddings/dense.ts';
import { checkFolds, parseBm25Options, runRankedBaseline, type Bm25BaselineOptions, type Bm25BaselineResult } from './bm25.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { RunQuery, ScoredId } from '../trec.ts';

export type DenseBaselineResult = Bm25BaselineResult & { method: 'dense'; model: string; dim: number; endpoint: string };

/** The k-fold dense baseline over precomputed vectors. */
export function runDenseOnVectors(
  corpus: Corpus,
  vectors: CorpusVectors,
  options: Bm25BaselineOptions = {},
  endpoint = '',
  run?: RunQuery[],
): DenseBaselineResult {
  const o = parseBm25Options(options);
  const logger = options.logger ?? silentLogger;
  checkFolds(corpus, o.folds);
  const index = new DenseIndex(
    corpus.items.map((it) => it.id),
    corpus.items.map((it) => vectors.items.get(it.id)!),
  );
  const rank = (text: string, limit: number): ScoredId[] => {
    const q = vectors.queries.get(text);
    if (q === undefined) throw cogrError('INTERNAL', `dense baseline: no vector for the query text ${JSON.stringify(text.slice(0, 60))}`);
    const scores = index.scores(q);
    return Array.from(index.rank(scores, limit), (i) => ({ id: index.ids[i], score: scores[i] }));
  };
  const r = runRankedBaseline(corpus, o, rank, 'dense', logger, run);
  return { method: 'dense', model: vectors.model, dim: vectors.dim, endpoint, ...r };
}

/** Embed the corpus (cached) and run the k-fold dense baseline. */
export async function runDenseBaseline(
  corpus: Corpus,
  setup: EmbeddingsSetup,
  options: Bm25BaselineOptions = {},
  run?: RunQuery[],
): Promise<DenseBaselineResult> {
  const logger = options.logger ?? silentLogger;
  checkFolds(corpus, parseBm25Options(options).folds);
  const vectors = await embedCorpus(corpus, setup, logger);
  return runDenseOnVectors(corpus, vectors, options, setup.client.baseURL, run);
}
