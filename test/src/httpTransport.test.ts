/**
 * The transport of both HTTP servers (src/server/http.ts) on real fastify over loopback,
 * driven with raw sockets: request bodies bounded in time (408 in the API's error shape),
 * the connection cap that never locks new clients out (in process, and in a child under
 * `ulimit -n 1024` with 1,100 trickling sockets), Node's own answers in the API's shape,
 * strict UTF-8 and duplicate keys in JSON bodies.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../index/core/log.ts';
import { createApp, defaultMaxConnections, parseJsonBody, type ConnectionLimits } from '../../src/server/http.ts';
import { createServerMetrics } from '../../src/server/metrics.ts';

const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const c of children.splice(0)) c.kill('SIGKILL');
  while (apps.length) await apps.pop()!.close();
});

async function startApp(connections: ConnectionLimits = {}): Promise<{ app: FastifyInstance; port: number }> {
  const app = createApp({ bodyLimit: 64 * 1024, log: silentLogger, metrics: createServerMetrics(), connections });
  app.get('/health', async () => ({ ok: true }));
  app.post('/echo', async (req) => ({ body: req.body }));
  app.get('/slow', async () => {
    await new Promise((r) => setTimeout(r, 600));
    return { ok: true };
  });
  apps.push(app);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, port: Number(new URL(address).port) };
}

interface Raw {
  sock: Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<string>;
}

function openRaw(port: number, first: string | Buffer): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let data = '';
    const sock = connect(port, '127.0.0.1');
    sockets.push(sock);
    const closed = new Promise<string>((r) => sock.on('close', () => r(data)));
    sock.on('data', (d) => (data += d.toString()));
    sock.on('error', () => {}); // the server may close while we still write
    sock.once('connect', () => {
      sock.write(first);
      resolve({ sock, closed });
    });
    sock.once('error', reject);
  });
}

function parseAnswer(text: string): { status: number; body: any; head: string } {
  const sep = text.indexOf('\r\n\r\n');
  if (sep < 0) throw new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
  const head = text.slice(0, sep);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: JSON.parse(text.slice(sep + 4)), head };
}

async function rawRequest(port: number, text: string | Buffer) {
  return parseAnswer(await (await openRaw(port, text)).closed);
}

const shaped = (body: any, code: string) => {
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
};

const SLOW_BODY = 'POST /echo HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nContent-Length: 60000\r\n\r\n{';

function connectionCount(app: FastifyInstance): Promise<number> {
  return new Promise((resolve, reject) => app.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));
}

async function until(cond: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await cond())) await new Promise((r) => setTimeout(r, 20));
}

describe('request bodies are bounded in time', () => {
  it('a body that stops, or trickles, is answered 408 in the API error shape and the connection closed', { timeout: 30_000 }, async () => {
    const { port } = await startApp({ requestTimeoutMs: 300, headersTimeoutMs: 300, timeoutCheckMs: 50 });
    for (const mode of ['stops', 'trickles'] as const) {
      const raw = await openRaw(port, SLOW_BODY);
      const trickle = mode === 'trickles' ? setInterval(() => raw.sock.write(' '), 50) : undefined;
      const answer = parseAnswer(await raw.closed);
      clearInterval(trickle);
      expect(answer.status, mode).toBe(408);
      expect(answer.head).toMatch(/content-type: application\/json/i);
      shaped(answer.body, 'REQUEST_TIMEOUT');
      expect(answer.body.error.message).toMatch(/^request: not received in time/);
    }
    // The deadline is for receiving the request: a handler slower than it is not cut.
    const slow = await fetch(`http://127.0.0.1:${port}/slow`);
    expect(slow.status).toBe(200);
  });
});

describe('the connection cap', () => {
  it(
    'never holds more than the cap; a new client closes the longest-waiting trickling connection instead of being refused',
    { timeout: 30_000 },
    async () => {
      const { app, port } = await startApp({ maxConnections: 50, requestTimeoutMs: 600_000, headersTimeoutMs: 600_000 });
      const closedAt: number[] = [];
      for (let i = 0; i < 60; i++) {
        const r = await openRaw(port, SLOW_BODY);
        void r.closed.then(() => closedAt.push(i));
      }
      // Ten made room for the last ten: the oldest ones.
      await until(() => closedAt.length >= 10);
      await until(async () => (await connectionCount(app)) === 50);
      expect([...closedAt].sort((x, y) => x - y)).toEqual(Array.from({ length: 10 }, (_, i) => i));
      for (let i = 0; i < 5; i++) {
        const r = await fetch(`http://127.0.0.1:${port}/health`);
        expect(r.status).toBe(200);
        expect(await connectionCount(app)).toBeLessThanOrEqual(50);
      }
      // The client's connection made room by closing the oldest trickling one left.
      await until(() => closedAt.length >= 11);
      expect(closedAt).toContain(10);
    },
  );

  it('is below the open-file limit by default', () => {
    expect(defaultMaxConnections(1024)).toBe(896);
    expect(defaultMaxConnections(1_048_576)).toBe(10_000);
    expect(defaultMaxConnections(undefined)).toBe(10_000);
  });

  it(
    '1,100 trickling sockets against a server under ulimit -n 1024 do not lock new clients out (defaults)',
    { timeout: 90_000 },
    async () => {
      const child = spawn(
        'bash',
        [
          '-c',
          'ulimit -n 1024 && exec "$0" --import tsx "$1"',
          process.execPath,
          join(import.meta.dirname, '../fixtures/transportServer.ts'),
        ],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      children.push(child);
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d) => {
          out += d.toString();
          if (out.includes('\n')) resolve(Number(out.trim()));
        });
        child.once('exit', (code) => reject(new Error(`the server exited (${code})`)));
      });
      for (let i = 0; i < 1100; i += 100) await Promise.all(Array.from({ length: 100 }, () => openRaw(port, SLOW_BODY)));
      for (let i = 0; i < 3; i++) {
        const r = await fetch(`http://127.0.0.1:${port}/health`, { headers: { connection: 'close' } });
        expect(r.status).toBe(200);
        expect(await r.json()).toEqual({ ok: true });
      }
    },
  );
});

describe("Node's own answers are in the API error shape", () => {
  it('no Host header (HTTP/1.1) is 400, an Expect other than 100-continue 417, CONNECT 404', { timeout: 30_000 }, async () => {
    const { port } = await startApp();
    const noHost = await rawRequest(port, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n');
    expect(noHost.status).toBe(400);
    shaped(noHost.body, 'INVALID_ARGUMENT');
    expect(noHost.body.error.message).toBe('host: HTTP/1.1 requires a Host header');
    // HTTP/1.0 has no Host requirement.
    expect((await rawRequest(port, 'GET /health HTTP/1.0\r\n\r\n')).status).toBe(200);
    const expect200 = await rawRequest(
      port,
      'POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\ncontent-type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    expect(expect200.status).toBe(417);
    shaped(expect200.body, 'INVALID_ARGUMENT');
    expect(expect200.body.error.message).toBe('expect: "200-ok" is not supported (only 100-continue)');
    const tunnel = await rawRequest(port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(tunnel.status).toBe(404);
    shaped(tunnel.body, 'NOT_FOUND');
    expect(tunnel.body.error.message).toBe('no route CONNECT example.com:443 (this is not a proxy)');
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
  });
});

describe('JSON bodies', () => {
  const post = async (port: number, body: string | Buffer, contentType = 'application/json') => {
    const r = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', headers: { 'content-type': contentType }, body });
    return { status: r.status, body: (await r.json()) as any };
  };

  it('refuse a key repeated in one object, naming its path', async () => {
    const { port } = await startApp();
    const cases: [string, string][] = [
      ['{"program":{"keyword":"heart"},"program":{"keyword":"blood"}}', 'program: duplicate key'],
      ['{"program":{"keyword":"heart","keyword":5}}', 'program.keyword: duplicate key'],
      ['{"program":{"and":[{"keyword":"a"},{"keyword":"b","keyword":"c"}]}}', 'program.and[1].keyword: duplicate key'],
      ['{"a":1,"\\u0061":2}', 'a: duplicate key'],
      [`{${Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`).join(',')},"k7":0}`, 'k7: duplicate key'],
    ];
    for (const [body, message] of cases) {
      const r = await post(port, body);
      expect(r.status, body).toBe(400);
      shaped(r.body, 'INVALID_BODY');
      expect(r.body.error.message).toBe(message);
    }
    // The same key in different objects, and keys inside strings, are fine.
    for (const body of ['{"a":{"x":1},"b":{"x":2}}', '{"a":"\\"a\\": 1","b":["a","a"]}', '[{"a":1},{"a":2}]']) {
      const r = await post(port, body);
      expect(r.status, body).toBe(200);
      expect(r.body.body).toEqual(JSON.parse(body));
    }
  });

  it('parseJsonBody reads what JSON.parse reads and refuses what it refuses; a repeated key is named wherever it is', async () => {
    const plain = (t: string) => !t.includes('__proto__') && !t.includes('"constructor"');
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue().map((v) => JSON.stringify(v, null, 1)),
        async (text) => {
          fc.pre(plain(text));
          expect(await parseJsonBody(text)).toEqual(JSON.parse(text));
        },
      ),
    );
    // Strings read across slices and windows: long, with escapes and surrogates everywhere.
    const long = Array.from(
      { length: 30_000 },
      (_, i) => ['abc', '\u00e9', '\n', '\ud83d\ude00', '"', '\\', 'x'.repeat(i % 50)][i % 7],
    ).join('');
    const big = JSON.stringify({ a: long, b: [long, { c: long }] });
    expect(big.length).toBeGreaterThan(200_000);
    expect(await parseJsonBody(big)).toEqual(JSON.parse(big));
    // Any text: parsed alike, or refused by both (a malformed number, string, escape, literal, trailing text ...).
    const pieces = fc.constantFrom(
      '{',
      '}',
      '[',
      ']',
      ',',
      ':',
      '"a"',
      '"\\u00e9"',
      '"\\x"',
      '1',
      '-0.5e3',
      '01',
      '1.',
      'true',
      'nul',
      ' ',
      '\n',
      '"\t"',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(pieces, { maxLength: 12 }).map((a) => a.join('')),
        async (text) => {
          let expected: unknown;
          try {
            expected = { ok: JSON.parse(text) };
          } catch {
            expected = 'refused';
          }
          if (text === '') expected = 'refused';
          let got: unknown;
          try {
            got = { ok: await parseJsonBody(text) };
          } catch (e) {
            got = /duplicate key/.test((e as Error).message) ? expected : 'refused';
          }
          expect(got, text).toEqual(expected);
        },
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.string(), { minLength: 1, maxLength: 5 }), fc.string(), async (path, key) => {
        fc.pre([...path, key].every((k) => k !== '__proto__' && k !== 'constructor'));
        let text = `{${JSON.stringify(key)}:1,${JSON.stringify(key)}:2}`;
        for (let i = path.length - 1; i >= 0; i--) text = `{${JSON.stringify(path[i])}:[0,${text}]}`;
        const expected = path.map((p) => `${p}[1]`).join('.');
        await expect(parseJsonBody(text)).rejects.toThrow(`${expected ? `${expected}.` : ''}${key}: duplicate key`);
      }),
    );
  });

  it('parseJsonBody gives the event loop a turn every 64 KiB of a large body', async () => {
    const text = JSON.stringify({ query: Array.from({ length: 4096 }, (_, i) => `${i} ${'x'.repeat(250)}`), labels: [] });
    let ticks = 0;
    let on = true;
    const tick = (): void => {
      ticks++;
      if (on) setImmediate(tick);
    };
    setImmediate(tick);
    const v = await parseJsonBody(text);
    on = false;
    expect(v).toEqual(JSON.parse(text));
    expect(text.length).toBeGreaterThan(1 << 20);
    expect(ticks).toBeGreaterThanOrEqual(Math.floor(text.length / (64 * 1024)) - 1);
  });

  it('are strict UTF-8: an invalid byte is a 400 naming it, never U+FFFD; another charset is 415', async () => {
    const { port } = await startApp();
    const bad: [Buffer, string][] = [
      [
        Buffer.concat([Buffer.from('{"program":{"keyword":"he'), Buffer.from([0xff]), Buffer.from('art"}}')]),
        'body: not valid UTF-8 (byte 0xFF at offset 25); JSON bodies must be UTF-8',
      ],
      [
        Buffer.concat([Buffer.from('{"k":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
        'body: not valid UTF-8 (byte 0xC0 at offset 6); JSON bodies must be UTF-8',
      ],
      [
        Buffer.concat([Buffer.from('{"k":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
        'body: not valid UTF-8 (byte 0xED at offset 6); JSON bodies must be UTF-8',
      ],
    ];
    for (const [body, message] of bad) {
      const r = await post(port, body);
      expect(r.status).toBe(400);
      shaped(r.body, 'INVALID_BODY');
      expect(r.body.error.message).toBe(message);
    }
    const latin1 = await post(port, '{"k":"x"}', 'application/json; charset=latin1');
    expect(latin1.status).toBe(415);
    shaped(latin1.body, 'INVALID_BODY');
    expect(latin1.body.error.message).toBe('content-type: charset "latin1" is not supported (JSON bodies are UTF-8)');
    const good = await post(port, JSON.stringify({ k: 'héart 💩 心' }), 'application/json; charset=UTF-8');
    expect(good).toEqual({ status: 200, body: { body: { k: 'héart 💩 心' } } });
  });
});
