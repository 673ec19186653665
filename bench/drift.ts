/**
 * `npm run bench -- drift [--json] [--items 10000] [--queries 1000] [--generations 6] [--no-store]`
 *
 * Cost of the vocabulary drift analysis on a seeded synthetic history (src/drift/
 * synthetic.ts), measured with tinybench in one process and reported as ratios to the
 * baseline task `sets`:
 * - `sets` (baseline): one pass over every keyword of every generation that normalises
 *   and builds the per-entity sets and keyword counts (prepareSnapshot), the least any
 *   analysis must do;
 * - `analyze`: analyzeDrift end to end (sets + every metric, alignment, churn, diffs);
 * - `render`: renderDriftHtml of the resulting report (bubble packing included);
 * - `store`: driftReportFromStore on a real LevelDB store holding the same generations
 *   (reading every generation back + analysis), skipped with --no-store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bench } from 'tinybench';
import { openDb } from '../index/store/db.ts';
import { KeywordIndexStore } from '../index/store/store.ts';
import { analyzeDrift, prepareSnapshot } from '../src/drift/analyze.ts';
import { driftReportFromStore } from '../src/drift/fromStore.ts';
import { renderDriftHtml } from '../src/drift/report.ts';
import { syntheticDriftInput } from '../src/drift/synthetic.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs as mean } from './fixtures.ts';

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const items = a.number('--items', 10_000, { min: 1, integer: true });
  const queries = a.number('--queries', 1_000, { min: 1, integer: true });
  const generations = a.number('--generations', 6, { min: 1, integer: true });
  const useStore = !a.has('--no-store');
  const input = syntheticDriftInput({ seed: 1, items, queries, generations });
  const keywordOccurrences = [...input.sides.item, ...input.sides.query].reduce(
    (a, s) => a + s.entries.reduce((b, e) => b + e.keywords.length, 0),
    0,
  );
  const report = analyzeDrift(input);

  let dir: string | null = null;
  let db: Awaited<ReturnType<typeof openDb>> | null = null;
  let store: KeywordIndexStore | null = null;
  if (useStore) {
    dir = mkdtempSync(join(tmpdir(), 'cogr-bench-drift-'));
    db = await openDb(join(dir, 'db'));
    store = new KeywordIndexStore(db);
    for (const side of ['item', 'query'] as const) {
      for (const snap of input.sides[side]) {
        const w = store.writer(side, { mode: 'replace' });
        for (const e of snap.entries) w.set(e.id, e.self, e.keywords);
        await w.commit();
      }
    }
  }

  let sink = 0;
  const bench = new Bench({ time: 0, iterations: 5, warmup: true, warmupIterations: 1 });
  bench
    .add('sets', () => {
      for (const side of ['item', 'query'] as const) for (const s of input.sides[side]) sink += prepareSnapshot(s).occurrences;
    })
    .add('analyze', () => {
      sink += analyzeDrift(input).alignment.length;
    })
    .add('render', () => {
      sink += renderDriftHtml(report).length;
    });
  if (store) {
    const st = store;
    bench.add('store', async () => {
      sink += (await driftReportFromStore(st)).alignment.length;
    });
  }
  try {
    await bench.run();
  } finally {
    if (db) await db.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
  const names = ['sets', 'analyze', 'render', ...(useStore ? ['store'] : [])];
  const base = mean(bench, 'sets');
  const tasks = names.map((n) => ({ task: n, meanMs: mean(bench, n), ratioToSets: mean(bench, n) / base }));
  const out = { items, queries, generations, keywordOccurrences, tasks, sink: sink > 0 };
  if (json) {
    process.stdout.write(JSON.stringify(out) + '\n');
    return;
  }
  process.stdout.write(
    `drift analysis on a synthetic history: ${items} items, ${queries} queries, ${generations} generations per side, ${keywordOccurrences} keyword occurrences\n`,
  );
  process.stdout.write('task       mean ms   × sets\n');
  for (const t of tasks)
    process.stdout.write(`${t.task.padEnd(8)} ${t.meanMs.toFixed(1).padStart(9)} ${t.ratioToSets.toFixed(2).padStart(8)}\n`);
}
