/**
 * The served ranking over HTTP: `cogr serve`'s search path with the run's query planner in
 * real keyword workers orders the served set by the run's ranker (or `--rank`), the same
 * order and scores as the evaluation computes in process (generators/planner/ranking.ts);
 * `keywords` keeps keyword-bag BM25.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { loadPlanner, policyStore } from '../../src/run/policies.ts';
import { readStoredRun } from '../../src/run/state.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import { KeywordWorkerPool } from '../../src/server/keywordPool.ts';
import { keywordSourceFactory } from '../../src/server/keywordSources.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { servedList, servedSet } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';
import { OpenSearchNodes } from '../../src/opensearch/client.ts';
import { openSearchBackend } from '../../src/opensearch/backend.ts';
import { silentLogger } from '../../index/core/log.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { tempDir } from './_serverFixture.ts';

const corpus = synthCorpus();
let tmp: ReturnType<typeof tempDir>;
let dbPath: string;
const pool = new KeywordWorkerPool({ size: 1 });
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  tmp = tempDir('cogr-ranking-');
  dbPath = join(tmp.dir, 'db');
  const db = await openDb(dbPath);
  try {
    await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, rounds: 0 });
  } finally {
    await db.close();
  }
});
afterAll(async () => {
  for (const c of closers) await c();
  await pool.close();
  tmp.cleanup();
});

async function serve(rank: Ranker | 'auto'): Promise<string> {
  const keywordSource = keywordSourceFactory(
    'embedded',
    () => ({}) as never,
    silentLogger,
    () => pool,
  );
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'best', corpus, keywordSource, rank }));
  await live.reload();
  const app = buildSearchServer({ live, limits: { keywordBudgetMs: 60_000 } });
  closers.push(() => app.close());
  return app.listen({ host: '127.0.0.1', port: 0 });
}

/** The in-process expectation: the round-0 planner on the served item view, its plan, served set and ranking. */
async function expected(text: string, ranker: Ranker, k: number) {
  const db = await openDb(dbPath);
  try {
    const planner = await loadPlanner(policyStore(db), 0, corpus.items);
    const view = await new KeywordIndexStore(db).openView('item', 0);
    planner.attachOpposite(view);
    const input = { id: 'http', text };
    const keywords = planner.plan(input).keywords;
    const floor = (await readStoredRun(db)).steps[0].floor!;
    const served = servedSet(view, view.search({ self: text, keywords }, { all: true }).items, planner, input, floor);
    // The served list: the served set in the ranker's order, then the run's backfill (the other items in the same order).
    return servedList(served.items, ranker, planner, input, view, floor.backfill ?? 0).slice(0, k);
  } finally {
    await db.close();
  }
}

describe('GET /v1/search orders the served set by the ranker', () => {
  const text = corpus.queries[3].text;
  it('model: p(item | query) from the planner in the keyword workers, as the evaluation ranks it', async () => {
    const base = await serve('model');
    const r = (await (await fetch(`${base}/v1/search?q=${encodeURIComponent(text)}&k=5&explain=true`)).json()) as any;
    expect(r.ranking).toMatchObject({ ranker: 'model', chosen: 'flag' });
    const want = await expected(text, 'model', 5);
    expect(want.length).toBeGreaterThan(1);
    expect(r.items.map((h: any) => h.id)).toEqual(want.map((x) => x.id));
    r.items.forEach((h: any, i: number) => expect(h.score).toBeCloseTo(want[i].score, 12));
    expect(r.items[0].explain.ranking.ranker).toBe('model');
    // The run's backfill: after the served set's `matched` items come the other items by p, scored p − 2.
    expect(r.ranking.backfill).toBe(1000);
    expect(r.matched).toBeLessThan(5);
    expect(r.items.length).toBe(5);
    r.items.forEach((h: any, i: number) => expect(h.score < -1).toBe(i >= r.matched));
    const scores = r.items.map((h: any) => h.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    // A second request is answered from the ranking cache: the same items and scores.
    const again = (await (await fetch(`${base}/v1/search?q=${encodeURIComponent(text)}&k=5`)).json()) as any;
    expect(again.items).toEqual(
      r.items.map((h: any) => ({ id: h.id, score: h.score, ...(h.title !== undefined ? { title: h.title } : {}) })),
    );
    expect(again.ranking).toEqual(r.ranking);
  });
  it("auto serves the run's choice at SFT; keywords keeps keyword-bag BM25 of the matched set", async () => {
    const db = await openDb(dbPath);
    const chosen = (await readStoredRun(db)).steps[0].rank!.served;
    await db.close();
    const auto = (await (await fetch(`${await serve('auto')}/v1/search?q=${encodeURIComponent(text)}&k=5`)).json()) as any;
    expect(auto.ranking).toMatchObject({ ranker: chosen, chosen: 'run' });
    const kw = (await (await fetch(`${await serve('keywords')}/v1/search?q=${encodeURIComponent(text)}&k=5`)).json()) as any;
    const want = await expected(text, 'keywords', 5);
    expect(kw.ranking.ranker).toBe('keywords');
    expect(kw.items.map((h: any) => h.id)).toEqual(want.map((x) => x.id));
  });
});

describe('the OpenSearch backend and the empty-plan floor (fake cluster on loopback)', () => {
  it("a plan the cluster matches nothing for gets the run's floor (top c by p, the run's ranker), flagged empty_plan", async () => {
    const db = await openDb(dbPath);
    const run = await readStoredRun(db);
    await db.close();
    const floor = run.steps[0].floor!;
    expect(floor.fallback).toBeGreaterThan(0);
    const ranker = run.steps[0].rank!.served;
    const searches: unknown[] = [];
    const cluster = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        if (req.url === '/_alias/shop') return res.end(JSON.stringify({ 'shop-1': { aliases: { shop: {} } } }));
        if (req.url === '/shop-1/_mapping') {
          const meta = {
            format: 'cogr-opensearch-index',
            generation: 0,
            analyzer: 'english',
            k1: 1.2,
            b: 0.75,
            items: corpus.items.length,
          };
          return res.end(JSON.stringify({ 'shop-1': { mappings: { _meta: { cogr: meta } } } }));
        }
        if (req.url?.startsWith('/shop/_search')) {
          searches.push(JSON.parse(body));
          return res.end(
            JSON.stringify({ _shards: { total: 1, successful: 1, failed: 0 }, hits: { total: { value: 0, relation: 'eq' }, hits: [] } }),
          );
        }
        res.statusCode = 404;
        res.end('{}');
      });
    });
    await new Promise<void>((r) => cluster.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => cluster.close(r)));
    // The embedded planner ranks; its keywords are replaced by one that no item carries, so the plan matches nothing here either.
    const embedded = keywordSourceFactory(
      'embedded',
      () => ({}) as never,
      silentLogger,
      () => pool,
    );
    const keywordSource = async (c: Parameters<typeof embedded>[0]) => {
      const src = (await embedded(c))!;
      return { name: 'unmatched', keywords: async () => ['zzqx nowhere'], rank: src.rank!.bind(src) };
    };
    const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'best', corpus, keywordSource }));
    await live.reload();
    const url = `http://127.0.0.1:${(cluster.address() as AddressInfo).port}`;
    const backend = await openSearchBackend(new OpenSearchNodes([url], { timeoutMs: 5_000 }), 'shop', silentLogger);
    const app = buildSearchServer({ live, backend, limits: { keywordBudgetMs: 60_000 } });
    closers.push(() => app.close());
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    const text = corpus.queries[5].text;
    const r = (await (
      await fetch(`${base}/v1/search?q=${encodeURIComponent(text)}&k=5`, { signal: AbortSignal.timeout(30_000) })
    ).json()) as any;
    expect(searches.length).toBe(1);
    expect(r.ranking).toMatchObject({ ranker, fallback: 'empty_plan' });
    expect(r.ranking.chosen).toMatch(/^opensearch \(empty-plan floor: /);
    expect(r.matched).toBe(Math.min(floor.fallback, corpus.items.length));
    // What cogr serve serves for the same empty plan: the top c by p in the ranker's order, then the backfill.
    const db2 = await openDb(dbPath);
    try {
      const planner = await loadPlanner(policyStore(db2), 0, corpus.items);
      const view = await new KeywordIndexStore(db2).openView('item', 0);
      planner.attachOpposite(view);
      const input = { id: 'http', text };
      const set = servedSet(view, [], planner, input, floor);
      expect(set.fallback).toBe('empty_plan');
      const want = servedList(set.items, ranker, planner, input, view, floor.backfill ?? 0).slice(0, 5);
      expect(r.items.map((h: any) => h.id)).toEqual(want.map((x) => x.id));
      r.items.forEach((h: any, i: number) => expect(h.score).toBeCloseTo(want[i].score, 12));
    } finally {
      await db2.close();
    }
  });
});
