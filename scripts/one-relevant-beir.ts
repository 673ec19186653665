/**
 * Writes the synthetic one-relevant collection (test/fixtures/oneRelevantCorpus.ts: one
 * relevant item per query, long natural-language questions) as a BEIR folder, so that
 * `cogr evolve --dataset <folder>` and `cogr baseline` run on it as on any collection a
 * user brings:
 *
 *   npx tsx scripts/one-relevant-beir.ts --out DIR [--items 400] [--queries 200] [--seed 11]
 *
 * DIR gets corpus.jsonl, queries.jsonl and qrels/test.tsv; an existing DIR is refused.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { oneRelevantCorpus } from '../test/fixtures/oneRelevantCorpus.ts';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    items: { type: 'string', default: '400' },
    queries: { type: 'string', default: '200' },
    seed: { type: 'string', default: '11' },
  },
});
const count = (name: 'items' | 'queries' | 'seed'): number => {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < (name === 'seed' ? 0 : 1)) {
    process.stderr.write(`one-relevant-beir: --${name} must be a whole number${name === 'seed' ? '' : ' ≥ 1'} (got ${values[name]})\n`);
    process.exit(2);
  }
  return v;
};
const items = count('items');
const queries = count('queries');
const seed = count('seed');
if (!values.out) {
  process.stderr.write('one-relevant-beir: --out DIR is required\n');
  process.exit(2);
}
if (existsSync(values.out)) {
  process.stderr.write(`one-relevant-beir: ${values.out} exists; give a new folder\n`);
  process.exit(2);
}
const c = oneRelevantCorpus({ items, queries, seed });
mkdirSync(join(values.out, 'qrels'), { recursive: true });
const lines = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
writeFileSync(join(values.out, 'corpus.jsonl'), lines(c.items.map((i) => ({ _id: i.id, title: i.title, text: i.text }))));
writeFileSync(join(values.out, 'queries.jsonl'), lines(c.queries.map((q) => ({ _id: q.id, text: q.text }))));
const qrels = ['query-id\tcorpus-id\tscore'];
for (const [q, rel] of c.qrels) for (const [d, g] of rel) qrels.push(`${q}\t${d}\t${g}`);
writeFileSync(join(values.out, 'qrels', 'test.tsv'), qrels.join('\n') + '\n');
process.stdout.write(`${values.out}: ${c.items.length} items, ${c.queries.length} queries, one relevant item each (seed ${seed})\n`);
