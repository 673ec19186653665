/**
 * `cogr verify` on a real project database (a copy of the committed format fixture of the
 * current versions, a one-round run, with its generation files removed as in a database
 * written before they existed): what it reports for files that
 * are missing, damaged or lost by the database, what `--repair` does about each, and that
 * readers and writers agree with it.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cogr } from './_cli.ts';
import { DB_FORMAT_VERSION, openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { PUBLISHED_FORMAT_VERSION } from '../../index/store/published.ts';
import { RUN_STATE_VERSION } from '../../src/run/state.ts';

const FIXTURE = join(
  __dirname,
  '../fixtures/formats',
  `db-v${DB_FORMAT_VERSION}-run-v${RUN_STATE_VERSION}-files-v${PUBLISHED_FORMAT_VERSION}`,
);
let dir: string;
let db: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-verify-'));
  db = join(dir, 'db');
  cpSync(FIXTURE, db, { recursive: true });
  rmSync(join(db, 'published'), { recursive: true });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  process.exitCode = 0;
});

const statuses = async (...extra: string[]) => {
  const r = await cogr('verify', '--db', db, '--json', ...extra);
  return {
    code: r.code,
    err: r.err,
    report: JSON.parse(r.out) as {
      intact: boolean;
      database: unknown;
      lines: { what: string; status: string; repaired?: string }[];
      leftovers: string[];
    },
  };
};

describe('cogr verify', () => {
  it('says what is unpublished in a database written before generation files, and --repair writes them', async () => {
    // Readers have nothing to read yet, and say how to get it.
    const list = await cogr('index', 'list', '--db', db);
    expect(list.code).toBe(1);
    expect(list.err).toMatch(/^error\[NOT_FOUND\]: the database .* has no generation files yet .*`cogr verify --repair` writes them/);
    const before = await statuses();
    expect(before.code).toBe(1);
    expect(before.report.intact).toBe(false);
    expect(before.report.database).toBe('checked');
    expect(new Set(before.report.lines.map((l) => l.status))).toEqual(new Set(['unpublished']));
    expect(before.report.lines.map((l) => l.what)).toEqual(
      expect.arrayContaining(['item generation 0', 'query generation 1', 'run state', 'policy planner:000001']),
    );
    const repaired = await statuses('--repair');
    expect(repaired.code).toBe(0);
    expect(repaired.report.lines.every((l) => l.repaired !== undefined)).toBe(true);
    const after = await cogr('verify', '--db', db);
    expect(after.code).toBe(0);
    expect(after.out).toMatch(/^database .*: read in full and compared with the files\n/);
    expect(after.out).toMatch(/\nintact: \d+ checked\n$/);
    expect((await cogr('index', 'list', '--db', db)).code).toBe(0);
  });

  it('reports a flipped byte in a generation file and --repair rewrites it from the database', async () => {
    const file = join(db, 'published', 'item-00000001.view');
    const good = readFileSync(file);
    const bad = Buffer.from(good);
    bad[Math.floor(bad.length / 2)] ^= 0x01;
    writeFileSync(file, bad);
    const search = await cogr('index', 'search', '--db', db, '--keywords', 't0w0');
    expect(search.code).toBe(1);
    expect(search.err).toMatch(/^error\[DB_CORRUPT\]: item generation 1: file .*item-00000001\.view is damaged/);
    const r = await cogr('verify', '--db', db);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/\nitem generation 1 +damaged +item generation 1: file .*item-00000001\.view is damaged/);
    expect(r.err).toMatch(
      /^error\[DB_CORRUPT\]: 1 of \d+ checked not intact \(item generation 1: damaged\); `cogr verify --repair` rewrites them from the database\n$/,
    );
    expect((await statuses('--repair')).code).toBe(0);
    expect(readFileSync(file).equals(good)).toBe(true);
    expect((await cogr('index', 'search', '--db', db, '--keywords', 't0w0')).code).toBe(0);
  });

  it('reports a generation the database lost; writers refuse to reuse its number until --repair', async () => {
    // The newest query generation vanishes from the database (as with a damaged write-ahead log).
    const handle = await openDb(db);
    const last = (await new KeywordIndexStore(handle).listGenerations('query')).at(-1)!.generation;
    await handle.sublevel('kwi').del(['m', 'query', last.toString(16).padStart(8, '0')].join('\0'));
    await handle.close();
    const r = await statuses();
    expect(r.code).toBe(1);
    expect(r.report.lines.find((l) => l.what === `query generation ${last}`)?.status).toBe('lost');
    writeFileSync(join(dir, 'q.jsonl'), JSON.stringify({ id: 'q', title: 'a query', keywords: ['t0w0'] }) + '\n');
    const w = await cogr('index', 'import', '--db', db, '--side', 'query', '--from', join(dir, 'q.jsonl'));
    expect(w.code).toBe(1);
    expect(w.err).toMatch(
      new RegExp(`^error\\[DB_CORRUPT\\]: query generation ${last} is published .* but the database .* does not hold it`),
    );
    const fixed = await statuses('--repair');
    expect(fixed.report.lines.find((l) => l.what === `query generation ${last}`)?.repaired).toMatch(/files removed/);
    // The run's steps that used it are reported: nothing can repair them (the generation is gone).
    const users = fixed.report.lines.filter((l) => l.what.startsWith('step '));
    expect(users.map((l) => [l.what, l.status])).toEqual([
      ['step r1-query', 'missing'],
      ['step r1-item', 'missing'],
    ]);
    expect(fixed.code).toBe(1);
    expect((await cogr('index', 'import', '--db', db, '--side', 'query', '--from', join(dir, 'q.jsonl'))).code).toBe(0);
    const after = await cogr('verify', '--db', db);
    expect(after.code).toBe(1);
    expect(after.err).toMatch(
      /^error\[DB_CORRUPT\]: 2 of \d+ checked not intact \(step r1-query: missing; step r1-item: missing\); a step uses a generation that was deleted: .*--fresh/,
    );
    expect(after.out).toMatch(new RegExp(`step r1-query +missing +uses query generation ${last}, which the database does not hold`));
  });

  it('lists the cells of a staged commit killed midway as a leftover, and --repair deletes them', async () => {
    // What a writer killed between two batches of a staged commit leaves: its reserved
    // number, its marker and some cells, named by no manifest.
    const handle = await openDb(db);
    const kwi = handle.sublevel<unknown>('kwi');
    const next = (await kwi.get('n\0item')) as number;
    const g = next.toString(16).padStart(8, '0');
    await kwi.batch([
      { type: 'put', key: 'n\0item', value: next + 1 },
      { type: 'put', key: 's\0item', value: next },
      { type: 'put', key: `r\0item\0ghost\0${g}`, value: { s: 'ghost', k: ['boo'], l: 2 } },
      { type: 'put', key: `p\0item\0boo\0ghost\0${g}`, value: 1 },
    ]);
    await handle.close();
    const r = await cogr('verify', '--db', db);
    // Harmless (nothing reads them): not counted against intact; only the steps the previous test left without their generation are.
    expect(r.err).toMatch(/2 of \d+ checked not intact \(step r1-query: missing; step r1-item: missing\)/);
    expect(r.out).toContain(
      `1 leftover(s) of an interrupted writer (harmless; --repair removes them):\n  item generation ${next}: 2 cells of a staged commit that was interrupted (never read)\n`,
    );
    expect((await statuses('--repair')).report.leftovers).toEqual([]);
    expect((await cogr('verify', '--db', db)).out).not.toContain('leftover');
    const again = await openDb(db);
    const keys: string[] = [];
    for await (const k of again.sublevel<unknown>('kwi').keys()) keys.push(k);
    await again.close();
    expect(keys.filter((k) => (/^[rpw]\0item\0/.test(k) && k.endsWith(g)) || k.startsWith('s\0'))).toEqual([]);
  });
});
