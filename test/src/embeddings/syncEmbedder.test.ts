/**
 * The synchronous embedder (src/embeddings/syncEmbedder.ts) against the fake endpoint served
 * from another thread (the caller's own thread is blocked while it waits): the vectors come
 * back in order, as the endpoint computes them; an endpoint that is down is EMBEDDINGS_ERROR
 * naming it; a registered corpus's vectors fetch what they lack through it.
 */
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCogrError } from '../../../index/core/errors.ts';
import { denseVectorsOf } from '../../../generators/planner/relevance.ts';
import { registerCorpusVectors } from '../../../src/embeddings/dense.ts';
import { SyncEmbedder } from '../../../src/embeddings/syncEmbedder.ts';
import { hashedVector } from '../../fixtures/fakeEmbeddings.ts';

const f32 = (text: string) => [...Float32Array.from(hashedVector(text))];

const BOOT = fileURLToPath(new URL('../../../src/server/tsWorkerBoot.cjs', import.meta.url));
const ENTRY = fileURLToPath(new URL('../../fixtures/fakeEmbeddingsThread.ts', import.meta.url));

let thread: Worker;
let url: string;

beforeAll(async () => {
  thread = new Worker(BOOT, {
    workerData: { cogrWorkerEntry: ENTRY },
    execArgv: ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href],
  });
  url = await new Promise<string>((resolve, reject) => {
    thread.once('message', (m: { url: string }) => resolve(m.url));
    thread.once('error', reject);
  });
});
afterAll(async () => {
  await thread.terminate();
});

describe('the synchronous embedder', () => {
  it("returns each text's vector, in order, as the endpoint computes it", async () => {
    const e = new SyncEmbedder({ baseURL: url, model: 'fake-embed', timeoutMs: 30_000 });
    try {
      const texts = ['hearing loss', 'dental x-rays', 'hearing loss', 'thyroid cancer risk'];
      const got = e.embed(texts);
      expect(got).toHaveLength(4);
      got.forEach((v, i) => expect([...v]).toEqual(f32(texts[i])));
      expect(e.embed([])).toEqual([]);
      expect([...e.embed(['autophagy'])[0]]).toEqual(f32('autophagy'));
    } finally {
      await e.close();
    }
  });

  it('is EMBEDDINGS_ERROR naming the endpoint when nothing listens there', async () => {
    const e = new SyncEmbedder({ baseURL: 'http://127.0.0.1:9/v1', model: 'fake-embed', timeoutMs: 2_000 });
    try {
      let err: unknown;
      try {
        e.embed(['hearing loss']);
      } catch (x) {
        err = x;
      }
      expect(isCogrError(err) && err.code).toBe('EMBEDDINGS_ERROR');
      expect((err as Error).message).toContain('127.0.0.1:9');
    } finally {
      await e.close();
    }
  });

  it("gives a registered corpus's vectors what they lack, fetched once", () => {
    const dense = registerCorpusVectors(
      { model: 'fake-embed-sync', dim: 16, items: new Map(), queries: new Map([['a query', Float32Array.from(hashedVector('a query'))]]) },
      { baseURL: url, model: 'fake-embed', timeoutMs: 30_000 },
    );
    expect(denseVectorsOf('fake-embed-sync')).toBe(dense);
    const [q, k] = dense.vectorsOf(['a query', 'noise exposure']);
    expect([...q]).toEqual(f32('a query'));
    expect([...k]).toEqual(f32('noise exposure'));
    expect(dense.vectorsOf(['noise exposure'])[0]).toBe(k);
  });
});
