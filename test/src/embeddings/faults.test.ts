/**
 * The embeddings client against small fake servers on loopback: a good one (vectors
 * cached by model and text digest, nothing encoded twice), one that is down, one that
 * never answers (deadline), and ones that answer the wrong dimension, the wrong count or
 * non-finite values. Each failure is a named error and the cache keeps only the
 * validated batches before it.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../../index/store/db.ts';
import { isCogrError } from '../../../index/core/errors.ts';
import { EMBEDDINGS_SUBLEVEL, EmbeddingsClient, embedTexts } from '../../../src/embeddings/client.ts';
import { cosine } from '../_oracles.ts';

type Handler = (input: string[], n: number) => { status?: number; body?: string; stall?: boolean };

/** A deterministic 4-dimensional vector of a text. */
function vec(t: string): number[] {
  const v = [1, 0, 0, 0];
  for (let i = 0; i < t.length; i++) v[i % 4] += t.charCodeAt(i) / 100;
  return v;
}
const ok = (input: string[], dims = 4) =>
  JSON.stringify({
    object: 'list',
    model: 'fake',
    data: input.map((t, index) => ({
      object: 'embedding',
      index,
      embedding: vec(t)
        .slice(0, dims)
        .concat(new Array(Math.max(0, dims - 4)).fill(0)),
    })),
  });

let server: Server;
let url = '';
let handler: Handler = (input) => ({ body: ok(input) });
let calls = 0;
let stalled: ServerResponse[] = [];
let dir = '';
let db: CogrDb;

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url?.endsWith('/models')) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ object: 'list', data: [{ id: 'fake-model', object: 'model' }] }));
        return;
      }
      calls++;
      const input = (JSON.parse(body) as { input: string[] }).input;
      const r = handler(input, calls);
      if (r.stall) {
        stalled.push(res);
        return;
      }
      res.writeHead(r.status ?? 200, { 'content-type': 'application/json' }).end(r.body ?? '{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  for (const r of stalled) r.destroy();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

async function freshDb(): Promise<void> {
  dir = mkdtempSync(join(tmpdir(), 'cogr-emb-faults-'));
  db = await openDb(join(dir, 'db'));
}
afterEach(async () => {
  handler = (input) => ({ body: ok(input) });
  calls = 0;
  if (db) await db.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

async function cachedKeys(): Promise<string[]> {
  const keys: string[] = [];
  for await (const k of db.sublevel(EMBEDDINGS_SUBLEVEL).keys()) keys.push(k);
  return keys.filter((k) => k.startsWith('vec/'));
}

const texts = ['alpha one', 'beta two', 'gamma three', 'delta four', 'epsilon five'];

describe('embeddings client', () => {
  it('asks /models for the model, caches validated vectors and never encodes a text twice', async () => {
    await freshDb();
    const c = new EmbeddingsClient({ baseURL: url, batchSize: 2, maxRetries: 0 });
    const r = await embedTexts([...texts, 'alpha one'], c, { db });
    expect(r.model).toBe('fake-model');
    expect(r.dim).toBe(4);
    expect(r.vectors).toHaveLength(6);
    expect(r.encoded).toBe(5);
    expect(calls).toBe(3); // 5 distinct texts in batches of 2
    expect(Array.from(r.vectors[1])).toEqual(vec('beta two').map((x) => Math.fround(x)));
    expect(cosine(r.vectors[0], r.vectors[5])).toBeCloseTo(1, 6);
    expect(await cachedKeys()).toHaveLength(5);
    const again = await embedTexts([...texts, 'zeta six'], new EmbeddingsClient({ baseURL: url, batchSize: 2, maxRetries: 0 }), { db });
    expect(again.cached).toBe(5);
    expect(again.encoded).toBe(1);
    expect(calls).toBe(4);
    expect(Array.from(again.vectors[2])).toEqual(Array.from(r.vectors[2]));
  });

  it('a server that is down is EMBEDDINGS_ERROR naming the endpoint; nothing is cached', async () => {
    await freshDb();
    const s = createServer();
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
    const port = (s.address() as AddressInfo).port;
    await new Promise((r) => s.close(r));
    const c = new EmbeddingsClient({ baseURL: `http://127.0.0.1:${port}/v1`, model: 'm', maxRetries: 1, retryBaseMs: 1 });
    const e = await embedTexts(texts, c, { db }).catch((x: unknown) => x);
    expect(isCogrError(e, 'EMBEDDINGS_ERROR')).toBe(true);
    expect((e as Error).message).toContain(`127.0.0.1:${port}`);
    expect((e as Error).message).toMatch(/connection error/);
    expect((e as Error).message).toContain('2 attempt(s)');
    expect(await cachedKeys()).toHaveLength(0);
  });

  it('a server that never answers misses the deadline: EMBEDDINGS_ERROR saying so, after the validated first batch was kept', async () => {
    await freshDb();
    handler = (input, n) => (n === 1 ? { body: ok(input) } : { stall: true });
    const c = new EmbeddingsClient({ baseURL: url, model: 'm', batchSize: 2, timeoutMs: 300, maxRetries: 0 });
    const e = await embedTexts(texts, c, { db }).catch((x: unknown) => x);
    expect(isCogrError(e, 'EMBEDDINGS_ERROR')).toBe(true);
    expect((e as Error).message).toMatch(/deadline of 300 ms/);
    expect(await cachedKeys()).toHaveLength(2);
  });

  it('a 5xx is retried, a 4xx is not', async () => {
    await freshDb();
    handler = (input, n) => (n === 1 ? { status: 503, body: '{"error":{"message":"busy"}}' } : { body: ok(input) });
    const r = await embedTexts(texts, new EmbeddingsClient({ baseURL: url, model: 'm', batchSize: 8, maxRetries: 1, retryBaseMs: 1 }), {
      db,
    });
    expect(r.encoded).toBe(5);
    expect(calls).toBe(2);
    handler = () => ({ status: 400, body: '{"error":{"message":"bad model"}}' });
    const e = await embedTexts(['new text'], new EmbeddingsClient({ baseURL: url, model: 'm', maxRetries: 3, retryBaseMs: 1 }), {
      db,
    }).catch((x: unknown) => x);
    expect(isCogrError(e, 'EMBEDDINGS_ERROR')).toBe(true);
    expect((e as Error).message).toMatch(/after 1 attempt\(s\): HTTP 400/);
  });

  const formats: [string, Handler, RegExp][] = [
    ['a dimension other than the first batch', (input, n) => ({ body: ok(input, n === 1 ? 4 : 5) }), /dimension 5, expected 4/],
    [
      'fewer vectors than inputs',
      (input, n) => ({ body: ok(n === 1 ? input : input.slice(1)) }),
      /answered 1 vector\(s\) for 2 input\(s\)/,
    ],
    [
      'a non-finite value',
      (input, n) => ({ body: n === 1 ? ok(input) : ok(input).replace(/"embedding":\[[^,\]]+/, '"embedding":[1e999') }),
      /not a finite number/,
    ],
    [
      'an index twice',
      (input, n) => ({ body: n === 1 ? ok(input) : ok(input).replace('"index":1', '"index":0') }),
      /index 0 answered twice/,
    ],
  ];
  for (const [what, h, msg] of formats) {
    it(`${what} is EMBEDDINGS_FORMAT; only the first, validated batch is cached; a re-run encodes the rest`, async () => {
      await freshDb();
      handler = h;
      const c = new EmbeddingsClient({ baseURL: url, model: 'm', batchSize: 2, maxRetries: 0 });
      const e = await embedTexts(texts, c, { db }).catch((x: unknown) => x);
      expect(isCogrError(e, 'EMBEDDINGS_FORMAT')).toBe(true);
      expect((e as Error).message).toMatch(msg);
      expect(await cachedKeys()).toHaveLength(2);
      handler = (input) => ({ body: ok(input) });
      calls = 0;
      const r = await embedTexts(texts, new EmbeddingsClient({ baseURL: url, model: 'm', batchSize: 2, maxRetries: 0 }), { db });
      expect(r.cached).toBe(2);
      expect(r.encoded).toBe(3);
      expect(await cachedKeys()).toHaveLength(5);
    });
  }

  it('a cache holding another dimension for the model refuses an answer of a new dimension', async () => {
    await freshDb();
    await embedTexts(['a', 'b'], new EmbeddingsClient({ baseURL: url, model: 'm', maxRetries: 0 }), { db });
    handler = (input) => ({ body: ok(input, 6) });
    const e = await embedTexts(['c'], new EmbeddingsClient({ baseURL: url, model: 'm', maxRetries: 0 }), { db }).catch((x: unknown) => x);
    expect(isCogrError(e, 'EMBEDDINGS_FORMAT')).toBe(true);
    expect((e as Error).message).toMatch(/dimension 6, expected 4 \(the dimension this model had before\)/);
  });
});
