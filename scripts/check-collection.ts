/**
 * Writes one of the check collections (bench/checkCollections.ts) as a BEIR folder, so that
 * `cogr evolve --dataset <folder>` and `cogr baseline … --dataset <folder>` run on it as on
 * any collection a user brings:
 *
 *   npx tsx scripts/check-collection.ts one-relevant --out DIR [--items 400] [--queries 200] [--seed 11]
 *   npx tsx scripts/check-collection.ts topical --out DIR [--items 2000] [--queries 35] [--relevant 12] [--seed 101]
 *   npx tsx scripts/check-collection.ts known-item --out DIR [--from cisi] [--queries 800] [--seed 7]
 *   npx tsx scripts/check-collection.ts few-queries --out DIR [--from nfcorpus] [--queries 35] [--seed 1]
 *   npx tsx scripts/check-collection.ts few-queries --out DIR [--from nfcorpus] --ids FILE
 *
 * `topical` is the seeded judged collection of `npm run bench -- evolve` (bench/judgedCollection.ts:
 * topic vocabularies over a Zipf background, queries of 2–4 words of one topic, relevant = the
 * `--relevant` items of the topic sharing the most query words), here with few queries.
 * `--ids FILE` (few-queries): the judged queries listed in FILE (one id per line, in that
 * order) instead of a seeded draw; bench/check-samples/ holds the lists of the fresh samples
 * the project checked its options on (its README.md).
 * `--from` is a shipped or registered dataset (or a folder). DIR gets corpus.jsonl,
 * queries.jsonl and qrels/test.tsv; an existing DIR is refused.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadDataset } from '../src/datasets/index.ts';
import { fewQueriesCollection, knownItemCollection, writeBeir } from '../bench/checkCollections.ts';
import { judgedCollection } from '../bench/judgedCollection.ts';
import { oneRelevantCorpus } from '../bench/oneRelevantCorpus.ts';
import type { Corpus } from '../index/core/types.ts';

const KINDS = ['one-relevant', 'topical', 'known-item', 'few-queries'] as const;
const fail = (msg: string): never => {
  process.stderr.write(`check-collection: ${msg}\n`);
  process.exit(2);
};
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string' },
    from: { type: 'string' },
    items: { type: 'string' },
    queries: { type: 'string' },
    seed: { type: 'string' },
    ids: { type: 'string' },
    relevant: { type: 'string' },
  },
});
const kind = positionals[0] as (typeof KINDS)[number];
if (positionals.length !== 1 || !KINDS.includes(kind)) fail(`give one kind: ${KINDS.join(' | ')} (got ${positionals.join(' ') || 'none'})`);
const count = (name: 'items' | 'queries' | 'relevant' | 'seed', fallback: number): number => {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < (name === 'seed' ? 0 : 1))
    fail(`--${name} must be a whole number${name === 'seed' ? '' : ' ≥ 1'} (got ${raw})`);
  return v;
};
const out = values.out ?? fail('--out DIR is required');
if (existsSync(out)) fail(`${out} exists; give a new folder`);
if (values.relevant !== undefined && kind !== 'topical') fail('--relevant is for topical');

let corpus: Corpus;
let what: string;
if (kind === 'one-relevant') {
  const seed = count('seed', 11);
  corpus = oneRelevantCorpus({ items: count('items', 400), queries: count('queries', 200), seed });
  what = `one relevant item each (synthetic, seed ${seed})`;
} else if (kind === 'topical') {
  const seed = count('seed', 101);
  const relevant = count('relevant', 12);
  corpus = judgedCollection({ items: count('items', 2000), queries: count('queries', 35), relevant, seed });
  what = `up to ${relevant} relevant items each (synthetic topics, seed ${seed})`;
} else {
  if (values.ids !== undefined && kind !== 'few-queries') fail('--ids is for few-queries');
  const from = values.from ?? (kind === 'known-item' ? 'cisi' : 'nfcorpus');
  const source = (await loadDataset(from)).corpus;
  const seed = count('seed', kind === 'known-item' ? 7 : 1);
  if (kind === 'known-item') {
    corpus = knownItemCollection(source, { queries: count('queries', 800), seed });
    what = `one relevant item each: ${from}'s titles as queries, its texts as items (seed ${seed})`;
  } else {
    const idsFile = values.ids;
    if (idsFile !== undefined) {
      if (!existsSync(idsFile)) fail(`--ids ${idsFile}: no such file`);
      const ids = readFileSync(idsFile, 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '');
      corpus = (() => {
        try {
          return fewQueriesCollection(source, { queries: ids.length, seed, ids });
        } catch (e) {
          return fail(`--ids ${idsFile}: ${(e as Error).message}`);
        }
      })();
      what = `${from}'s judged queries listed in ${idsFile}`;
    } else {
      corpus = fewQueriesCollection(source, { queries: count('queries', 35), seed });
      what = `${from}'s judged queries sampled (seed ${seed})`;
    }
  }
}
writeBeir(corpus, out);
process.stdout.write(`${out}: ${corpus.items.length} items, ${corpus.queries.length} queries, ${what}\n`);
