/**
 * A query with no searchable term — punctuation, stop words only, a NUL, an emoji, or a
 * word no item knows — matches nothing and says so (`fallback.reason: "no_terms"`), the
 * same through `cogr index search` and through `GET` and `POST /v1/search` of a real
 * `cogr serve` process that runs the run's query planner (which would otherwise offer the
 * keywords of the items likeliest a priori: 100 arbitrary matches).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const CLI = join(__dirname, '../../bin/cogr.mjs');
const dir = mkdtempSync(join(tmpdir(), 'cogr-noterms-'));
const db = join(dir, 'db');
const ds = writeSynthDataset(join(dir, 'ds'));
let server: ChildProcess | null = null;
let base = '';

const cogr = (...args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, COGR_HOME: join(dir, 'home') } });

beforeAll(async () => {
  const r = cogr(
    'demo',
    '--dataset',
    ds,
    '--db',
    db,
    '--rounds',
    '1',
    '--group-size',
    '4',
    '--query-epochs',
    '1',
    '--item-epochs',
    '1',
    '--sft-epochs',
    '1',
    '--workers',
    '1',
    '--quiet',
    '--json',
  );
  expect(r.status, r.stderr).toBe(0);
  server = spawn(process.execPath, [CLI, 'serve', '--db', db, '--port', '0', '--keyword-workers', '1'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  base = await new Promise<string>((resolve, reject) => {
    let err = '';
    server!.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
      const m = /listening address=(http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) resolve(m[1]);
    });
    server!.once('exit', (code) => reject(new Error(`cogr serve exited ${code}: ${err}`)));
  });
}, 180_000);
afterAll(async () => {
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server!.once('exit', r));
  }
  rmSync(dir, { recursive: true, force: true });
});

type Fallback = { reason: string; message: string } | null;
async function get(q: string) {
  const res = await fetch(`${base}/v1/search?q=${encodeURIComponent(q)}&k=5`);
  expect(res.status).toBe(200);
  return (await res.json()) as { matched: number; items: unknown[]; fallback: Fallback; keywords: { generated: string[] } };
}
async function post(q: string) {
  const res = await fetch(`${base}/v1/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ program: { text: q }, k: 5 }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { matched: number; items: unknown[]; texts: { fallback: Fallback }[] };
}
function cli(q: string) {
  const r = cogr('index', 'search', '--db', db, '--query', q, '--k', '5', '--json');
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { matched: number; items: unknown[]; fallback: Fallback };
}

describe('a query with no searchable term', () => {
  for (const [what, q] of [
    ['punctuation', '...'],
    ['a stop word', 'the'],
    ['stop words', 'of the and'],
    ['NUL', '\u0000'],
    ['an emoji', '💩'],
    ['a word no item has', 'zzzzqqqxxy'],
  ] as const) {
    it(`matches nothing, labelled no_terms, in the CLI and the API alike: ${what}`, async () => {
      const g = await get(q);
      expect([g.matched, g.items, g.keywords.generated, g.fallback?.reason]).toEqual([0, [], [], 'no_terms']);
      // Asked again, the same answer from the keyword cache (a no-term text stays so for the snapshot).
      const again = await get(q);
      expect([again.matched, again.fallback?.reason, again.fallback?.message]).toEqual([0, 'no_terms', g.fallback?.message]);
      if (what === 'a word no item has') expect((again as unknown as { keywords: { cached: boolean } }).keywords.cached).toBe(true);
      const p = await post(q);
      expect([p.matched, p.items, p.texts[0].fallback?.reason]).toEqual([0, [], 'no_terms']);
      // A NUL cannot be passed in an argument vector.
      if (q.includes('\u0000')) return;
      const c = cli(q);
      expect([c.matched, c.items, c.fallback?.reason]).toEqual([0, [], 'no_terms']);
    });
  }

  it('a blank query is empty: 400 in the API (as an empty q or program text), no_terms in the CLI', async () => {
    for (const q of ['   ', '\t\n']) {
      const g = await fetch(`${base}/v1/search?q=${encodeURIComponent(q)}`);
      expect(g.status).toBe(400);
      expect(((await g.json()) as { error: { code: string; message: string } }).error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('q: must not be empty'),
      });
      const p = await fetch(`${base}/v1/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ program: { text: q } }),
      });
      expect(p.status).toBe(400);
      const c = cli(q);
      expect([c.matched, c.items, c.fallback?.reason]).toEqual([0, [], 'no_terms']);
    }
  });

  it('while a real query matches, without a fallback, in both', async () => {
    const text = (JSON.parse(readFileSync(join(ds, 'queries.jsonl'), 'utf8').split('\n')[0]) as { text: string }).text;
    const g = await get(text);
    expect(g.fallback).toBeNull();
    expect(g.matched).toBeGreaterThan(0);
    expect((await post(text)).matched).toBeGreaterThan(0);
    // The CLI has no generator: its probe is the raw query plus the keywords given.
    const word = text.split(/\s+/)[0];
    const c = JSON.parse(cogr('index', 'search', '--db', db, '--query', text, '--keywords', word, '--json').stdout) as {
      matched: number;
      fallback: Fallback;
    };
    expect(c.fallback).toBeNull();
    expect(c.matched).toBeGreaterThan(0);
  });
});
