/**
 * Collections to check the method on beside the shipped three, each built from what the
 * project has (scripts/check-collection.ts writes them as BEIR folders, so `cogr evolve
 * --dataset <folder>` and `cogr baseline` run on them as on any collection a user brings):
 *
 *   one-relevant  the synthetic collection of oneRelevantCorpus.ts: one relevant item per
 *                 query, long questions drawn from the item's words.
 *   known-item    one relevant item per query with real text: chosen items' titles become
 *                 the queries and every item keeps only its text (its title dropped from
 *                 all items, so the targets are not the only untitled ones): the shape of
 *                 BEIR's SciFact (a sentence, about one relevant abstract).
 *   few-queries   a collection's items with a seeded sample of a few dozen of its judged
 *                 queries and their judgements: the shape of LISA or CACM, where each fold
 *                 trains on about thirty queries.
 *
 * They are checks, not benchmarks to tune to: known-item and few-queries reuse a shipped
 * collection's texts with another task or another number of queries.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../index/core/errors.ts';
import { createRng, shuffle } from '../index/core/random.ts';
import type { Corpus } from '../index/core/types.ts';

/** Known-item queries from item titles (at least `minWords` words; items with a text of at least 20 words), `queries` of them chosen (seeded). */
export function knownItemCollection(corpus: Corpus, opts: { queries: number; seed: number; minWords?: number }): Corpus {
  const minWords = opts.minWords ?? 4;
  const words = (s: string) => s.split(/\s+/).filter((w) => w !== '').length;
  const eligible = corpus.items.filter((it) => words(it.title) >= minWords && words(it.text) >= 20);
  if (eligible.length < opts.queries)
    throw cogrError(
      'INVALID_ARGUMENT',
      `queries: ${corpus.name} has ${eligible.length} items with a title of ${minWords}+ words and a text of 20+ words, fewer than the ${opts.queries} asked`,
    );
  const chosen = shuffle(eligible, createRng(opts.seed)).slice(0, opts.queries);
  const items = corpus.items.map((it) => ({ id: it.id, title: '', text: it.text === '' ? it.title : it.text }));
  const queries = chosen.map((it) => ({ id: `q-${it.id}`, text: it.title }));
  const qrels = new Map(chosen.map((it) => [`q-${it.id}`, new Map([[it.id, 1]])]));
  const relevant = new Map(chosen.map((it) => [`q-${it.id}`, new Set([it.id])]));
  return { name: `${corpus.name}-known-item`, items, queries, qrels, relevant };
}

/**
 * The collection's items with `queries` of its judged queries (seeded) and their judgements;
 * or, given `ids`, those judged queries in that order (a sample fixed by its list, e.g. one
 * kept disjoint from the samples already looked at).
 */
export function fewQueriesCollection(corpus: Corpus, opts: { queries: number; seed: number; ids?: readonly string[] }): Corpus {
  const judged = corpus.queries.filter((q) => (corpus.relevant.get(q.id)?.size ?? 0) > 0);
  if (opts.ids) {
    const byId = new Map(judged.map((q) => [q.id, q]));
    const seen = new Set<string>();
    const queries = opts.ids.map((id, i) => {
      const q = byId.get(id);
      if (!q) throw cogrError('INVALID_ARGUMENT', `ids: entry ${i + 1} (${id}) is not a judged query of ${corpus.name}`);
      if (seen.has(id)) throw cogrError('INVALID_ARGUMENT', `ids: entry ${i + 1} (${id}) is listed twice`);
      seen.add(id);
      return q;
    });
    return sampleOf(corpus, queries, `${corpus.name}-${queries.length}-queries`);
  }
  if (judged.length < opts.queries)
    throw cogrError(
      'INVALID_ARGUMENT',
      `queries: ${corpus.name} has ${judged.length} judged queries, fewer than the ${opts.queries} asked`,
    );
  const chosen = new Set(
    shuffle(judged, createRng(opts.seed))
      .slice(0, opts.queries)
      .map((q) => q.id),
  );
  return sampleOf(
    corpus,
    judged.filter((q) => chosen.has(q.id)),
    `${corpus.name}-${opts.queries}-queries`,
  );
}

function sampleOf(corpus: Corpus, queries: Corpus['queries'], name: string): Corpus {
  return {
    name,
    items: corpus.items,
    queries,
    qrels: new Map(queries.map((q) => [q.id, corpus.qrels.get(q.id) ?? new Map()])),
    relevant: new Map(queries.map((q) => [q.id, corpus.relevant.get(q.id)!])),
  };
}

/** Write a corpus as a BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv (grades as judged). */
export function writeBeir(corpus: Corpus, dir: string): void {
  mkdirSync(join(dir, 'qrels'), { recursive: true });
  const lines = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
  writeFileSync(join(dir, 'corpus.jsonl'), lines(corpus.items.map((i) => ({ _id: i.id, title: i.title, text: i.text }))));
  writeFileSync(join(dir, 'queries.jsonl'), lines(corpus.queries.map((q) => ({ _id: q.id, text: q.text }))));
  const qrels = ['query-id\tcorpus-id\tscore'];
  for (const q of corpus.queries) for (const [d, g] of corpus.qrels.get(q.id) ?? []) qrels.push(`${q.id}\t${d}\t${g}`);
  writeFileSync(join(dir, 'qrels', 'test.tsv'), qrels.join('\n') + '\n');
}
