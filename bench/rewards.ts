/**
 * `npm run bench -- rewards [--json] [--items N] [--queries N] [--seed S] [--batch N]
 *                            [--skip-workers] [--skip-nfcorpus]`
 *
 * The item-side reward at the paper's internal scale and on NFCorpus, all ratios
 * measured in one process with tinybench:
 * - `full`: the full-recompute reference (`itemRewardFull`, every item's query set and
 *   every query's counts recomputed; the reference counts, which do not depend on the
 *   candidate, are computed once and passed in, so the baseline is not charged twice);
 * - `incremental`: `itemRewardIncremental` (Appendix B.3) with the per-round cache;
 * - `lookup`: only the look-up the incremental form cannot avoid (`candidateLookup`:
 *   normalise the candidate, memoised, and union the query-index postings of its
 *   keywords and the item's title); `view_match_us` is the same through the public
 *   `queryView.match` (which normalises every keyword afresh), for reference;
 * - workers: throughput of a batch of item rewards on a RewardPool of 1 and of 2
 *   workers (the same batch, contexts on SharedArrayBuffer), in alternating rounds.
 *   Beside the wall-clock ratio, `cpu_cores_used_*` (process CPU time of all threads
 *   per wall-clock second during the batches) shows how much of the machine the run
 *   actually got: on a shared machine with scheduler autogroups the wall-clock ratio
 *   is capped by the other sessions' load, not by the pool.
 *
 * Synthetic internal-scale corpus (seeded, `synthetic(...)` below):
 * - T = 32 topics, each with S = 8 sub-topics. Every (topic, sub-topic) owns 24
 *   three-word keyword phrases, every topic 60 general phrases, and there are 2,000
 *   noise phrases shared by all.
 * - An item (40,000 by default) has a primary (topic, sub-topic), drawn uniformly, and
 *   with probability 0.3 a secondary (topic, sub-topic). Its 10 reference keywords: 6
 *   from its sub-topic, 2 from its topic's general phrases, 2 from the secondary
 *   sub-topic (or noise). Its title ("item 123") matches no keyword.
 * - A query (13,500 by default) has a topic and 6 or 7 of its 8 sub-topics; its 15
 *   keywords: 13 from the union of those sub-topics' phrases, 2 general ones of the
 *   topic. rel(q) = the items whose primary topic is the query's topic and whose
 *   primary sub-topic is one of the query's: 40,000/32 · 6.5/8 ≈ 1,016 per query.
 * - Matched sets come out at ≈ 500–600 items per query with F1 ≈ 0.6, and each item is
 *   retrieved by ≈ 250 queries (≈ 10M (item, query) pairs in the cache).
 * - Candidates: an item's reference keywords with 2 dropped and 2 other phrases of
 *   its sub-topic or topic added (a plausible policy sample).
 *
 * NFCorpus (data/nfcorpus): items are the 3,162 documents, each keyed by its 10 most
 * frequent unigrams/bigrams (bigrams weighted 1.5; "num" and words under 3 letters
 * ignored), self keyword = its id; queries are q-titles.queries with their words and
 * adjacent word pairs as keywords (a few English stop words removed); rel from
 * s-3.qrel (grades 1 and 2). Candidates: 2 of the 10 keywords swapped for the
 * document's next-ranked terms.
 */
import { Bench } from 'tinybench';
import { createRng, randInt, type Rng } from '../index/core/random.ts';
import type { IndexEntry } from '../index/core/types.ts';
import { KeywordView } from '../index/view/view.ts';
import {
  buildItemRewardCache,
  candidateLookup,
  fullQueryCounts,
  itemRewardFull,
  itemRewardIncremental,
  type ItemRewardCache,
  type ItemRewardContext,
} from '../rewards/itemReward.ts';
import { buildRelevance } from '../rewards/relevance.ts';
import type { RewardSample } from '../rewards/scorer.ts';
import { parseBenchArgs } from './args.ts';
import { meanMs, median, nfcorpusDocs, nfcorpusRelevant, nfcorpusTitleQueries, round } from './fixtures.ts';
import { RewardPool } from '../workers/pool.ts';

interface Workload {
  name: string;
  items: IndexEntry[];
  queries: IndexEntry[];
  relevant: Map<string, Set<string>>;
  /** (item id, candidate) pairs. */
  candidates: { id: string; keywords: string[] }[];
}

// ---------------------------------------------------------------- synthetic corpus

export function synthetic(opts: { items: number; queries: number; seed: number; candidates: number }): Workload {
  const T = 32;
  const S = 8;
  const PER_SUB = 24;
  const PER_GENERAL = 60;
  const NOISE = 2000;
  const rng = createRng(opts.seed);
  const sub = (t: number, s: number, j: number) => `t${t} s${s} term${j}`;
  const general = (t: number, j: number) => `t${t} general term${j}`;
  const noise = (j: number) => `noise phrase ${j}`;
  const pickDistinct = (n: number, draw: () => string, into: Set<string>) => {
    let guard = 0;
    const goal = into.size + n;
    while (into.size < goal && guard++ < 1000) into.add(draw());
  };

  const items: IndexEntry[] = [];
  const primary: { t: number; s: number }[] = [];
  for (let i = 0; i < opts.items; i++) {
    const t = randInt(rng, T);
    const s = randInt(rng, S);
    primary.push({ t, s });
    const kws = new Set<string>();
    pickDistinct(6, () => sub(t, s, randInt(rng, PER_SUB)), kws);
    pickDistinct(2, () => general(t, randInt(rng, PER_GENERAL)), kws);
    if (rng() < 0.3) {
      const t2 = (t + 1 + randInt(rng, T - 1)) % T;
      const s2 = randInt(rng, S);
      pickDistinct(2, () => sub(t2, s2, randInt(rng, PER_SUB)), kws);
    } else {
      pickDistinct(2, () => noise(randInt(rng, NOISE)), kws);
    }
    items.push({ id: `item-${String(i).padStart(6, '0')}`, self: `item ${i}`, keywords: [...kws] });
  }
  const byTopicSub = new Map<number, string[]>();
  items.forEach((it, i) => {
    const key = primary[i].t * S + primary[i].s;
    const list = byTopicSub.get(key) ?? [];
    list.push(it.id);
    byTopicSub.set(key, list);
  });
  const queries: IndexEntry[] = [];
  const relevant = new Map<string, Set<string>>();
  for (let q = 0; q < opts.queries; q++) {
    const t = randInt(rng, T);
    const k = rng() < 0.5 ? 6 : 7;
    const subs = shuffleSmall(
      Array.from({ length: S }, (_, s) => s),
      rng,
    ).slice(0, k);
    const kws = new Set<string>();
    pickDistinct(13, () => sub(t, subs[randInt(rng, subs.length)], randInt(rng, PER_SUB)), kws);
    pickDistinct(2, () => general(t, randInt(rng, PER_GENERAL)), kws);
    const id = `query-${String(q).padStart(6, '0')}`;
    queries.push({ id, self: `query ${q}`, keywords: [...kws] });
    const rel = new Set<string>();
    for (const s of subs) for (const iid of byTopicSub.get(t * S + s) ?? []) rel.add(iid);
    relevant.set(id, rel);
  }
  const candidates: { id: string; keywords: string[] }[] = [];
  for (let c = 0; c < opts.candidates; c++) {
    const i = randInt(rng, items.length);
    const { t, s } = primary[i];
    const kws = shuffleSmall(items[i].keywords, rng).slice(2);
    const set = new Set(kws);
    pickDistinct(1, () => sub(t, s, randInt(rng, PER_SUB)), set);
    pickDistinct(1, () => general(t, randInt(rng, PER_GENERAL)), set);
    candidates.push({ id: items[i].id, keywords: [...set] });
  }
  return { name: 'synthetic', items, queries, relevant, candidates };
}

function shuffleSmall<T>(list: readonly T[], rng: Rng): T[] {
  const a = [...list];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

// ---------------------------------------------------------------- NFCorpus

const QUERY_STOP = new Set([
  'a',
  'an',
  'the',
  'of',
  'in',
  'on',
  'for',
  'and',
  'or',
  'to',
  'is',
  'are',
  'with',
  'by',
  'from',
  'at',
  'as',
  'do',
  'does',
  'how',
  'what',
  'why',
  'can',
  'be',
  'it',
  'its',
  'vs',
]);

function docTerms(text: string): string[] {
  const words = text.split(/\s+/).filter((w) => w.length >= 3 && w !== 'num');
  const score = new Map<string, number>();
  const first = new Map<string, number>();
  const add = (t: string, w: number, pos: number) => {
    score.set(t, (score.get(t) ?? 0) + w);
    if (!first.has(t)) first.set(t, pos);
  };
  for (let j = 0; j < words.length; j++) {
    add(words[j], 1, j);
    if (j + 1 < words.length) add(`${words[j]} ${words[j + 1]}`, 1.5, j);
  }
  return [...score.keys()].sort((a, b) => score.get(b)! - score.get(a)! || first.get(a)! - first.get(b)!);
}

export function nfcorpus(seed: number, nCandidates: number): Workload {
  const items: IndexEntry[] = [];
  const ranked = new Map<string, string[]>();
  for (const d of nfcorpusDocs()) {
    const terms = docTerms(d.text);
    ranked.set(d.id, terms);
    items.push({ id: d.id, self: d.id, keywords: terms.slice(0, 10) });
  }
  const queries: IndexEntry[] = [];
  for (const q of nfcorpusTitleQueries()) {
    const words = q.text
      .toLowerCase()
      .split(/\s+/)
      .filter((w) => w.length > 0 && !QUERY_STOP.has(w));
    const kws = new Set<string>(words);
    for (let j = 0; j + 1 < words.length; j++) kws.add(`${words[j]} ${words[j + 1]}`);
    queries.push({ id: q.id, self: q.text, keywords: [...kws].slice(0, 30) });
  }
  const relevant = nfcorpusRelevant();
  const rng = createRng(seed);
  const candidates: { id: string; keywords: string[] }[] = [];
  for (let c = 0; c < nCandidates; c++) {
    const it = items[randInt(rng, items.length)];
    const terms = ranked.get(it.id)!;
    const kept = shuffleSmall(terms.slice(0, 10), rng).slice(2);
    candidates.push({ id: it.id, keywords: [...new Set([...kept, ...terms.slice(10, 12)])] });
  }
  return { name: 'nfcorpus', items, queries, relevant, candidates };
}

// ---------------------------------------------------------------- measurement

interface Prepared {
  ctx: ItemRewardContext;
  cache: ItemRewardCache;
  pairs: { item: number; keywords: string[]; self: string }[];
  stats: Record<string, number>;
}

function prepare(w: Workload, shared: boolean): Prepared {
  const t0 = performance.now();
  const itemView = KeywordView.build('item', 0, w.items, { shared });
  const queryView = KeywordView.build('query', 0, w.queries, { shared });
  const relevance = buildRelevance(queryView, itemView, w.relevant, undefined, { shared });
  const t1 = performance.now();
  const ctx: ItemRewardContext = { itemView, queryView, relevance };
  const cache = buildItemRewardCache(ctx);
  const t2 = performance.now();
  const pairs = w.candidates.map((c) => {
    const item = itemView.ordinalOf(c.id);
    return { item, keywords: c.keywords, self: itemView.selfOf(item) };
  });
  let counted = 0;
  let relSum = 0;
  let retSum = 0;
  let f1Sum = 0;
  for (let q = 0; q < queryView.size; q++) {
    if (!relevance.counted[q]) continue;
    counted++;
    relSum += relevance.nRel[q];
    retSum += cache.nRet[q];
    f1Sum += cache.nTp[q] > 0 ? (2 * cache.nTp[q]) / (cache.nRet[q] + relevance.nRel[q]) : 0;
  }
  return {
    ctx,
    cache,
    pairs,
    stats: {
      items: itemView.size,
      queries: queryView.size,
      counted_queries: counted,
      mean_relevant_per_query: round(relSum / Math.max(1, counted), 1),
      mean_matched_per_query: round(retSum / Math.max(1, counted), 1),
      reference_macro_f1: round(f1Sum / Math.max(1, counted), 4),
      cache_pairs: cache.qref.length,
      mean_queries_per_item: round(cache.qref.length / Math.max(1, itemView.size), 1),
      build_views_ms: round(t1 - t0, 0),
      build_cache_ms: round(t2 - t1, 0),
    },
  };
}

const ROUNDS = 5;

async function measureRewards(p: Prepared, fullSamples: number): Promise<Record<string, number>> {
  const { ctx, cache, pairs } = p;
  const reference = fullQueryCounts(ctx);
  // Sanity: the incremental form equals the full recompute on the benchmark's candidates.
  let maxDiff = 0;
  for (let k = 0; k < Math.min(3, pairs.length); k++) {
    const a = itemRewardIncremental(ctx, cache, pairs[k].item, pairs[k].keywords);
    const b = itemRewardFull(ctx, pairs[k].item, pairs[k].keywords, reference);
    maxDiff = Math.max(maxDiff, Math.abs(a - b));
  }
  let k0 = 0;
  let k1 = 0;
  let k2 = 0;
  let k3 = 0;
  let sink = 0;
  // The machine is shared: the fast tasks run in several short alternating rounds and
  // the medians (of latencies and of the per-round ratios) are reported.
  const rounds: { match: number; lookup: number; inc: number }[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const fast = new Bench({ time: 400, warmupTime: 100 });
    fast.add('match', () => {
      const x = pairs[k0++ % pairs.length];
      sink += ctx.queryView.match({ self: x.self, keywords: x.keywords }).length;
    });
    fast.add('lookup', () => {
      const x = pairs[k1++ % pairs.length];
      sink += candidateLookup(ctx, x.item, x.keywords).length;
    });
    fast.add('incremental', () => {
      const x = pairs[k2++ % pairs.length];
      sink += itemRewardIncremental(ctx, cache, x.item, x.keywords);
    });
    await fast.run();
    rounds.push({ match: meanMs(fast, 'match'), lookup: meanMs(fast, 'lookup'), inc: meanMs(fast, 'incremental') });
  }
  const slow = new Bench({ time: 0, iterations: fullSamples, warmup: false });
  slow.add('full', () => {
    const x = pairs[k3++ % pairs.length];
    sink += itemRewardFull(ctx, x.item, x.keywords, reference);
  });
  await slow.run();
  const match = median(rounds.map((x) => x.match));
  const lookup = median(rounds.map((x) => x.lookup));
  const inc = median(rounds.map((x) => x.inc));
  const full = meanMs(slow, 'full');
  if (!Number.isFinite(sink)) throw new Error('unexpected non-finite reward sum');
  return {
    full_ms: round(full, 2),
    incremental_us: round(inc * 1000, 2),
    lookup_us: round(lookup * 1000, 2),
    view_match_us: round(match * 1000, 2),
    incremental_vs_full: round(full / inc, 0),
    incremental_vs_lookup: round(median(rounds.map((x) => x.inc / x.lookup)), 2),
    item_rewards_per_second: round(1000 / inc, 0),
    full_rewards_per_second: round(1000 / full, 2),
    incremental_minus_full_max_abs: maxDiff,
  };
}

async function measureWorkers(p: Prepared, batchSize: number): Promise<Record<string, number>> {
  const { ctx, cache, pairs } = p;
  // A batch of item rewards: per item 4 candidates (a GRPO group's worth), scored by the pool's scorer.
  const batch: RewardSample[] = [];
  for (let k = 0; k < batchSize / 4; k++) {
    const x = pairs[k % pairs.length];
    const id = ctx.itemView.id(x.item);
    for (const keywords of [x.keywords, x.keywords.slice(1), x.keywords.slice(2), x.keywords.slice(0, -1)]) batch.push({ id, keywords });
  }
  const nRewards = batch.length;
  const out: Record<string, number> = { batch_rewards: nRewards };
  const pools: RewardPool[] = [];
  const perRound: { w1: number; w2: number }[] = [];
  // Process CPU time (all threads) per batch: how many cores the run really got.
  const cpu = { workers1: 0, workers2: 0 };
  const wall = { workers1: 0, workers2: 0 };
  const timed = async (name: 'workers1' | 'workers2', pool: RewardPool) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await pool.rewards(batch);
    wall[name] += performance.now() - t0;
    const d = process.cpuUsage(c0);
    cpu[name] += d.user + d.system;
  };
  try {
    for (const size of [1, 2]) {
      const pool = RewardPool.create({ size });
      pools.push(pool);
      const t0 = performance.now();
      const built = await pool.buildItemCache(ctx);
      out[`cache_build_workers${size}_ms`] = round(performance.now() - t0, 0);
      if (built.qref.length !== cache.qref.length) throw new Error('pool cache differs from the in-process cache');
      pool.setContext({
        side: 'item',
        itemView: ctx.itemView,
        queryView: ctx.queryView,
        relevance: ctx.relevance,
        cache: built,
        options: {},
      });
      await pool.rewards(batch.slice(0, 256)); // warm: views decoded in every worker
      await pool.rewards(batch);
    }
    // Alternating rounds (1 worker, then 2) so that load from other processes hits both.
    for (let r = 0; r < ROUNDS; r++) {
      const bench = new Bench({ time: 0, iterations: 2, warmup: false });
      bench.add('workers1', () => timed('workers1', pools[0]));
      bench.add('workers2', () => timed('workers2', pools[1]));
      await bench.run();
      perRound.push({ w1: meanMs(bench, 'workers1'), w2: meanMs(bench, 'workers2') });
    }
  } finally {
    for (const pool of pools) await pool.destroy();
  }
  const w1 = median(perRound.map((x) => x.w1));
  const w2 = median(perRound.map((x) => x.w2));
  out.item_rewards_per_second_workers1 = round((nRewards * 1000) / w1, 0);
  out.item_rewards_per_second_workers2 = round((nRewards * 1000) / w2, 0);
  out.workers2_vs_1 = round(median(perRound.map((x) => x.w1 / x.w2)), 2);
  out.cpu_cores_used_workers1 = round(cpu.workers1 / 1000 / wall.workers1, 2);
  out.cpu_cores_used_workers2 = round(cpu.workers2 / 1000 / wall.workers2, 2);
  return out;
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const nItems = a.number('--items', 40_000, { min: 1 });
  const nQueries = a.number('--queries', 13_500, { min: 1 });
  const seed = a.number('--seed', 42, { min: 1 });
  const batchSize = a.number('--batch', 16_000, { min: 1 });
  const log = (m: string) => {
    if (!json) process.stdout.write(m + '\n');
    else process.stderr.write(m + '\n');
  };

  log(`synthetic corpus: ${nItems} items, ${nQueries} queries (seed ${seed})`);
  const syn = prepare(synthetic({ items: nItems, queries: nQueries, seed, candidates: 4000 }), true);
  log(`  ${JSON.stringify(syn.stats)}`);
  const synR = await measureRewards(syn, 5);
  const synW = a.has('--skip-workers') ? {} : await measureWorkers(syn, batchSize);
  const result: Record<string, unknown> = {
    corpus: 'synthetic',
    ...syn.stats,
    ...synR,
    ...synW,
  };
  if (!a.has('--skip-nfcorpus')) {
    log('NFCorpus');
    const nf = prepare(nfcorpus(seed, 2000), true);
    log(`  ${JSON.stringify(nf.stats)}`);
    const nfR = await measureRewards(nf, 20);
    const nfW = a.has('--skip-workers') ? {} : await measureWorkers(nf, batchSize);
    result.nfcorpus = { ...nf.stats, ...nfR, ...nfW };
  }
  if (json) process.stdout.write(JSON.stringify(result) + '\n');
  const rows: [string, unknown, unknown][] = [
    ['full recompute per reward (ms)', result.full_ms, (result.nfcorpus as Record<string, unknown>)?.full_ms],
    ['incremental per reward (µs)', result.incremental_us, (result.nfcorpus as Record<string, unknown>)?.incremental_us],
    ['query-index look-up only (µs)', result.lookup_us, (result.nfcorpus as Record<string, unknown>)?.lookup_us],
    ['queryView.match of the candidate (µs)', result.view_match_us, (result.nfcorpus as Record<string, unknown>)?.view_match_us],
    ['incremental vs full (×)', result.incremental_vs_full, (result.nfcorpus as Record<string, unknown>)?.incremental_vs_full],
    ['incremental / look-up (×)', result.incremental_vs_lookup, (result.nfcorpus as Record<string, unknown>)?.incremental_vs_lookup],
    [
      'item rewards/s, 1 thread in-process',
      result.item_rewards_per_second,
      (result.nfcorpus as Record<string, unknown>)?.item_rewards_per_second,
    ],
    [
      'item rewards/s, pool of 1 worker',
      result.item_rewards_per_second_workers1,
      (result.nfcorpus as Record<string, unknown>)?.item_rewards_per_second_workers1,
    ],
    [
      'item rewards/s, pool of 2 workers',
      result.item_rewards_per_second_workers2,
      (result.nfcorpus as Record<string, unknown>)?.item_rewards_per_second_workers2,
    ],
    ['2 workers vs 1, wall clock (×)', result.workers2_vs_1, (result.nfcorpus as Record<string, unknown>)?.workers2_vs_1],
    [
      'CPU cores used, 1 / 2 workers',
      `${result.cpu_cores_used_workers1} / ${result.cpu_cores_used_workers2}`,
      `${(result.nfcorpus as Record<string, unknown>)?.cpu_cores_used_workers1} / ${(result.nfcorpus as Record<string, unknown>)?.cpu_cores_used_workers2}`,
    ],
  ];
  // With --json the table goes to stderr (log), stdout keeps the one JSON object.
  log('');
  log(`| measure | synthetic (${result.items} items, ${result.queries} queries) | NFCorpus |`);
  log('|---|---:|---:|');
  for (const [k, a, b] of rows) log(`| ${k} | ${a ?? '–'} | ${b ?? '–'} |`);
}
