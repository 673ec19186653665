/**
 * The search server with the OpenSearch backend against a fake cluster on loopback: the
 * response shape of GET /v1/search, the query it sends (terms on the keys, words for BM25),
 * a cluster that went away as BACKEND_ERROR in cogr's error shape, and a Boolean program as
 * the bool query it becomes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../index/core/log.ts';
import { buildSearchServer } from '../../../src/server/app.ts';
import { LiveSnapshot } from '../../../src/server/state.ts';
import { storeSnapshotLoader } from '../../../src/server/storeLoader.ts';
import { OpenSearchNodes } from '../../../src/opensearch/client.ts';
import { openSearchBackend } from '../../../src/opensearch/backend.ts';
import { catalogue, commitGeneration, fakeSource, listen, tempDir } from '../_serverFixture.ts';

const tmp = tempDir('cogr-os-backend-');
const cat = catalogue(20, 1);
let fake: Server;
let fakeUrl = '';
let base = '';
const searches: unknown[] = [];
const closers: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  const dbPath = join(tmp.dir, 'db');
  await commitGeneration(dbPath, 'item', cat.generations[0], 0);
  fake = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/_alias/shop') return res.end(JSON.stringify({ 'shop-1': { aliases: { shop: {} } } }));
      if (req.url === '/shop-1/_mapping')
        return res.end(
          JSON.stringify({
            'shop-1': {
              mappings: {
                _meta: { cogr: { format: 'cogr-opensearch-index', generation: 0, analyzer: 'english', k1: 1.2, b: 0.75, items: 20 } },
              },
            },
          }),
        );
      if (req.url?.startsWith('/shop/_search')) {
        searches.push(JSON.parse(body));
        return res.end(
          JSON.stringify({
            _shards: { total: 2, successful: 2, failed: 0 },
            hits: { total: { value: 7, relation: 'eq' }, hits: [{ _id: cat.items[0].id, _score: 2 }] },
          }),
        );
      }
      res.statusCode = 404;
      res.end('{}');
    });
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  const live = new LiveSnapshot(
    storeSnapshotLoader({ dbPath, round: 'latest', corpus: { items: cat.items }, keywordSource: () => fakeSource() }),
  );
  await live.reload();
  const backend = await openSearchBackend(new OpenSearchNodes([fakeUrl], { timeoutMs: 5_000 }), 'shop', silentLogger);
  const app = buildSearchServer({ live, backend });
  closers.push(() => app.close());
  base = await listen(app);
});

afterAll(async () => {
  for (const c of closers) await c();
  if (fake.listening) await new Promise((r) => fake.close(r));
  tmp.cleanup();
});

describe('cogr serve --backend opensearch (fake cluster)', () => {
  it('GET /v1/search: the matched set and ranking from the backend, the usual shape', async () => {
    const res = await fetch(`${base}/v1/search?q=red+running+shoes&k=5`, { signal: AbortSignal.timeout(30_000) });
    expect(res.status).toBe(200);
    const b = (await res.json()) as {
      matched: number;
      generation: number;
      ranking: { chosen: string };
      items: { id: string; score: number; title?: string }[];
    };
    expect(b).toMatchObject({ matched: 7, generation: 0, ranking: { ranker: 'keywords', chosen: 'opensearch' } });
    expect(b.items).toEqual([{ id: cat.items[0].id, score: 2 * 2.2, title: cat.items[0].title }]);
    const sent = searches.at(-1) as { size: number; query: { bool: { filter: { terms: { keys: string[] } }[] } } };
    expect(sent.size).toBe(5);
    // A k over the index's size asks for no more than it holds (OpenSearch refuses a size over its result window).
    await fetch(`${base}/v1/search?q=red+running+shoes&k=500`, { signal: AbortSignal.timeout(30_000) });
    expect((searches.at(-1) as { size: number }).size).toBe(20);
    expect(sent.query.bool.filter[0].terms.keys.length).toBeGreaterThan(0);
  });

  it('POST /v1/search: the program as one bool query on the backend, the usual program answer', async () => {
    const program = { and: [{ keyword: 'Red' }, { not: { any_of: ['wool', 'hat'] } }] };
    const res = await fetch(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ program, k: 3 }),
      signal: AbortSignal.timeout(30_000),
    });
    expect(res.status).toBe(200);
    const b = (await res.json()) as {
      matched: number;
      generation: number;
      rankingKeywords: string[];
      items: { id: string; score: number }[];
    };
    expect(b).toMatchObject({ matched: 7, generation: 0, rankingKeywords: ['red'] });
    expect(b.items).toEqual([{ id: cat.items[0].id, score: 2 * 2.2, title: cat.items[0].title }]);
    const sent = searches.at(-1) as { size: number; query: unknown; sort: unknown };
    expect(sent.size).toBe(3);
    // English keys: 'red' stays, 'wool' and 'hat' stay; only the positive keyword ranks.
    expect(sent.query).toEqual({
      bool: {
        filter: [{ bool: { filter: [{ term: { keys: 'red' } }, { bool: { must_not: [{ terms: { keys: ['wool', 'hat'] } }] } }] } }],
        should: [{ match: { words: { query: 'red' } } }],
      },
    });
    expect(sent.sort).toEqual([{ _score: 'desc' }, { id: 'asc' }]);
  });

  it('a cluster that went away: 502 BACKEND_ERROR in the error shape, naming the node', async () => {
    fake.closeAllConnections();
    await new Promise((r) => fake.close(r));
    const res = await fetch(`${base}/v1/search?q=blue+wool+hat`, { signal: AbortSignal.timeout(30_000) });
    expect(res.status).toBe(502);
    const e = (await res.json()) as { error: { code: string; message: string } };
    expect(e.error.code).toBe('BACKEND_ERROR');
    expect(e.error.message).toContain(fakeUrl);
  });
});
