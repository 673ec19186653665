import { createServer } from 'node:http';
import { connect } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { OpenAIGenerator } from '../../generators/llm.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordView } from '../../index/view/view.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import { LiveSnapshot, type QueryKeywordSource } from '../../src/server/state.ts';
import { generatorKeywordSource, storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { VocabularyIndex } from '../../src/server/vocab.ts';
import { catalogue, commitGeneration, fakeSource, listen, tempDir } from './_serverFixture.ts';
import { chatCompletion } from '../fixtures/chatCompletion.ts';

const cat = catalogue(40, 3);
let tmp: ReturnType<typeof tempDir>;
let dbPath: string;

beforeAll(async () => {
  tmp = tempDir('cogr-server-');
  dbPath = join(tmp.dir, 'db');
  await commitGeneration(dbPath, 'item', cat.generations[0], 0);
  await commitGeneration(dbPath, 'item', cat.generations[1], 1);
  await commitGeneration(dbPath, 'query', [{ id: 'q1', self: 'red shoes', keywords: ['running shoes'] }], 1);
});
afterAll(() => tmp.cleanup());

const apps: { close: () => Promise<unknown> }[] = [];
afterEach(async () => {
  while (apps.length) await apps.pop()!.close();
});

async function start(
  opts: { source?: QueryKeywordSource | null; token?: string; limits?: Record<string, number>; round?: number | 'latest' } = {},
) {
  const loader = storeSnapshotLoader({
    dbPath,
    round: opts.round ?? 'latest',
    corpus: { items: cat.items },
    keywordSource: () => (opts.source === undefined ? fakeSource() : opts.source),
  });
  const live = new LiveSnapshot(loader);
  await live.reload();
  const app = buildSearchServer({ live, ...(opts.token ? { token: opts.token } : {}), ...(opts.limits ? { limits: opts.limits } : {}) });
  apps.push(app);
  const base = await listen(app);
  return { base, live, app };
}

/** A server over a new database holding item generation 0 (for tests that commit more themselves). */
async function serveFresh(path: string) {
  await commitGeneration(path, 'item', cat.generations[0], 0);
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: path, round: 'latest', keywordSource: () => fakeSource() }));
  await live.reload();
  const app = buildSearchServer({ live });
  apps.push(app);
  return { live, app };
}

async function getJson(url: string, init?: RequestInit): Promise<{ status: number; body: any }> {
  const r = await fetch(url, init);
  const text = await r.text();
  return { status: r.status, body: text.length ? JSON.parse(text) : null };
}

const gen1 = KeywordView.build('item', 1, cat.generations[1]);

describe('GET /v1/search', () => {
  it('returns the same items and scores as the library for the served generation', async () => {
    const { base } = await start();
    const src = fakeSource();
    for (const [q, k] of [
      ['red running shoes', 10],
      ['wool hat on sale', 5],
      ['blue 7', 3],
      ['boots', 100],
      ['nothing matches this', 10],
    ] as const) {
      const { status, body } = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}&k=${k}`);
      expect(status).toBe(200);
      const kws = await src.keywords(q, new AbortController().signal);
      const expected = gen1.search({ self: q, keywords: kws }, { k });
      expect(body.generation).toBe(1);
      expect(body.round).toBe(1);
      // A generator that yields no keyword is a fallback to the raw query ("empty").
      expect(body.fallback).toEqual(kws.length ? null : { reason: 'empty', message: expect.any(String) });
      expect(body.keywords.generated).toEqual(kws);
      expect(body.keywords.raw).toBe(q);
      expect(body.matched).toBe(expected.matched);
      expect(body.items.map((x: any) => [x.id, x.score])).toEqual(expected.items.map((x) => [x.id, x.score]));
    }
  });

  it('explains matched keywords and term contributions like KeywordView.explain', async () => {
    const { base } = await start();
    const q = 'green rain jacket';
    const { body } = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}&k=3&explain=true`);
    expect(body.items.length).toBeGreaterThan(0);
    const kws = await fakeSource().keywords(q, new AbortController().signal);
    for (const hit of body.items) {
      const ex = gen1.explain({ self: q, keywords: kws }, hit.id)!;
      expect(hit.explain.matchedKeywords).toEqual(ex.matchedKeywords);
      expect(hit.explain.terms).toEqual(ex.terms);
      expect(hit.explain.score).toBeCloseTo(hit.score, 12);
      expect(hit.title).toBe(cat.items.find((i) => i.id === hit.id)!.title);
    }
  });

  it('POST {q, k, explain} answers as GET does; results carry titles and the fields asked for', async () => {
    const { base } = await start();
    const q = 'green rain jacket';
    const get = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}&k=4&explain=true`);
    const post = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q, k: 4, explain: true }),
    });
    expect(post.status).toBe(200);
    expect({ ...post.body, keywords: { ...post.body.keywords, cached: false } }).toEqual({
      ...get.body,
      keywords: { ...get.body.keywords, cached: false },
    });
    expect(get.body.items.length).toBeGreaterThan(0);
    for (const hit of get.body.items) {
      expect(hit.title).toBe(cat.items.find((i) => i.id === hit.id)!.title);
      expect(hit.fields).toBeUndefined();
    }
    const item = (id: string) => cat.items.find((i) => i.id === id)!;
    const withFields = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}&k=4&fields=brand,text,nosuch`);
    for (const hit of withFields.body.items) expect(hit.fields).toEqual({ brand: item(hit.id).fields!.brand, text: item(hit.id).text });
    const all = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q, k: 2, fields: ['*'] }),
    });
    for (const hit of all.body.items) expect(hit.fields).toEqual({ ...item(hit.id).fields, text: item(hit.id).text });
    const program = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ program: { keyword: 'rain jacket' }, k: 2, fields: ['colour'] }),
    });
    for (const hit of program.body.items)
      expect(hit).toMatchObject({ title: item(hit.id).title, fields: { colour: item(hit.id).fields!.colour } });
    const badGet = await getJson(`${base}/v1/search?q=a&fields=brand,,text`);
    expect(badGet.status).toBe(400);
    expect(badGet.body.error.message).toMatch(/^fields: a field name must not be empty/);
    const badPost = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q: 'a', fields: 'brand' }),
    });
    expect(badPost.status).toBe(400);
    expect(badPost.body.error.message).toMatch(/^fields: /);
  });

  it('caches generated keywords and counts hits in /metrics', async () => {
    const source = fakeSource();
    const { base } = await start({ source });
    const a = await getJson(`${base}/v1/search?q=blue+socks`);
    const b = await getJson(`${base}/v1/search?q=Blue%20%20Socks`);
    expect(a.body.keywords.cached).toBe(false);
    expect(b.body.keywords.cached).toBe(true);
    expect(source.calls).toBe(1);
    const m = await (await fetch(`${base}/metrics`)).text();
    expect(m).toMatch(/^cogr_query_keyword_cache_hits_total 1$/m);
    expect(m).toMatch(/^cogr_http_requests_total\{method="GET",route="\/v1\/search",status="200"\} 2$/m);
    expect(m).toMatch(/^cogr_http_request_duration_seconds_bucket\{route="\/v1\/search",le="\+Inf"\} 2$/m);
  });

  it('falls back to the raw query when the generator is too slow or fails, and says so', async () => {
    for (const [source, reason] of [
      [fakeSource({ delayMs: 2000 }), 'timeout'],
      [fakeSource({ fail: true }), 'error'],
      [null, 'no_generator'],
    ] as const) {
      const { base } = await start({ source, limits: { keywordBudgetMs: 50 } });
      const q = 'red 0';
      const { status, body } = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}`);
      expect(status).toBe(200);
      expect(body.fallback.reason).toBe(reason);
      expect(body.keywords.source).toBe('raw');
      expect(body.keywords.generated).toEqual([]);
      const expected = gen1.search({ self: q, keywords: [] }, { k: 10 });
      expect(body.items.map((x: any) => x.id)).toEqual(expected.items.map((x) => x.id));
      const m = await (await fetch(`${base}/metrics`)).text();
      expect(m).toContain(`cogr_query_keyword_fallbacks_total{reason="${reason}"} 1`);
    }
  });

  it('takes query keywords from an OpenAI-compatible endpoint, falling back when it is too slow', async () => {
    // A local chat-completions server: JSON keywords, or no reply at all for "slow" queries.
    let calls = 0;
    const llm = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        calls++;
        const slow = body.includes('slow');
        const reply = () => {
          if (res.destroyed) return;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(chatCompletion('{"keywords": ["Leather Boots", "black"]}')));
        };
        // A slow query is never answered (the connection is closed at the end): it falls
        // back within its budget however fast or busy the machine is.
        if (!slow) reply();
      });
    });
    await new Promise<void>((r) => llm.listen(0, '127.0.0.1', () => r()));
    const port = (llm.address() as { port: number }).port;
    try {
      const gen = new OpenAIGenerator({ baseURL: `http://127.0.0.1:${port}/v1`, model: 'm', apiKey: 'k', maxRetries: 0 });
      // A budget far above a loopback answer on a busy machine, and a small one for the query never answered.
      const { base } = await start({ source: generatorKeywordSource(gen), limits: { keywordBudgetMs: 30_000 } });
      const { base: tight } = await start({ source: generatorKeywordSource(gen), limits: { keywordBudgetMs: 100 } });
      const q = 'boots for winter';
      const ok = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}`);
      expect(ok.body.fallback).toBeNull();
      expect(ok.body.keywords).toMatchObject({ generated: ['leather boots', 'black'], source: 'openai', cached: false });
      const expected = gen1.search({ self: q, keywords: ['leather boots', 'black'] }, { k: 10 });
      expect(ok.body.items.map((x: any) => x.id)).toEqual(expected.items.map((x) => x.id));
      const again = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}`);
      expect(again.body.keywords.cached).toBe(true);
      expect(calls).toBe(1);
      const slow = await getJson(`${tight}/v1/search?q=slow+boots`);
      expect(slow.status).toBe(200);
      expect(slow.body.fallback.reason).toBe('timeout');
      expect(slow.body.items.map((x: any) => x.id)).toEqual(
        gen1.search({ self: 'slow boots', keywords: [] }, { k: 10 }).items.map((x) => x.id),
      );
    } finally {
      llm.closeAllConnections();
      await new Promise((r) => llm.close(r));
    }
  });

  it('answers 400 naming the field for bad parameters', async () => {
    const { base } = await start({ limits: { maxQueryLength: 20, maxK: 50 } });
    const cases: [string, string][] = [
      ['', 'q:'],
      ['?k=3', 'q:'],
      ['?q=', 'q:'],
      ['?q=' + 'x'.repeat(21), 'q:'],
      ['?q=red&k=0', 'k:'],
      ['?q=red&k=51', 'k:'],
      ['?q=red&k=abc', 'k:'],
      ['?q=red&k=2.5', 'k:'],
      ['?q=red&explain=maybe', 'explain:'],
      ['?q=red&q=blue', 'q:'],
      ['?q=red&colour=1', 'colour'],
    ];
    for (const [qs, field] of cases) {
      const { status, body } = await getJson(`${base}/v1/search${qs}`);
      expect(status, qs).toBe(400);
      expect(body.error.code).toBe('INVALID_ARGUMENT');
      expect(body.error.message, qs).toContain(field);
    }
  });
});

describe('other endpoints', () => {
  it('GET /v1/items/:id lists keywords per generation; 404 for an unknown id', async () => {
    const { base } = await start();
    const { status, body } = await getJson(`${base}/v1/items/p003`);
    expect(status).toBe(200);
    expect(body.served.generation).toBe(1);
    expect(body.fields).toEqual(cat.items[3].fields);
    expect(body.generations.map((g: any) => g.generation)).toEqual([0, 1]);
    const v0 = KeywordView.build('item', 0, cat.generations[0]);
    expect(body.generations[0].keywords).toEqual(v0.keywordsOf(v0.ordinalOf('p003')));
    expect(body.generations[1].keywords).toEqual(gen1.keywordsOf(gen1.ordinalOf('p003')));
    const nf = await getJson(`${base}/v1/items/nope`);
    expect(nf.status).toBe(404);
    expect(nf.body.error.code).toBe('NOT_FOUND');
    const nr = await getJson(`${base}/v1/nothing`);
    expect(nr.status).toBe(404);
  });

  it('GET /v1/keywords finds vocabulary by word prefix; /v1/generations lists both sides', async () => {
    const { base } = await start();
    const { body } = await getJson(`${base}/v1/keywords?prefix=runn&limit=50`);
    const surfaces = Array.from({ length: gen1.numKeywords }, (_, i) => gen1.surface(i));
    const expected = surfaces.filter((k) => k.split(' ').some((w) => w.startsWith('runn')));
    expect(body.keywords.map((x: any) => x.keyword).sort()).toEqual(expected.sort());
    expect(body.keywords[0].keyword.startsWith('runn')).toBe(true);
    for (const h of body.keywords) expect(h.entities).toBe(gen1.keywordDf(gen1.ordinalOfKeyword(h.keyword)));
    const bad = await getJson(`${base}/v1/keywords?limit=3`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/^prefix:/);
    const g = await getJson(`${base}/v1/generations`);
    expect(g.body.served).toEqual({ round: 1, item: 1, query: 0, reason: null });
    expect(g.body.generations.map((x: any) => [x.side, x.generation, x.round, x.entities])).toEqual([
      ['item', 0, 0, 40],
      ['item', 1, 1, 40],
      ['query', 0, 1, 1],
    ]);
    // Every generation's vocabulary size, the query side's and those not held in memory too.
    const vocab = [
      KeywordView.build('item', 0, cat.generations[0]).numKeywords,
      gen1.numKeywords,
      KeywordView.build('query', 0, [{ id: 'q1', self: 'red shoes', keywords: ['running shoes'] }]).numKeywords,
    ];
    expect(g.body.generations.map((x: any) => x.keywords)).toEqual(vocab);
    expect(g.body.problems).toEqual([]);
  });

  it('serves a pinned round', async () => {
    const { base } = await start({ round: 0 });
    const { body } = await getJson(`${base}/v1/search?q=red`);
    expect(body.generation).toBe(0);
    expect(body.round).toBe(0);
  });

  it('health, OpenAPI document and docs page', async () => {
    const { base } = await start();
    const h = await getJson(`${base}/health`);
    expect(h.body).toMatchObject({ status: 'ok', generation: 1, round: 1, version: 1, lastError: null });
    const doc = (await getJson(`${base}/openapi.json`)).body;
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v1/search',
        '/v1/items/{id}',
        '/v1/keywords',
        '/v1/generations',
        '/health',
        '/metrics',
        '/v1/admin/reload',
      ]),
    );
    const params = doc.paths['/v1/search'].get.parameters;
    expect(params.map((p: any) => p.name)).toEqual(['q', 'k', 'explain', 'fields']);
    expect(params[0].required).toBe(true);
    expect(params[1].schema.maximum).toBe(1000);
    const bodies = doc.paths['/v1/search'].post.requestBody.content['application/json'].schema.anyOf;
    expect(bodies.map((b: any) => Object.keys(b.properties)[0])).toEqual(['q', 'program']);
    expect(bodies[1].properties.program.$ref).toBe('#/components/schemas/ProgramNode');
    // Every route lists the statuses the transport can answer; a body route 413 and 415 too.
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>))
      for (const [method, op] of Object.entries(ops)) {
        const codes = Object.keys(op.responses).map(Number);
        expect(codes, `${method} ${path}`).toEqual(expect.arrayContaining([200, 400, 408, 417, 431, 500]));
        if (method !== 'get') expect(codes, `${method} ${path}`).toEqual(expect.arrayContaining([413, 415]));
        if (path.includes('{')) expect(codes, `${method} ${path}`).toContain(414);
      }
    expect(Object.keys(doc.paths['/v1/search'].get.responses)).toEqual(['200', '400', '408', '417', '431', '500', '502', '504']);
    expect(doc.components.schemas.ProgramNode.anyOf.length).toBe(7);
    expect(JSON.stringify(doc)).not.toContain('$defs');
    // Every status a route answers is listed (issue 50): the transport's on every route, the body's on every POST.
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const listed = Object.keys(op.responses);
        expect(listed, `${method} ${path}`).toEqual(expect.arrayContaining(['200', '400', '408', '431', '500']));
        if (method === 'post') expect(listed, `${method} ${path}`).toEqual(expect.arrayContaining(['413', '415']));
        if (path.includes('{')) expect(listed).toContain('414');
      }
    }
    // And what a POST answers to a body that is too large, not JSON or malformed is among them.
    const statuses = [
      (await getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' })).status,
      (await getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(1 << 20) }))
        .status,
      (await getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' })).status,
    ];
    expect(statuses).toEqual([415, 413, 400]);
    const docs = await fetch(`${base}/docs`);
    expect(docs.headers.get('content-type')).toContain('text/html');
    const html = await docs.text();
    expect(html).toContain('/v1/search');
    expect(html).not.toMatch(/<script|https?:\/\/(?!json-schema)/);
  });

  it('POST body limits: 413 when too large, 400 for malformed JSON', async () => {
    const { base } = await start({ limits: { bodyLimit: 1024 } });
    const big = JSON.stringify({ program: { text: 'x'.repeat(5000) } });
    const r = await getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const bad = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"program":',
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_BODY');
  });
});

/** Send raw bytes (one write) and read the whole answer: status line and JSON body. */
function rawRequest(base: string, text: string): Promise<{ status: number; body: any; head: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    let data = '';
    const sock = connect(Number(u.port), u.hostname, () => sock.write(text));
    sock.on('data', (d) => (data += d.toString()));
    sock.on('error', () => {}); // the server closes the connection after answering
    sock.on('close', () => {
      const sep = data.indexOf('\r\n\r\n');
      if (sep < 0) return reject(new Error(`no HTTP answer: ${JSON.stringify(data.slice(0, 200))}`));
      const head = data.slice(0, sep);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(data.slice(sep + 4)), head });
    });
  });
}

describe('every error answer has the API error shape', () => {
  const shaped = (body: any, code: string) => {
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error.code).toBe(code);
    expect(typeof body.error.message).toBe('string');
  };

  it('integer query parameters take decimal digits only', async () => {
    const { base } = await start();
    for (const k of ['0x10', '1e2', '%205', '%2B5', '0b11', '1_0', '2.5']) {
      const { status, body } = await getJson(`${base}/v1/search?q=red&k=${k}`);
      expect(status, k).toBe(400);
      shaped(body, 'INVALID_ARGUMENT');
      expect(body.error.message, k).toBe(`k: expected an integer (decimal digits), got ${JSON.stringify(decodeURIComponent(k))}`);
    }
    expect((await getJson(`${base}/v1/keywords?prefix=run&limit=0x2`)).body.error.message).toMatch(
      /^limit: expected an integer \(decimal digits\)/,
    );
    expect((await getJson(`${base}/v1/search?q=red&k=-1`)).body.error.message).toBe('k: must be at least 1');
    expect((await getJson(`${base}/v1/search?q=red&k=16`)).status).toBe(200);
  });

  it('the router: 404, a path parameter over the limit (414), a bad URL encoding (400)', async () => {
    const { base } = await start();
    const nr = await getJson(`${base}/v1/nothing`);
    expect(nr.status).toBe(404);
    shaped(nr.body, 'NOT_FOUND');
    const long = await getJson(`${base}/v1/items/${'x'.repeat(3000)}`);
    expect(long.status).toBe(414);
    shaped(long.body, 'URI_TOO_LONG');
    // Within the router's limit, the route's own schema names the field.
    const id = await getJson(`${base}/v1/items/${'x'.repeat(1500)}`);
    expect(id.status).toBe(400);
    expect(id.body.error.message).toMatch(/^id:/);
    const bad = await getJson(`${base}/v1/items/%E0%A4%A`);
    expect(bad.status).toBe(400);
    shaped(bad.body, 'INVALID_ARGUMENT');
  });

  it('the HTTP parser: headers over the limit (431) and a malformed request (400)', async () => {
    const { base } = await start();
    const big = await rawRequest(base, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big.status).toBe(431);
    expect(big.head).toMatch(/content-type: application\/json/i);
    shaped(big.body, 'HEADERS_TOO_LARGE');
    const longUrl = await rawRequest(base, `GET /v1/search?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(longUrl.status).toBe(431);
    shaped(longUrl.body, 'HEADERS_TOO_LARGE');
    const garbage = await rawRequest(base, 'NOT HTTP AT ALL\r\n\r\n');
    expect(garbage.status).toBe(400);
    shaped(garbage.body, 'INVALID_ARGUMENT');
    // The server still answers afterwards.
    expect((await getJson(`${base}/health`)).status).toBe(200);
  });

  it('POST /v1/search refuses duplicate keys (naming the path) and bodies that are not UTF-8', async () => {
    const { base } = await start();
    const post = (body: string | Buffer) =>
      getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const twice = await post('{"program":{"keyword":"red"},"program":{"keyword":"blue"},"k":1}');
    expect(twice.status).toBe(400);
    shaped(twice.body, 'INVALID_BODY');
    expect(twice.body.error.message).toBe('program: duplicate key');
    expect((await post('{"program":{"keyword":"red","keyword":5}}')).body.error.message).toBe('program.keyword: duplicate key');
    const notUtf8 = await post(Buffer.concat([Buffer.from('{"program":{"keyword":"r'), Buffer.from([0xff]), Buffer.from('ed"}}')]));
    expect(notUtf8.status).toBe(400);
    shaped(notUtf8.body, 'INVALID_BODY');
    expect(notUtf8.body.error.message).toMatch(/^body: not valid UTF-8 \(byte 0xFF at offset 24\)/);
    expect((await post('{"program":{"keyword":"red"},"k":1}')).status).toBe(200);
  });

  it('a body that is not JSON is 415 as the OpenAPI document says, text/plain included', async () => {
    const { base } = await start();
    for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded']) {
      const r = await getJson(`${base}/v1/search`, {
        method: 'POST',
        headers: { 'content-type': type },
        body: '{"program":{"keyword":"red"}}',
      });
      expect(r.status, type).toBe(415);
      shaped(r.body, 'INVALID_BODY');
    }
  });

  it('bodies with __proto__ or constructor.prototype keys', async () => {
    const { base } = await start();
    const cases: [string, string][] = [
      ['{"__proto__": {"admin": true}, "program": {"keyword": "red"}}', 'body.__proto__: this key is not allowed'],
      ['{"program": {"and": [{"\\u005f_proto__": {"keyword": "red"}}]}}', 'body.program.and[0].__proto__: this key is not allowed'],
      ['{"program": {"keyword": "red"}, "constructor": {"prototype": {"x": 1}}}', 'body.constructor: this key is not allowed'],
      ['{"program": {"keyword": ', 'body: not valid JSON ('],
      ['', 'body: empty'],
    ];
    for (const [body, message] of cases) {
      const r = await getJson(`${base}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(r.status, body).toBe(400);
      shaped(r.body, 'INVALID_BODY');
      expect(r.body.error.message.startsWith(message), r.body.error.message).toBe(true);
    }
    // A "constructor" field without a prototype is only an unknown field.
    const plain = await getJson(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"program": {"keyword": "red"}, "constructor": 1}',
    });
    expect(plain.body.error.message).toBe('(root): unknown field(s) "constructor"');
  });
});

describe('generation switching', () => {
  it('admin reload needs the bearer token when one is set', async () => {
    const { base } = await start({ token: 's3cret' });
    expect((await getJson(`${base}/v1/admin/reload`, { method: 'POST' })).status).toBe(401);
    const wrong = await getJson(`${base}/v1/admin/reload`, { method: 'POST', headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('UNAUTHORIZED');
    const ok = await getJson(`${base}/v1/admin/reload`, { method: 'POST', headers: { authorization: 'Bearer s3cret' } });
    expect(ok.status).toBe(200);
    // Nothing new was committed: no swap.
    expect(ok.body).toMatchObject({ swapped: false, version: 1, item: { generation: 1, previous: 1 } });
  });

  it('switches to a newly committed generation during a burst without failing a request', async () => {
    const { dir, cleanup } = tempDir('cogr-switch-');
    try {
      const path = join(dir, 'db');
      const { live, app } = await serveFresh(path);
      const base = await listen(app);
      const views = new Map<number, KeywordView>([
        [0, KeywordView.build('item', 0, cat.generations[0])],
        [1, KeywordView.build('item', 1, cat.generations[1])],
        [2, KeywordView.build('item', 2, cat.generations[2])],
      ]);
      const queries = ['red running shoes', 'wool hat sale', 'black leather boots', 'summer dress 12', 'cotton socks'];
      const results: { status: number; body: any; q: string }[] = [];
      let stop = false;
      // Each client sends at least 10 requests, and goes on until both swaps are done and
      // then 2 more (so each one sees generation 2), however fast the machine is.
      const worker = async (w: number) => {
        let after = 0;
        for (let i = 0; i < 10 || !stop || after++ < 2; i++) {
          const q = queries[(w + i) % queries.length];
          const r = await getJson(`${base}/v1/search?q=${encodeURIComponent(q)}&k=20`);
          results.push({ ...r, q });
        }
      };
      const burst = Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
      // Commit two new generations from "another process" while serving, and reload.
      await new Promise((r) => setTimeout(r, 30));
      await commitGeneration(path, 'item', cat.generations[1], 1);
      expect((await live.reload()).swapped).toBe(true);
      await commitGeneration(path, 'item', cat.generations[2], 2);
      const reloadViaHttp = await getJson(`${base}/v1/admin/reload`, { method: 'POST' });
      expect(reloadViaHttp.body.item).toEqual({ generation: 2, previous: 1 });
      stop = true;
      await burst;
      expect(results.length).toBeGreaterThanOrEqual(12 * 12);
      const seen = new Set<number>();
      const src = fakeSource();
      for (const r of results) {
        expect(r.status).toBe(200);
        seen.add(r.body.generation);
        const kws = await src.keywords(r.q, new AbortController().signal);
        const expected = views.get(r.body.generation)!.search({ self: r.q, keywords: kws }, { k: 20 });
        expect(r.body.items.map((x: any) => [x.id, x.score])).toEqual(expected.items.map((x) => [x.id, x.score]));
      }
      expect(seen.has(2)).toBe(true);
      expect((await getJson(`${base}/v1/search?q=red`)).body.generation).toBe(2);
    } finally {
      cleanup();
    }
  });

  it('builds the vocabulary look-up when a generation is loaded, before it is served, never in a request', async () => {
    const { dir, cleanup } = tempDir('cogr-vocab-');
    const build = vi.spyOn(VocabularyIndex, 'build');
    try {
      const path = join(dir, 'db');
      const { live, app } = await serveFresh(path);
      expect(build.mock.calls.map(([v]) => v.generation)).toEqual([0]);
      await commitGeneration(path, 'item', cat.generations[1], 1);
      expect((await live.reload()).swapped).toBe(true);
      // Built for generation 1 before the reload returned (before the swap).
      expect(build.mock.calls.map(([v]) => v.generation)).toEqual([0, 1]);
      expect(build.mock.calls[1][0]).toBe(live.get().item);
      const base = await listen(app);
      const { body } = await getJson(`${base}/v1/keywords?prefix=gen1`);
      expect(body.generation).toBe(1);
      expect(body.keywords.map((x: any) => x.keyword)).toEqual(['gen1 special']);
      expect(build).toHaveBeenCalledTimes(2);
    } finally {
      build.mockRestore();
      cleanup();
    }
  });

  it("is ready to listen only once the first generation's look-up structures are built", async () => {
    const { dir, cleanup } = tempDir('cogr-vocab-first-');
    const real = VocabularyIndex.build.bind(VocabularyIndex);
    let built = false;
    // A slow vocabulary build: the server must not be ready before it ends.
    const build = vi.spyOn(VocabularyIndex, 'build').mockImplementation(async (view) => {
      const v = await real(view);
      await new Promise((r) => setTimeout(r, 300));
      built = true;
      return v;
    });
    try {
      const path = join(dir, 'db');
      const { app } = await serveFresh(path);
      expect(built).toBe(false);
      await app.ready();
      expect(built).toBe(true);
    } finally {
      build.mockRestore();
      cleanup();
    }
  });

  it('reloads while a writer holds the database lock (readers read the published files)', async () => {
    const { base } = await start();
    const holder = await openDb(dbPath);
    try {
      const r = await getJson(`${base}/v1/admin/reload`, { method: 'POST' });
      expect(r.status).toBe(200);
      expect((await getJson(`${base}/health`)).body).toMatchObject({
        status: 'ok',
        served: { item: 1, query: 0, reason: null },
        problems: [],
      });
    } finally {
      await holder.close();
    }
  });

  it('never serves a generation whose files fail their check as the newest, and says which it serves and why', async () => {
    const { dir, cleanup } = tempDir('cogr-corrupt-');
    try {
      const path = join(dir, 'db');
      const { app } = await serveFresh(path);
      const base = await listen(app);
      await commitGeneration(path, 'item', cat.generations[1], 1);
      // One flipped byte in the new generation's view file.
      const file = join(path, 'published', 'item-00000001.view');
      const bytes = readFileSync(file);
      bytes[bytes.length - 5] ^= 0x20;
      writeFileSync(file, bytes);
      expect((await getJson(`${base}/v1/admin/reload`, { method: 'POST' })).status).toBe(200);
      const h = (await getJson(`${base}/health`)).body;
      expect(h.status).toBe('degraded');
      expect(h.generation).toBe(0);
      expect(h.served.reason).toMatch(
        /^item generation 1 failed its check \(item generation 1: file .*item-00000001\.view is damaged: its content does not match the SHA-256 in its manifest .*\); serving item generation 0 instead$/,
      );
      expect(h.problems).toEqual([
        { side: 'item', generation: 1, code: 'DB_CORRUPT', message: expect.stringContaining('item-00000001.view') },
      ]);
      const g = (await getJson(`${base}/v1/generations`)).body;
      expect(g.served).toMatchObject({ item: 0, reason: h.served.reason });
      expect(g.generations.map((x: { generation: number }) => x.generation)).toEqual([0]);
      expect((await getJson(`${base}/v1/search?q=red`)).body.generation).toBe(0);
      // A new server refuses nothing either: it starts on the newest generation that passes.
      const fresh = new LiveSnapshot(storeSnapshotLoader({ dbPath: path, round: 'latest' }));
      await fresh.reload();
      expect(fresh.get().item.generation).toBe(0);
      // A pinned round whose generation fails is an error, not a silent substitute.
      await expect(new LiveSnapshot(storeSnapshotLoader({ dbPath: path, round: 1 })).reload()).rejects.toMatchObject({
        code: 'DB_CORRUPT',
      });
    } finally {
      cleanup();
    }
  });
});
