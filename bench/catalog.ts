/**
 * `npm run bench -- catalog [--db DIR] [--seconds 40] [--ones 20] [--hundreds 5] [--big 10000] [--out FILE] [--json]`
 *
 * Catalog writes on a served NFCorpus run, with tinybench, all in this one process as
 * `cogr serve --writable` runs them: the search server on loopback (memory engine, the
 * run's query planner in keyword worker threads), the catalog writer in its worker thread
 * holding the LevelDB. The run is `--db` (a `cogr demo` database, copied first so it is left
 * as it was), else a new `cogr demo --dataset nfcorpus` made for the bench (about 90 s).
 *
 * - search alone: `GET /v1/search?q=…&k=10` cycling through NFCorpus's title queries, one
 *   request at a time, for `--seconds` (their keywords cached by a pass before, as a served
 *   engine has them);
 * - search while writes stream: the same, while another client writes one item at a time
 *   without pause (`PUT /v1/items/{id}` of an NFCorpus document under a new id, then its
 *   `DELETE`: the catalog's size stays); reported: p50 and p99 of both and their ratios, and
 *   the writes per second the stream made (`--seconds` is longer than the planner's refresh
 *   deadline, so the stream's items reach the planner's relevance model once within it);
 * - items written per second in batches of 1 (`--ones` PUTs one after another), 100
 *   (`--hundreds` batches through POST /v1/items/batch) and `--big` (one batch): a write is
 *   timed from its request to its acknowledgement, which comes once the new generation is
 *   served, so every item counted had its keywords generated (the round's item policy),
 *   was committed and is searchable. After each single write a search for the item's first
 *   keyword must return it (`visibleOnAck`); the single-written items are then deleted in one
 *   batch and none may be returned again by its keywords or title (`deletedNeverFound`).
 * `--out` writes the JSON result (bench/results/catalog.json in the repository).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bench } from 'tinybench';
import { packageRoot } from '../index/core/paths.ts';
import { silentLogger } from '../index/core/log.ts';
import type { Item } from '../index/core/types.ts';
import { llmOptionsFromEnv } from '../generators/llm.ts';
import { loadRunCorpus } from '../src/run/corpus.ts';
import { readRunAt } from '../src/run/state.ts';
import { buildSearchServer } from '../src/server/app.ts';
import { CatalogThread } from '../src/server/catalogThread.ts';
import { KeywordWorkerPool } from '../src/server/keywordPool.ts';
import { keywordSourceFactory } from '../src/server/keywordSources.ts';
import { LiveSnapshot } from '../src/server/state.ts';
import { storeSnapshotLoader } from '../src/server/storeLoader.ts';
import { renderTable } from '../src/table.ts';
import { parseBenchArgs } from './args.ts';
import { nfcorpusTitleQueries, round } from './fixtures.ts';
import { writeResultJson } from './writeJson.ts';

const TOKEN = 'bench';

interface Stats {
  samples: number;
  mean: number;
  p50: number;
  p99: number;
}

function stats(bench: Bench, name: string): Stats {
  const t = bench.tasks.find((x) => x.name === name);
  const r = t?.result as { latency?: { mean: number; p50: number; p99: number; samplesCount?: number }; error?: unknown } | undefined;
  if (!r?.latency) throw new Error(`benchmark task ${name} did not complete: ${String(r?.error)}`);
  const l = r.latency;
  return { samples: l.samplesCount ?? 0, mean: round(l.mean, 3), p50: round(l.p50, 3), p99: round(l.p99, 3) };
}

async function call(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(30 * 60_000),
  });
  const out = (await res.json()) as any;
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out).slice(0, 500)}`);
  return out;
}

/** The ids of a search's served set. */
async function servedIds(base: string, q: string): Promise<Set<string>> {
  const r = await call(base, 'GET', `/v1/search?q=${encodeURIComponent(q)}&k=1000`);
  return new Set((r.items as { id: string }[]).slice(0, r.matched).map((h) => h.id));
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  // Longer than the planner's refresh deadline (30 s): a stream that never pauses gets one refresh within it.
  const seconds = a.number('--seconds', 40, { min: 1 });
  const ones = a.number('--ones', 20, { min: 1, integer: true });
  const hundreds = a.number('--hundreds', 5, { min: 1, integer: true });
  const big = a.number('--big', 10_000, { min: 1, integer: true });
  const out = a.string('--out', '');
  const work = mkdtempSync(join(tmpdir(), 'cogr-bench-catalog-'));
  const db = join(work, 'db');
  const given = a.string('--db', '');
  if (given) cpSync(given, db, { recursive: true });
  else {
    process.stderr.write('making a served NFCorpus run: cogr demo --dataset nfcorpus (about 90 s)\n');
    const r = spawnSync(
      process.execPath,
      [join(packageRoot(), 'bin/cogr.mjs'), 'demo', '--dataset', 'nfcorpus', '--embeddings', 'none', '--db', db, '--quiet'],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, COGR_HOME: join(work, 'home') },
      },
    );
    if (r.status !== 0) throw new Error('cogr demo failed');
  }
  const stored = await readRunAt(db);
  if (!stored) throw new Error(`${db} holds no co-evolution run`);
  const { corpus } = await loadRunCorpus(stored.config, silentLogger);
  const pool = new KeywordWorkerPool({ logger: silentLogger });
  const catalog = await CatalogThread.start(
    { dbPath: db, round: 'best', itemGenerator: 'embedded', llm: llmOptionsFromEnv({}) },
    silentLogger,
  );
  const live = new LiveSnapshot(
    storeSnapshotLoader({
      dbPath: db,
      round: 'best',
      corpus,
      keywordSource: keywordSourceFactory(
        'embedded',
        () => ({}) as never,
        silentLogger,
        () => pool,
      ),
    }),
  );
  await live.reload();
  const app = buildSearchServer({ live, token: TOKEN, catalog, limits: { bodyLimit: 64 * 1024 * 1024, keywordBudgetMs: 5_000 } });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const queries = nfcorpusTitleQueries().map((q) => q.text);
  const docs = corpus.items;
  let next = 0;
  const newItem = (): Item & { id: string } => {
    const d = docs[next % docs.length];
    return { id: `BENCH-${next++}`, title: d.title, text: d.text };
  };
  const loadBefore = loadavg()[0];
  try {
    // Keywords of every query cached (as a served engine has them), the item policy loaded in the writer thread.
    for (const q of queries) await call(base, 'GET', `/v1/search?q=${encodeURIComponent(q)}&k=10`);
    const warm = newItem();
    await call(base, 'PUT', `/v1/items/${warm.id}`, { title: warm.title, text: warm.text });
    await call(base, 'DELETE', `/v1/items/${warm.id}`);
    // The planner's refresh over those writes' texts done before timing starts (it comes once writes pause).
    while (live.get().catalog?.plannerStale) await new Promise((r) => setTimeout(r, 200));

    let qi = 0;
    const search = async () => {
      await call(base, 'GET', `/v1/search?q=${encodeURIComponent(queries[qi++ % queries.length])}&k=10`);
    };
    const alone = new Bench({ time: seconds * 1000, warmupTime: 1000, retainSamples: true });
    alone.add('search alone', search);
    await alone.run();

    // The write stream: PUT a new item, DELETE it, again, until stopped.
    let streaming = true;
    let streamWrites = 0;
    const stream = (async () => {
      while (streaming) {
        const it = newItem();
        await call(base, 'PUT', `/v1/items/${it.id}`, { title: it.title, text: it.text });
        await call(base, 'DELETE', `/v1/items/${it.id}`);
        streamWrites += 2;
      }
    })();
    const during = new Bench({ time: seconds * 1000, warmupTime: 1000, retainSamples: true });
    during.add('search while writes stream', search);
    const t0 = performance.now();
    await during.run();
    const streamSeconds = (performance.now() - t0) / 1000;
    streaming = false;
    await stream;

    // Throughput: batches of 1, 100 and --big, each acknowledged once served.
    const single: string[] = [];
    const firstKeyword = new Map<string, string>();
    let visible = 0;
    const writes = new Bench({ time: 0, warmup: false, iterations: ones, retainSamples: true });
    writes.add('batch of 1', async () => {
      const it = newItem();
      const r = await call(base, 'PUT', `/v1/items/${it.id}`, { title: it.title, text: it.text });
      single.push(it.id);
      firstKeyword.set(it.id, r.items[0].keywords[0] ?? it.title);
    });
    await writes.run();
    for (const id of single) if ((await servedIds(base, firstKeyword.get(id)!)).has(id)) visible++;
    const batchOf = (n: number) => async () => {
      const ops = Array.from({ length: n }, () => {
        const it = newItem();
        return { op: 'add', id: it.id, title: it.title, text: it.text };
      });
      await call(base, 'POST', '/v1/items/batch', { ops });
    };
    const hundred = new Bench({ time: 0, warmup: false, iterations: hundreds, retainSamples: true });
    hundred.add('batch of 100', batchOf(100));
    await hundred.run();
    const large = new Bench({ time: 0, warmup: false, iterations: 1, retainSamples: true });
    large.add(`batch of ${big}`, batchOf(big));
    await large.run();

    // Deleted in one batch: none is found again by its keywords or its title.
    await call(base, 'POST', '/v1/items/batch', { ops: single.map((id) => ({ op: 'delete', id })) });
    let foundAgain = 0;
    for (const id of single) {
      const it = docs[Number(id.slice(6)) % docs.length];
      if ((await servedIds(base, firstKeyword.get(id)!)).has(id) || (await servedIds(base, it.title)).has(id)) foundAgain++;
    }

    const s1 = stats(writes, 'batch of 1');
    const s100 = stats(hundred, 'batch of 100');
    const sBig = stats(large, `batch of ${big}`);
    const sa = stats(alone, 'search alone');
    const sd = stats(during, 'search while writes stream');
    const result = {
      command: `npm run bench -- catalog${given ? ' --db <a cogr demo --dataset nfcorpus database>' : ''} --seconds ${seconds} --ones ${ones} --hundreds ${hundreds} --big ${big}`,
      dataset: stored.config.dataset,
      items: docs.length,
      queries: queries.length,
      machine: { cpus: cpus().length, loadAverage1mAtStart: round(loadBefore, 2), loadAverage1mAtEnd: round(loadavg()[0], 2) },
      writes: {
        batch1: { batches: ones, msPerBatch: s1.mean, p50: s1.p50, p99: s1.p99, itemsPerSecond: round(1000 / s1.mean, 2) },
        batch100: { batches: hundreds, msPerBatch: s100.mean, itemsPerSecond: round((100 * 1000) / s100.mean, 1) },
        [`batch${big}`]: { batches: 1, msPerBatch: sBig.mean, itemsPerSecond: round((big * 1000) / sBig.mean, 1) },
      },
      visibleOnAck: { checked: single.length, found: visible },
      deletedNeverFound: { checked: single.length, foundAgain },
      search: {
        alone: sa,
        duringWrites: { ...sd, writesPerSecond: round(streamWrites / streamSeconds, 2) },
        p50Ratio: round(sd.p50 / sa.p50, 2),
        p99Ratio: round(sd.p99 / sa.p99, 2),
      },
    };
    if (out) await writeResultJson(out, result);
    if (json) process.stdout.write(JSON.stringify(result) + '\n');
    else {
      process.stdout.write(
        renderTable(
          ['workload', 'mean ms', 'p50 ms', 'p99 ms', 'items/s'],
          [
            ['write, batch of 1', s1.mean, s1.p50, s1.p99, result.writes.batch1.itemsPerSecond],
            ['write, batch of 100', s100.mean, '', '', result.writes.batch100.itemsPerSecond],
            [`write, batch of ${big}`, sBig.mean, '', '', (big * 1000) / sBig.mean],
            ['search alone', sa.mean, sa.p50, sa.p99, ''],
            ['search while writes stream', sd.mean, sd.p50, sd.p99, ''],
          ].map((r) => r.map((c) => (typeof c === 'number' ? String(round(c, 2)) : c))),
        ) +
          `\nsearch p99 during writes / alone: ${result.search.p99Ratio} (p50 ${result.search.p50Ratio}); the stream wrote ${result.search.duringWrites.writesPerSecond} writes/s\n` +
          `visible on acknowledgement: ${visible}/${single.length}; deleted and found again: ${foundAgain}/${single.length}\n`,
      );
    }
  } finally {
    await app.close();
    await catalog.close();
    await pool.close();
    rmSync(work, { recursive: true, force: true });
  }
}
