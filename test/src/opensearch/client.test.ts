/**
 * The OpenSearch client and query building without a cluster: flag parsing that names the
 * flag, failover across nodes (a refused connection, a 503, a node that never answers),
 * errors in cogr's catalogue, partial shard answers never served, and probe terms equal to
 * the view's own.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isCogrError } from '../../../index/core/errors.ts';
import { KeywordView } from '../../../index/view/view.ts';
import { checkIndexName, OpenSearchNodes, parseNodeUrls } from '../../../src/opensearch/client.ts';
import { isNodeLoss, probeTerms, searchIndex } from '../../../src/opensearch/index.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function fake(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const s = createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** A loopback URL nothing listens on (a server opened and closed). */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

describe('flags', () => {
  it('--url: node base URLs, de-duplicated; bad ones named', () => {
    expect(parseNodeUrls('--url', 'http://127.0.0.1:9200, http://127.0.0.1:9201,http://127.0.0.1:9200/')).toEqual([
      'http://127.0.0.1:9200',
      'http://127.0.0.1:9201',
    ]);
    for (const bad of ['', 'localhost:9200', 'ftp://h:1', 'http://u:p@h:1', 'http://h:1/idx'])
      expect(() => parseNodeUrls('--url', bad)).toThrow(/^--url: /);
  });
  it('--index: lower-case index names only', () => {
    expect(checkIndexName('--index', 'med-v1')).toBe('med-v1');
    for (const bad of ['Med', '_x', 'a b', 'a*', 'a,b']) expect(() => checkIndexName('--index', bad)).toThrow(/^--index: /);
  });
});

describe('OpenSearchNodes', () => {
  it('skips a node that refuses the connection and uses every node of the list', async () => {
    const hits: string[] = [];
    const a = await fake((req, res) => {
      hits.push('a');
      res.end('{"ok":1}');
    });
    const b = await fake((req, res) => {
      hits.push('b');
      res.end('{"ok":2}');
    });
    const os = new OpenSearchNodes([await deadUrl(), a, b], { timeoutMs: 5_000 });
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push((await os.request<{ ok: number }>('GET', '/')).body.ok);
    expect(new Set(answers)).toEqual(new Set([1, 2]));
    expect(hits.filter((h) => h === 'a').length).toBeGreaterThan(0);
    expect(hits.filter((h) => h === 'b').length).toBeGreaterThan(0);
    expect(os.failovers).toBeGreaterThanOrEqual(1);
  });

  it('a 503 is asked again on the next node; a 400 is BACKEND_ERROR with the reason, not retried', async () => {
    let second = 0;
    const busy = await fake((req, res) => {
      res.statusCode = 503;
      res.end('{}');
    });
    const ok = await fake((req, res) => {
      second++;
      res.end('{"done":true}');
    });
    expect((await new OpenSearchNodes([busy, ok]).request<{ done: boolean }>('GET', '/x')).body.done).toBe(true);
    expect(second).toBe(1);
    let calls = 0;
    const refuse = await fake((req, res) => {
      calls++;
      res.statusCode = 400;
      res.end(JSON.stringify({ error: { type: 'mapper_parsing_exception', reason: 'field [x] not allowed' } }));
    });
    const e = await caught(new OpenSearchNodes([refuse, refuse.replace('127.0.0.1', 'localhost')]).request('PUT', '/i/_doc/1', {}));
    expect(isCogrError(e, 'BACKEND_ERROR')).toBe(true);
    expect((e as Error).message).toContain('mapper_parsing_exception: field [x] not allowed');
    expect(calls).toBe(1);
  });

  it('nodes that never answer: DEADLINE_EXCEEDED naming them; none up: BACKEND_ERROR', async () => {
    const silent = await fake(() => undefined);
    const e = await caught(new OpenSearchNodes([silent], { timeoutMs: 200 }).request('GET', '/'));
    expect(isCogrError(e, 'DEADLINE_EXCEEDED')).toBe(true);
    expect((e as Error).message).toContain(silent);
    const dead = await deadUrl();
    const e2 = await caught(new OpenSearchNodes([dead], { timeoutMs: 5_000 }).request('GET', '/'));
    expect(isCogrError(e2, 'BACKEND_ERROR')).toBe(true);
    expect((e2 as Error).message).toContain(dead);
  });
});

describe('search', () => {
  const view = KeywordView.build(
    'item',
    0,
    [
      { id: 'a', self: 'Running Shoes', keywords: ['trail running', 'shoes'] },
      { id: 'b', self: 'Wool Hats', keywords: ['hats', 'winter wool'] },
    ],
    { analyzer: 'english' },
  );

  it("probe keys and words are the view's own (those in its vocabulary)", () => {
    const probe = { self: 'Running shoe', keywords: ['Trail Running', 'hat', 'unknown thing', ''] };
    const t = probeTerms('english', probe.self, probe.keywords);
    const own = view.probeOrdinals(probe);
    expect(t.keys.filter((k) => view.keywordOrdinal(k) >= 0).sort()).toEqual(own.keywords.map((o) => view.keyword(o)).sort());
    expect(t.words.filter((w) => view.wordOrdinal(w) >= 0).sort()).toEqual(own.words.map((o) => view.word(o)).sort());
  });

  it('a search failed by a node lost mid-search (500 naming a disconnected node) is asked again; another 500 is not', async () => {
    const lost = JSON.stringify({
      error: {
        type: 'search_phase_execution_exception',
        root_cause: [
          {
            type: 'node_disconnected_exception',
            reason: '[node-1][127.0.0.1:9301][indices:data/read/search[phase/fetch/id]] disconnected',
          },
        ],
      },
      status: 500,
    });
    let n = 0;
    const lostOnce = await fake((req, res) => {
      n++;
      if (n === 1) {
        res.statusCode = 500;
        return res.end(lost);
      }
      res.end(JSON.stringify({ _shards: { total: 1, successful: 1, failed: 0 }, hits: { total: { value: 2 }, hits: [] } }));
    });
    const meta = { analyzer: 'english' as const, k1: 1.2, items: 100 };
    expect((await searchIndex(new OpenSearchNodes([lostOnce]), 'x', meta, { self: 'shoes', keywords: [] }, 10)).matched).toBe(2);
    expect(n).toBe(2);
    // Lost on every try: the third failure is the error, with OpenSearch's reason.
    let m = 0;
    const alwaysLost = await fake((req, res) => {
      m++;
      res.statusCode = 500;
      res.end(lost);
    });
    const e = await caught(searchIndex(new OpenSearchNodes([alwaysLost]), 'x', meta, { self: 'shoes', keywords: [] }, 10));
    expect(isCogrError(e, 'BACKEND_ERROR') && isNodeLoss(e)).toBe(true);
    expect((e as Error).message).toContain('disconnected');
    expect(m).toBe(3);
    // A 500 for another reason (a failing script) is not a node loss: asked once.
    let k = 0;
    const script = await fake((req, res) => {
      k++;
      res.statusCode = 500;
      res.end(
        JSON.stringify({
          error: { type: 'search_phase_execution_exception', root_cause: [{ type: 'script_exception', reason: 'runtime error' }] },
        }),
      );
    });
    const f = await caught(searchIndex(new OpenSearchNodes([script]), 'x', meta, { self: 'shoes', keywords: [] }, 10));
    expect(isCogrError(f, 'BACKEND_ERROR')).toBe(true);
    expect(isNodeLoss(f)).toBe(false);
    expect(k).toBe(1);
    // The exception types decide, not the wording: a script whose message says "disconnected"
    // is no node loss; a node lost under a failed shard (no root cause) is one.
    const answer = (error: object) => {
      const c = { n: 0 };
      return {
        c,
        serve: fake((req, res) => {
          c.n++;
          res.statusCode = 500;
          res.end(JSON.stringify({ error, status: 500 }));
        }),
      };
    };
    const worded = answer({
      type: 'search_phase_execution_exception',
      root_cause: [{ type: 'script_exception', reason: 'the feed disconnected' }],
    });
    const w = await caught(searchIndex(new OpenSearchNodes([await worded.serve]), 'x', meta, { self: 'shoes', keywords: [] }, 10));
    expect((w as Error).message).toContain('disconnected');
    expect(isNodeLoss(w)).toBe(false);
    expect(worded.c.n).toBe(1);
    const shard = answer({
      type: 'search_phase_execution_exception',
      reason: 'all shards failed',
      root_cause: [],
      failed_shards: [{ shard: 0, reason: { type: 'transport_exception', caused_by: { type: 'node_closed_exception' } } }],
    });
    const g = await caught(searchIndex(new OpenSearchNodes([await shard.serve]), 'x', meta, { self: 'shoes', keywords: [] }, 10));
    expect(isNodeLoss(g)).toBe(true);
    expect(shard.c.n).toBe(3);
  });

  it('an answer with failed shards is asked again, and never served', async () => {
    let n = 0;
    const partialOnce = await fake((req, res) => {
      n++;
      const failed = n === 1 ? 1 : 0;
      res.end(JSON.stringify({ _shards: { total: 2, successful: 2 - failed, failed }, hits: { total: { value: 3 - failed }, hits: [] } }));
    });
    const os = new OpenSearchNodes([partialOnce]);
    const meta = { analyzer: 'english' as const, k1: 1.2, items: 100 };
    expect((await searchIndex(os, 'x', meta, { self: 'shoes', keywords: [] }, 10)).matched).toBe(3);
    const partial = await fake((req, res) => {
      res.end(JSON.stringify({ _shards: { total: 2, successful: 1, failed: 1 }, hits: { total: { value: 1 }, hits: [] } }));
    });
    const e = await caught(searchIndex(new OpenSearchNodes([partial]), 'x', meta, { self: 'shoes', keywords: [] }, 10));
    expect(isCogrError(e, 'BACKEND_ERROR')).toBe(true);
    expect((e as Error).message).toContain('1 of 2 shards');
  });
});
