/**
 * A run fitted with dense relevance features (`embeddingsModel`, vectors from a fake
 * OpenAI-style embeddings server on loopback) served through real keyword workers: the
 * served query's vector is fetched from the same endpoint and the served order equals the
 * in-process evaluation's; a serve without --embeddings, or against an endpoint serving
 * another model, is refused naming the model; a resume with another model is refused.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { silentLogger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { DenseVectors, RelevanceModel, denseVectorsOf, registerDenseVectors } from '../../generators/planner/relevance.ts';
import { servedList, servedSet } from '../../generators/planner/ranking.ts';
import { EmbeddingsClient } from '../../src/embeddings/client.ts';
import { denseItemText, embedCorpus } from '../../src/embeddings/dense.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { loadPlanner, policyStore } from '../../src/run/policies.ts';
import { readStoredRun } from '../../src/run/state.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import { KeywordWorkerPool } from '../../src/server/keywordPool.ts';
import { keywordSourceFactory } from '../../src/server/keywordSources.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { servingDense } from '../../src/commands/serve.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { tempDir } from './_serverFixture.ts';
import { hashedVector, startFakeEmbeddings, type FakeEmbeddings } from '../fixtures/fakeEmbeddings.ts';

const corpus = synthCorpus();
const FEATURES = { embeddingsModel: 'fake-embed', embeddingsFeatures: true };
let served: string[] = [];
let modelName = 'fake-embed';
let emb: FakeEmbeddings;
let url = '';
let tmp: ReturnType<typeof tempDir>;
let dbPath = '';
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  emb = await startFakeEmbeddings(
    () => modelName,
    (input) => served.push(...input),
  );
  url = emb.url;
  tmp = tempDir('cogr-served-dense-');
  dbPath = join(tmp.dir, 'db');
  const v = await embedCorpus(corpus, { client: new EmbeddingsClient({ baseURL: url }), cachePath: join(tmp.dir, 'cache') });
  const vectors = new DenseVectors(v.model, v.dim, v.items, v.queries);
  // The planner's keyword vectors (keywordCosine) as the endpoint computes them: this thread
  // serves the endpoint, so it cannot block on it as `cogr evolve` does (syncEmbedder.ts).
  vectors.setFetcher((texts) => texts.map((t) => Float32Array.from(hashedVector(t))));
  registerDenseVectors(vectors);
  const db = await openDb(dbPath);
  try {
    await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, rounds: 0, embeddingsModel: v.model, embeddingsFeatures: true });
  } finally {
    await db.close();
  }
}, 120_000);
afterAll(async () => {
  for (const c of closers) await c();
  await emb.close();
  tmp.cleanup();
});

describe('a run with dense relevance features', () => {
  it('embeds without the cache when another instance holds its database, saying so, and caches nothing there', async () => {
    const cache = join(tmp.dir, 'cache');
    const client = () => new EmbeddingsClient({ baseURL: url });
    const first = await embedCorpus(corpus, { client: client(), cachePath: cache });
    const holder = await openDb(cache);
    const warned: string[] = [];
    const log = { ...silentLogger, warn: (m: string) => void warned.push(m) };
    const before = served.length;
    let locked: Awaited<ReturnType<typeof embedCorpus>>;
    try {
      locked = await embedCorpus(corpus, { client: client(), cachePath: cache }, log);
    } finally {
      await holder.close();
    }
    expect(warned.join('\n')).toMatch(/the cache .*cache is in use by another process: every vector is asked of the endpoint/);
    // Every text asked of the endpoint again, and the same vectors as from the cache.
    expect(served.length - before).toBe(corpus.items.length + new Set(corpus.queries.map((q) => q.text)).size);
    for (const [id, v] of first.items) expect(Array.from(locked.items.get(id)!)).toEqual(Array.from(v));
  });

  it('records the embeddings model and fits the dense weights', async () => {
    const db = await openDb(dbPath);
    try {
      const run = await readStoredRun(db);
      expect(run.config.embeddingsModel).toBe('fake-embed');
      const planner = await loadPlanner(policyStore(db), 0, corpus.items);
      expect((planner.relevance as RelevanceModel).featureNames).toContain('cosNorm');
      // Each step's keyword audit gives its held-out keywords' cosines to their queries (the endpoint's model),
      // as cogr audit --embeddings does; the parts add up to the step's keywords.
      for (const s of run.steps) {
        const kw = s.metrics.keywords!;
        expect(kw.related, s.step).toBeDefined();
        expect(kw.related!.share).toBeGreaterThanOrEqual(0);
        expect(kw.related!.share).toBeLessThanOrEqual(1);
        expect(kw.related!.fromQuery!.keywords + kw.related!.added!.keywords).toBe(kw.keywords);
      }
    } finally {
      await db.close();
    }
  });

  it('is served with the query vector from the same endpoint, in the evaluation order', async () => {
    const dense = await servingDense({ embeddings: url, embeddingsCache: join(tmp.dir, 'cache') }, FEATURES, corpus, silentLogger);
    expect(dense).toBeDefined();
    const pool = new KeywordWorkerPool({ size: 1, dense: dense! });
    closers.push(() => pool.close());
    const keywordSource = keywordSourceFactory(
      'embedded',
      () => ({}) as never,
      silentLogger,
      () => pool,
    );
    const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'best', corpus, keywordSource, rank: 'model' }));
    await live.reload();
    const app = buildSearchServer({ live, limits: { keywordBudgetMs: 60_000 } });
    closers.push(() => app.close());
    const base = await app.listen({ host: '127.0.0.1', port: 0 });
    // A text no query of the corpus has: its vector can only come from the endpoint.
    const text = `${corpus.queries[5].text} ${corpus.queries[9].text.split(' ')[0]}`;
    served = [];
    const r = (await (await fetch(`${base}/v1/search?q=${encodeURIComponent(text)}&k=5`)).json()) as {
      items: { id: string; score: number }[];
    };
    expect(served).toContain(text);
    // In process: the same planner with the same query vector.
    denseVectorsOf('fake-embed')!.addQuery(text, Float32Array.from(hashedVector(text)));
    const db = await openDb(dbPath);
    try {
      const planner = await loadPlanner(policyStore(db), 0, corpus.items);
      const view = await new KeywordIndexStore(db).openView('item', 0);
      planner.attachOpposite(view);
      const input = { id: 'http', text };
      const keywords = planner.plan(input).keywords;
      // The run's encoder rule holds in the worker too: it asked the endpoint for the planned keywords' vectors.
      expect(planner.config.keywordCosine).toBe(0.3);
      expect(keywords.length).toBeGreaterThan(0);
      for (const k of keywords) expect(served).toContain(k);
      const floor = (await readStoredRun(db)).steps[0].floor!;
      const set = servedSet(view, view.search({ self: text, keywords }, { all: true }).items, planner, input, floor);
      // The served list: the served set by p, then the run's backfill (the other items by p).
      const want = servedList(set.items, 'model', planner, input, view, floor.backfill ?? 0).slice(0, 5);
      expect(want.length).toBeGreaterThan(1);
      expect(r.items.map((h) => h.id)).toEqual(want.map((x) => x.id));
      r.items.forEach((h, i) => expect(h.score).toBeCloseTo(want[i].score, 6));
    } finally {
      await db.close();
    }
  }, 120_000);

  it("for a run whose encoder only judges keywords, embeds no item's text and needs no items", async () => {
    const judge = { embeddingsModel: 'fake-embed', embeddingsFeatures: false };
    served = [];
    const dense = await servingDense({ embeddings: url, embeddingsCache: join(tmp.dir, 'cache-judge') }, judge, corpus, silentLogger);
    const dim = hashedVector('x').length;
    expect(dense!.vectors).toMatchObject({ model: 'fake-embed', ids: [], dim });
    expect(dense!.vectors.data.length).toBe(0);
    const itemTexts = new Set(corpus.items.map(denseItemText));
    expect(served.filter((t) => itemTexts.has(t))).toEqual([]);
    // a query's vector still comes from the endpoint
    expect(Array.from(await dense!.embed('a new query'))).toEqual(Array.from(Float32Array.from(hashedVector('a new query'))));
    expect(served).toContain('a new query');
    expect(served.filter((t) => itemTexts.has(t))).toEqual([]);
    const noCorpus = await servingDense({ embeddings: url, embeddingsCache: join(tmp.dir, 'cache-judge') }, judge, undefined, silentLogger);
    expect(noCorpus!.vectors.ids).toEqual([]);
    const refused = await servingDense({ embeddings: url }, FEATURES, undefined, silentLogger).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/--embeddings needs the dataset's items/);
  });

  it('without --embeddings, or with an endpoint serving another model, serve is refused naming the model', async () => {
    const none = await servingDense({}, FEATURES, corpus, silentLogger).catch((e: unknown) => e);
    expect(isCogrError(none, 'INVALID_ARGUMENT')).toBe(true);
    expect((none as Error).message).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
    modelName = 'another-model';
    try {
      const other = await servingDense({ embeddings: url }, FEATURES, corpus, silentLogger).catch((e: unknown) => e);
      expect((other as Error).message).toMatch(/serves another-model, the stored run was fitted with fake-embed/);
    } finally {
      modelName = 'fake-embed';
    }
  });

  it('a resume with another embeddings model is refused naming both', async () => {
    const db = await openDb(dbPath);
    try {
      const e = await runCoevolution(db, corpus, {
        ...LOOP_TEST_CONFIG,
        rounds: 0,
        embeddingsModel: 'another-model',
        embeddingsFeatures: true,
      }).catch((x: unknown) => x);
      expect(isCogrError(e, 'INVALID_ARGUMENT')).toBe(true);
      expect((e as Error).message).toMatch(/embeddingsModel: stored "fake-embed", asked "another-model"/);
    } finally {
      await db.close();
    }
  });
});
