/**
 * `npm run bench -- policy [--json] [--dataset med] [--batch 64] [--time 1000]`
 *
 * Throughput of the embedded generators on a shipped dataset, after SFT (2 epochs, M = 10)
 * so that weights, the planner's relevance model and its item index are realistic. Every
 * task handles one batch of `--batch` inputs × G = 8 samples (a GRPO group each), in one
 * process, with tinybench:
 * - `item_rank` (baseline): the deterministic top-10 candidate ranking of each item, 8×;
 * - `item_sample`: 8 samples per item at temperature 1.0, candidate features cached
 *   (the rollout path of every epoch after the first);
 * - `item_cold`: the same with the candidate cache cleared first (n-gram extraction and
 *   features paid once per item, as in a first epoch);
 * - `item_offers`: the same after a new query side is attached (each item offered three of
 *   another item's candidates): the candidates from the items' own texts are kept, the
 *   offers merged again (what the leave-out adoption test pays per group);
 * - `query_bm25` (baseline): one BM25 search of the raw query on the item view, 8×;
 * - `query_sample` / `query_cold`: 8 plans per training query sampled by the query
 *   planner (planned as held out), cached / cold (cold: the relevance features of every
 *   item, the probabilities and the candidates recomputed);
 * - `grpo_item`: one GRPO update on the batch's 8 × batch samples.
 * Reported: mean time per batch, samples per second, and ratios to the baselines.
 */
import { Bench } from 'tinybench';
import { createRng } from '../index/core/random.ts';
import { EmbeddedPolicy } from '../generators/policy/model.ts';
import { itemInput, queryInput, runSft } from '../generators/sft.ts';
import { loadDataset } from '../src/datasets/index.ts';
import { judgedQueryIds, trainEvalSplit } from '../src/splits.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs } from './fixtures.ts';

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const dataset = a.string('--dataset', 'med');
  const B = a.number('--batch', 64, { min: 1, integer: true });
  const time = a.number('--time', 1000, { min: 1 });
  const G = 8;
  const { corpus } = await loadDataset(dataset);
  const split = trainEvalSplit(judgedQueryIds(corpus), { seed: 1 });
  const train = new Set(split.train);
  const trainQueries = corpus.queries.filter((q) => train.has(q.id));
  const sft = runSft({ items: corpus.items, trainQueries, relevant: corpus.relevant, M: 10, epochs: 2, seed: 1 });
  const item = sft.itemPolicy;
  const planner = sft.planner;
  const itemView = planner.attached!;
  const items = corpus.items.slice(0, B).map(itemInput);
  const queries = trainQueries.slice(0, B).map(queryInput);
  const planAll = () => {
    for (const q of queries) for (let s = 0; s < G; s++) planner.plan(q, { temperature: 1, rng, asHeldOut: true });
  };
  const rng = createRng(7);
  const sampleAll = (p: EmbeddedPolicy, xs: typeof items) => {
    for (const x of xs) for (let s = 0; s < G; s++) p.sample(x, { temperature: 1, rng });
  };
  // A fixed GRPO batch: 8 samples per item, reward = its number of keywords (any signal will do).
  const grpoBatch = items.flatMap((x) => {
    const group = Array.from({ length: G }, () => item.sample(x, { temperature: 1, rng }));
    const mean = group.reduce((a, g) => a + g.keywords.length, 0) / G;
    return group.map((g) => ({ input: x, keywords: g.keywords, oldLogProb: g.logProb, advantage: g.keywords.length - mean }));
  });
  // A query side that offers each item three candidates of the next item (any offers will do).
  const offered = new Map(
    items.map((x, i) => [
      x.id,
      item
        .candidateKeywords(items[(i + 1) % items.length])
        .slice(0, 3)
        .map((keyword) => ({ keyword, judged: 1, ranked: 0, precision: 0.5 })),
    ]),
  );
  const bench = new Bench({ time, warmupTime: 200 });
  bench
    .add('item_rank', () => {
      for (const x of items) for (let s = 0; s < G; s++) item.rank(x, 10);
    })
    .add('item_sample', () => sampleAll(item, items))
    .add('item_cold', () => {
      item.clearCache();
      sampleAll(item, items);
    })
    .add('item_offers', () => {
      item.attachQuerySide({ offers: (id) => offered.get(id) ?? [] });
      sampleAll(item, items);
    })
    .add('query_bm25', () => {
      for (const q of queries) for (let s = 0; s < G; s++) itemView.search({ self: q.text, keywords: q.text.split(/\s+/) }, { k: 20 });
    })
    .add('query_sample', planAll)
    .add('query_cold', () => {
      planner.clearCache();
      planAll();
    })
    .add('grpo_item', () => {
      item.grpoUpdate(grpoBatch, { lr: 1e-6 });
    });
  await bench.run();
  const m = (n: string) => meanMs(bench, n);
  const perS = (n: string, count: number) => Math.round((count * G) / (m(n) / 1000));
  const result = {
    dataset,
    items: corpus.items.length,
    batch: B,
    group: G,
    queriesInBatch: queries.length,
    item_candidates_mean: items.reduce((a, x) => a + item.candidateKeywords(x).length, 0) / items.length,
    query_keywords_mean:
      queries.reduce((a, x) => a + planner.plan(x, { asHeldOut: true }).keywords.length, 0) / Math.max(1, queries.length),
    ms: Object.fromEntries(bench.tasks.map((t) => [t.name, m(t.name)])),
    item_samples_per_s: perS('item_sample', items.length),
    item_cold_samples_per_s: perS('item_cold', items.length),
    query_samples_per_s: perS('query_sample', queries.length),
    query_cold_samples_per_s: perS('query_cold', queries.length),
    grpo_item_samples_per_s: perS('grpo_item', items.length),
    item_sample_vs_rank: m('item_sample') / m('item_rank'),
    item_cold_vs_cached: m('item_cold') / m('item_sample'),
    item_offers_vs_cold: m('item_offers') / m('item_cold'),
    query_sample_vs_bm25: m('query_sample') / m('query_bm25'),
    query_cold_vs_cached: m('query_cold') / m('query_sample'),
  };
  if (json) {
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  process.stdout.write(`embedded generators on ${dataset} (${result.items} items), batch ${B} inputs × ${G} samples\n`);
  for (const t of bench.tasks) process.stdout.write(`  ${t.name.padEnd(14)} ${m(t.name).toFixed(3).padStart(10)} ms/batch\n`);
  process.stdout.write(
    `  item samples/s ${result.item_samples_per_s} (cold ${result.item_cold_samples_per_s}), query samples/s ${result.query_samples_per_s} (cold ${result.query_cold_samples_per_s}), GRPO item samples/s ${result.grpo_item_samples_per_s}\n` +
      `  item candidates per input ${result.item_candidates_mean.toFixed(1)}, planner keywords per query ${result.query_keywords_mean.toFixed(1)}\n` +
      `  ratios: item sample / rank ${result.item_sample_vs_rank.toFixed(2)}, item cold / cached ${result.item_cold_vs_cached.toFixed(2)}, item offers changed / cold ${result.item_offers_vs_cold.toFixed(2)}, query sample / BM25 search ${result.query_sample_vs_bm25.toFixed(2)}, query cold / cached ${result.query_cold_vs_cached.toFixed(2)}\n`,
  );
}
