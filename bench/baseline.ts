/**
 * `npm run bench -- baseline [--json] [--dataset nfcorpus] [--folds 5]`
 *
 * Where the time of `cogr baseline bm25` goes, on one dataset, measured with tinybench
 * in one process and reported as ratios to the first task (`load`, parsing the
 * dataset's files into a Corpus):
 * - `load`: loadDataset (read, parse, validate);
 * - `index`: building and consolidating the wink BM25 index over title + text;
 * - `search`: BM25 search of every judged query (limit 1000) on a built index;
 * - `tune`: F1 curves (k = 1..1000) of every judged query and the per-fold cut-off
 *   search, from the rankings;
 * - `total`: runBm25Baseline end to end (index + search + tune + evaluation).
 */
import { Bench } from 'tinybench';
import { Bm25Index, runBm25Baseline, tuneCutoff } from '../src/baseline/bm25.ts';
import { loadDataset } from '../src/datasets/index.ts';
import { setF1Curve } from '../src/metrics.ts';
import { judgedQueryIds, kFolds } from '../src/splits.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs as mean } from './fixtures.ts';

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const dataset = a.string('--dataset', 'nfcorpus');
  const folds = a.number('--folds', 5, { min: 2, integer: true });
  const { corpus } = await loadDataset(dataset);
  const ids = judgedQueryIds(corpus);
  const text = new Map(corpus.queries.map((q) => [q.id, q.text]));
  const index = new Bm25Index(corpus.items);
  const rankings = ids.map((id) => index.search(text.get(id) ?? '', 1000).map((h) => h.id));
  let sink = 0;
  const bench = new Bench({ time: 0, iterations: 5, warmup: true, warmupIterations: 1 });
  bench
    .add('load', async () => {
      sink += (await loadDataset(dataset)).corpus.items.length;
    })
    .add('index', () => {
      sink += new Bm25Index(corpus.items).size;
    })
    .add('search', () => {
      for (const id of ids) sink += index.search(text.get(id) ?? '', 1000).length;
    })
    .add('tune', () => {
      const curves = new Map(ids.map((id, i) => [id, setF1Curve(rankings[i], corpus.relevant.get(id) ?? new Set(), 1000)]));
      for (const s of kFolds(ids, folds, 1))
        sink += tuneCutoff(
          s.train.map((id) => curves.get(id)!),
          1000,
        ).cutoff;
    })
    .add('total', () => {
      sink += runBm25Baseline(corpus, { folds, seed: 1 }).f1;
    });
  await bench.run();
  const names = ['load', 'index', 'search', 'tune', 'total'];
  const base = mean(bench, 'load');
  const rows = names.map((n) => ({ task: n, meanMs: mean(bench, n), ratioToLoad: mean(bench, n) / base }));
  const out = {
    dataset,
    items: corpus.items.length,
    judgedQueries: ids.length,
    folds,
    perQuerySearchMs: mean(bench, 'search') / ids.length,
    tasks: rows,
    sink: sink > 0,
  };
  if (json) {
    process.stdout.write(JSON.stringify(out) + '\n');
    return;
  }
  process.stdout.write(`BM25 baseline cost on ${dataset} (${corpus.items.length} items, ${ids.length} judged queries, ${folds} folds)\n`);
  process.stdout.write('task     mean ms   × load\n');
  for (const r of rows)
    process.stdout.write(`${r.task.padEnd(7)} ${r.meanMs.toFixed(1).padStart(8)} ${r.ratioToLoad.toFixed(2).padStart(8)}\n`);
  process.stdout.write(`search per query: ${out.perQuerySearchMs.toFixed(3)} ms\n`);
}
