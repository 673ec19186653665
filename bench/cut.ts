/**
 * `npm run bench -- cut [--json] [--items 40000] [--queries 20] [--time 1000]`
 *
 * The relevance model's own set of a query (the expected-F1 cut by p that a run whose set
 * guard chose the model's sets serves and evaluates: generators/planner/ranking.ts), over
 * `--items` items for each of `--queries` seeded p vectors shaped like a logistic model's
 * (p = σ(3z − 12), z standard normal: a few likely items and a long tail, E about 18), at α = 1 and 4,
 * with tinybench in one process:
 * - `sort` (baseline): every item sorted by p, then the cut (sortByP + expectedF1Cut);
 * - `partial`: the same items from the top m by p alone (expectedF1Top).
 * Reported: mean time per query and the ratio partial / sort. The two give the same items
 * (checked here on every vector before timing).
 */
import { Bench } from 'tinybench';
import { createRng } from '../index/core/random.ts';
import { expectedF1Cut, expectedF1Top, sortByP } from '../generators/planner/expectedCut.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs } from './fixtures.ts';

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const n = a.number('--items', 40_000, { min: 1, integer: true });
  const Q = a.number('--queries', 20, { min: 1, integer: true });
  const time = a.number('--time', 1000, { min: 1 });
  const rng = createRng(11);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng())) * Math.cos(2 * Math.PI * rng());
  const ps = Array.from({ length: Q }, () => Float64Array.from({ length: n }, () => 1 / (1 + Math.exp(-(3 * normal() - 12)))));
  const alphas = [1, 4];
  const full = (p: Float64Array, alpha: number) => {
    const s = sortByP(p);
    return Array.from(s.order.subarray(0, expectedF1Cut(s, alpha)));
  };
  let setSize = 0;
  for (const p of ps)
    for (const alpha of alphas) {
      const want = full(p, alpha);
      const got = expectedF1Top(p, alpha);
      if (want.length !== got.length || want.some((e, i) => e !== got[i])) throw new Error(`the two cuts differ at α ${alpha}`);
      setSize += want.length;
    }
  const bench = new Bench({ time, warmupTime: 200 });
  bench
    .add('sort', () => {
      for (const p of ps) for (const alpha of alphas) full(p, alpha);
    })
    .add('partial', () => {
      for (const p of ps) for (const alpha of alphas) expectedF1Top(p, alpha);
    });
  await bench.run();
  const per = (name: string) => meanMs(bench, name) / (Q * alphas.length);
  const result = {
    items: n,
    queries: Q,
    alphas,
    meanSetSize: setSize / (Q * alphas.length),
    msPerQuery: { sort: per('sort'), partial: per('partial') },
    partial_vs_sort: per('partial') / per('sort'),
  };
  if (json) {
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  process.stdout.write(
    `the model's expected-F1 set over ${n} items (${Q} p vectors × α ${alphas.join(', ')}; mean set size ${result.meanSetSize.toFixed(1)})\n` +
      `  sort (baseline) ${result.msPerQuery.sort.toFixed(3)} ms/query\n` +
      `  partial         ${result.msPerQuery.partial.toFixed(3)} ms/query\n` +
      `  ratio partial / sort ${result.partial_vs_sort.toFixed(3)}\n`,
  );
}
