/**
 * HTTP load test of `cogr serve` on loopback (autocannon), against a minimal raw-text
 * BM25 endpoint built on wink-bm25-text-search over the same items, in the same process;
 * then a mixed workload against a real `cogr serve` process.
 *
 *   npm run bench -- serve [--json] [--duration 30] [--connections 64] [--k 10]
 *                          [--generator embedded|none] [--mixed-duration 10]
 *
 * Setup: NFCorpus (3,162 items). The item generation is each item's 10 best TF-IDF
 * unigrams/bigrams, committed to a temp LevelDB through KeywordIndexStore; a query planner
 * (its relevance model fitted on NFCorpus's judged queries, α tuned on them against that
 * index) is saved as the round-0 planner. The first part serves it with
 * `buildSearchServer` and the keyword source `cogr serve` uses (the planner in keyword
 * worker threads, item index attached, greedy, behind the server's cache), or the raw
 * query only with `--generator none`. Requests cycle through
 * data/nfcorpus/q-titles.queries. Each target gets a 2 s warm-up first (JIT and the
 * keyword cache). `errors` counts connection errors, time-outs and non-2xx answers.
 * autocannon runs in this same process, so both targets share the 2 cores with it.
 *
 * Mixed workload (`mixed` in the JSON): `cogr serve` in its own process on the same
 * database; 4 clients each send, one after the other, a POST /v1/search whose program is
 * an `or` of 64 `text` nodes (about 27 KB, every text new, so each needs keyword
 * generation), while autocannon sends cached GETs: `GET /health` and `GET /v1/search` over
 * 50 queries whose keywords are cached (4 connections each). Reported: p50/p99 of the two
 * GETs, and the programs answered.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { withDb } from '../index/store/db.ts';
import { KeywordIndexStore } from '../index/store/store.ts';
import type { Item } from '../index/core/types.ts';
import { KeywordPlanner } from '../generators/planner/planner.ts';
import { RelevanceModel } from '../generators/planner/relevance.ts';
import { relevantOrdinals } from '../generators/sft.ts';
import { Bm25Index, itemText, tokenize } from '../src/baseline/bm25.ts';
import { loadDataset } from '../src/datasets/index.ts';
import { buildSearchServer } from '../src/server/app.ts';
import { LiveSnapshot } from '../src/server/state.ts';
import { storeSnapshotLoader } from '../src/server/storeLoader.ts';
import { keywordSourceFactory } from '../src/server/keywordSources.ts';
import { KeywordWorkerPool } from '../src/server/keywordPool.ts';
import { policyStore, savePlanner } from '../src/run/policies.ts';
import { silentLogger } from '../index/core/log.ts';
import { spawn } from 'node:child_process';
import { packageRoot } from '../index/core/paths.ts';
import { renderTable } from '../src/table.ts';
import { parseBenchArgs } from './args.ts';
import { nfcorpusTitleQueries } from './fixtures.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';

interface Histo {
  average: number;
  p50: number;
  p99: number;
  [k: string]: number;
}
interface AutocannonResult {
  requests: Histo & { total: number; sent: number };
  latency: Histo;
  errors: number;
  timeouts: number;
  non2xx: number;
  duration: number;
}
interface AutocannonRequest {
  method?: string;
  path?: string;
  setupRequest?: (req: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  requests: AutocannonRequest[];
}) => Promise<AutocannonResult>;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** Each item's `m` best TF-IDF unigrams and bigrams (stop words removed). */
export function tfidfKeywords(items: readonly Item[], m = 10): string[][] {
  const grams = items.map((it) => {
    const toks = tokenize(itemText(it)).filter((t) => t.length > 1 && !/^\d+$/.test(t));
    const tf = new Map<string, number>();
    for (let i = 0; i < toks.length; i++) {
      tf.set(toks[i], (tf.get(toks[i]) ?? 0) + 1);
      if (i + 1 < toks.length) {
        const bg = `${toks[i]} ${toks[i + 1]}`;
        tf.set(bg, (tf.get(bg) ?? 0) + 1);
      }
    }
    return tf;
  });
  const df = new Map<string, number>();
  for (const tf of grams) for (const g of tf.keys()) df.set(g, (df.get(g) ?? 0) + 1);
  const n = items.length;
  return grams.map((tf) =>
    [...tf]
      .filter(([g]) => !g.includes(' ') || (df.get(g) ?? 0) >= 2)
      .map(([g, c]) => [g, c * Math.log(n / (df.get(g) ?? 1))] as const)
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, m)
      .map(([g]) => g),
  );
}

function winkServer(items: readonly Item[], maxK: number): FastifyInstance {
  const index = new Bm25Index(items);
  const app = Fastify({ logger: false });
  app.get('/search', async (req, reply) => {
    const q = (req.query as Record<string, unknown>).q;
    const k = Number((req.query as Record<string, unknown>).k ?? 10);
    if (typeof q !== 'string' || q.length === 0 || !Number.isInteger(k) || k < 1 || k > maxK)
      return reply.code(400).send({ error: 'bad parameters' });
    return { query: q, items: index.search(q, k) };
  });
  return app;
}

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return `http://127.0.0.1:${addr.port}`;
}

async function load(
  base: string,
  pathOf: (q: string) => string,
  queries: readonly string[],
  connections: number,
  duration: number,
): Promise<AutocannonResult> {
  let next = 0;
  return autocannon({
    url: base,
    connections,
    duration,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => ({ ...req, path: pathOf(queries[next++ % queries.length]) }),
      },
    ],
  });
}

function summary(r: AutocannonResult) {
  return {
    errors: r.errors + r.timeouts + r.non2xx,
    requests_per_second: r.requests.average,
    p50_ms: r.latency.p50,
    p99_ms: r.latency.p99,
    total_requests: r.requests.total,
    connection_errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
  };
}

export async function run(args: string[]): Promise<void> {
  const a = parseBenchArgs(args);
  const json = a.has('--json');
  const duration = a.number('--duration', 30, { min: 1 });
  const connections = a.number('--connections', 64, { min: 1, integer: true });
  const k = a.number('--k', 10, { min: 1, integer: true });
  const generator = a.string('--generator', 'embedded');
  if (generator !== 'embedded' && generator !== 'none') throw new Error('--generator: expected embedded or none');

  const { corpus } = await loadDataset('nfcorpus');
  const queries = nfcorpusTitleQueries()
    .map((q) => q.text.trim())
    .filter((t) => t.length > 0);
  const kws = tfidfKeywords(corpus.items);
  const mixedDuration = a.number('--mixed-duration', 10, { min: 1 });
  const dir = mkdtempSync(join(tmpdir(), 'cogr-bench-serve-'));
  const servers: FastifyInstance[] = [];
  const pools: KeywordWorkerPool[] = [];
  try {
    const dbPath = join(dir, 'db');
    await withDb(dbPath, async (db) => {
      const w = new KeywordIndexStore(db).writer('item', { mode: 'replace' });
      corpus.items.forEach((it, i) => w.set(it.id, it.title, kws[i]));
      const generation = await w.commit({ round: 0, label: 'tf-idf top 10 (bench)' });
      const judged = corpus.queries.filter((q) => (corpus.relevant.get(q.id)?.size ?? 0) > 0);
      const relevance = RelevanceModel.fit(
        corpus.items,
        judged.map((q) => [{ id: q.id, text: q.text }, [...corpus.relevant.get(q.id)!]] as const),
      );
      const planner = new KeywordPlanner(relevance);
      const view = await new KeywordIndexStore(db).openView('item', generation);
      planner.attachOpposite(view);
      const rel = relevantOrdinals(view, corpus.relevant);
      planner.tuneAlpha(
        judged.map((q) => ({ id: q.id, text: q.text })),
        (id) => rel.get(id) ?? new Set<number>(),
      );
      await savePlanner(policyStore(db), 0, planner);
    });
    const pool = new KeywordWorkerPool({ logger: silentLogger });
    pools.push(pool);
    const live = new LiveSnapshot(
      storeSnapshotLoader({
        dbPath,
        round: 'latest',
        corpus,
        keywordSource: keywordSourceFactory(
          generator,
          () => {
            throw new Error('the serve benchmark runs no LLM endpoint');
          },
          silentLogger,
          () => pool,
        ),
      }),
    );
    await live.reload();
    const ours = buildSearchServer({ live, limits: { keywordBudgetMs: 2000 } });
    const wink = winkServer(corpus.items, 1000);
    servers.push(ours, wink);
    const oursUrl = await listen(ours);
    const winkUrl = await listen(wink);
    const oursPath = (q: string) => `/v1/search?q=${encodeURIComponent(q)}&k=${k}`;
    const winkPath = (q: string) => `/search?q=${encodeURIComponent(q)}&k=${k}`;

    await load(oursUrl, oursPath, queries, connections, 2);
    const mine = summary(await load(oursUrl, oursPath, queries, connections, duration));
    await load(winkUrl, winkPath, queries, connections, 2);
    const peer = summary(await load(winkUrl, winkPath, queries, connections, duration));
    const metrics = await (await fetch(`${oursUrl}/metrics`)).text();
    const fallbacks = [...metrics.matchAll(/^cogr_query_keyword_fallbacks_total\{reason="([^"]+)"\} (\d+)/gm)].map((m) => [
      m[1],
      Number(m[2]),
    ]);
    for (const s of servers.splice(0)) await s.close();
    for (const p of pools.splice(0)) await p.close();
    const mixed = await mixedWorkload(dbPath, corpus.items, queries, mixedDuration);
    const out = {
      bench: 'serve',
      dataset: 'nfcorpus',
      items: corpus.items.length,
      queries: queries.length,
      connections,
      duration_s: duration,
      k,
      generator,
      ...mine,
      keyword_fallbacks: Object.fromEntries(fallbacks),
      wink: peer,
      rps_ratio_vs_wink: peer.requests_per_second > 0 ? mine.requests_per_second / peer.requests_per_second : null,
      mixed,
      node: process.version,
    };
    if (json) {
      process.stdout.write(JSON.stringify(out) + '\n');
    } else {
      process.stdout.write(`NFCorpus, ${connections} connections × ${duration} s, k=${k}, query keywords: ${generator}\n`);
      process.stdout.write(
        renderTable(
          ['target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'requests'],
          [
            [
              'cogr serve GET /v1/search',
              mine.requests_per_second.toFixed(0),
              String(mine.p50_ms),
              String(mine.p99_ms),
              String(mine.errors),
              String(mine.total_requests),
            ],
            [
              'wink-bm25 raw text',
              peer.requests_per_second.toFixed(0),
              String(peer.p50_ms),
              String(peer.p99_ms),
              String(peer.errors),
              String(peer.total_requests),
            ],
          ],
          { rule: false },
        ),
      );
      process.stdout.write(
        `throughput ratio cogr / wink: ${out.rps_ratio_vs_wink?.toFixed(2)}; keyword fallbacks: ${JSON.stringify(out.keyword_fallbacks)}\n`,
      );
      process.stdout.write(
        `\nmixed workload, cogr serve process, ${mixedDuration} s: 4 clients sending 64-text programs beside cached GETs\n`,
      );
      process.stdout.write(
        renderTable(
          ['GET', 'req/s', 'p50 ms', 'p99 ms', 'errors'],
          [
            [
              '/health',
              mixed.health.requests_per_second.toFixed(0),
              String(mixed.health.p50_ms),
              String(mixed.health.p99_ms),
              String(mixed.health.errors),
            ],
            [
              '/v1/search (cached)',
              mixed.search.requests_per_second.toFixed(0),
              String(mixed.search.p50_ms),
              String(mixed.search.p99_ms),
              String(mixed.search.errors),
            ],
          ],
          { rule: false },
        ),
      );
      process.stdout.write(
        `programs: ${mixed.programs.answered} answered (${mixed.programs.failed} failed), ${mixed.programs.bytes} bytes each, mean ${mixed.programs.mean_ms.toFixed(0)} ms; keyword fallbacks: ${JSON.stringify(mixed.keyword_fallbacks)}\n`,
      );
    }
  } finally {
    for (const s of servers) await s.close();
    for (const p of pools) await p.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** 64 new texts of about 400 characters for program number `p` (slices of item texts). */
function programTexts(items: readonly Item[], p: number): string[] {
  const out: string[] = [];
  for (let j = 0; j < 64; j++) {
    const n = p * 64 + j;
    const it = items[n % items.length];
    const text = `${it.title} ${it.text}`;
    const start = (Math.floor(n / items.length) * 97) % Math.max(1, text.length - 420);
    out.push(`${n} ${text.slice(start, start + 410)}`.slice(0, 500));
  }
  return out;
}

async function mixedWorkload(dbPath: string, items: readonly Item[], queries: readonly string[], duration: number) {
  const bin = join(packageRoot(), 'bin', 'cogr.mjs');
  const child = spawn(process.execPath, [bin, 'serve', '--db', dbPath, '--port', '0', '--dataset', 'nfcorpus'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (d) => (log += String(d)));
  try {
    const base = await new Promise<string>((resolve, reject) => {
      const t = setInterval(() => {
        const m = /listening address=(http:\/\/[^ \n]+)/.exec(log);
        if (m) {
          clearInterval(t);
          resolve(m[1]);
        } else if (child.exitCode !== null) {
          clearInterval(t);
          reject(new Error(`cogr serve failed: ${log}`));
        }
      }, 20);
    });
    // The cached GETs: 50 queries whose keywords are generated once now.
    const cached = queries.slice(0, 50);
    for (const q of cached) await fetch(`${base}/v1/search?q=${encodeURIComponent(q)}&k=10`);
    let stop = false;
    let p = 0;
    const programs = { answered: 0, failed: 0, bytes: 0, totalMs: 0 };
    const heavy = async () => {
      while (!stop) {
        const body = JSON.stringify({ program: { or: programTexts(items, p++).map((text) => ({ text })) }, k: 10 });
        programs.bytes = Buffer.byteLength(body);
        const t0 = performance.now();
        const r = await fetch(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await r.arrayBuffer();
        programs.totalMs += performance.now() - t0;
        if (r.status === 200) programs.answered++;
        else programs.failed++;
      }
    };
    const clients = Array.from({ length: 4 }, heavy);
    // Let the programs fill the queue before measuring.
    await new Promise((r) => setTimeout(r, 1000));
    const [health, search] = await Promise.all([
      autocannon({ url: base, connections: 4, duration, requests: [{ method: 'GET', path: '/health' }] }),
      load(base, (q) => `/v1/search?q=${encodeURIComponent(q)}&k=10`, cached, 4, duration),
    ]);
    stop = true;
    await Promise.all(clients);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    const fallbacks = [...metrics.matchAll(/^cogr_query_keyword_fallbacks_total\{reason="([^"]+)"\} (\d+)/gm)].map((m) => [
      m[1],
      Number(m[2]),
    ]);
    return {
      duration_s: duration,
      heavy_clients: 4,
      health: summary(health),
      search: summary(search),
      programs: {
        answered: programs.answered,
        failed: programs.failed,
        bytes: programs.bytes,
        mean_ms: programs.totalMs / Math.max(1, programs.answered + programs.failed),
      },
      keyword_fallbacks: Object.fromEntries(fallbacks),
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}
