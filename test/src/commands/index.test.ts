import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cogr } from '../_cli.ts';
import { Level } from 'level';
import { DB_META_KEY } from '../../../index/store/db.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-cli-index-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  process.exitCode = 0;
});

function jsonl(name: string, rows: unknown[]): string {
  const p = join(dir, name);
  writeFileSync(p, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return p;
}

describe('cogr index', () => {
  it('imports generations, searches, explains, lists, diffs and deletes', async () => {
    const db = join(dir, 'db1');
    const a = jsonl('a.jsonl', [
      { id: 'i1', title: 'Red Shoes', keywords: ['running shoes', 'red'] },
      { id: 'i2', title: 'Blue Hat', keywords: ['hat', 'wool hat'] },
      { id: 'i3', title: 'Green Shoes', keywords: ['running shoes', 'green'] },
    ]);
    expect(await cogr('index', 'import', '--db', db, '--side', 'item', '--from', a, '--label', 'sft')).toMatchObject({
      out: '0\n',
      code: 0,
    });
    const b = jsonl('b.jsonl', [
      { id: 'i1', title: 'Red Shoes', keywords: ['running shoes', 'red'] },
      { id: 'i2', title: 'Blue Hat', keywords: ['hat', 'winter hat'] },
      { id: 'i4', title: 'Socks', keywords: ['wool socks'] },
    ]);
    expect((await cogr('index', 'import', '--db', db, '--from', b)).out).toBe('1\n');

    const s = await cogr('index', 'search', '--db', db, '--query', 'red shoes', '--keywords', 'running shoes|hat', '--json');
    const res = JSON.parse(s.out);
    expect(res.generation).toBe(1);
    expect(res.matched).toBe(2);
    expect(res.items.map((x: { id: string }) => x.id)).toEqual(['i1', 'i2']);
    const old = JSON.parse(
      (
        await cogr(
          'index',
          'search',
          '--db',
          db,
          '--generation',
          '0',
          '--query',
          'red shoes',
          '--keywords',
          'running shoes',
          '--all',
          '--json',
        )
      ).out,
    );
    expect(old).toMatchObject({ generation: 0, matched: 2 });
    expect(old.items.map((x: { id: string }) => x.id).sort()).toEqual(['i1', 'i3']);
    const top1 = JSON.parse(
      (await cogr('index', 'search', '--db', db, '--generation', '0', '--keywords', 'running shoes', '--k', '1', '--json')).out,
    );
    expect(top1.matched).toBe(2);
    expect(top1.items).toHaveLength(1);
    expect((await cogr('index', 'search', '--db', db, '--keywords', 'hat')).out).toContain('1 matched');

    const ex = JSON.parse(
      (await cogr('index', 'explain', '--db', db, '--query', 'red shoes', '--keywords', 'running shoes', '--id', 'i1', '--json')).out,
    );
    expect(ex.matchedKeywords).toEqual(['red shoes', 'running shoes']);
    // BM25 terms are analysed words (the default english analyzer stems them).
    expect(ex.terms.map((t: { word: string }) => t.word).sort()).toEqual(['red', 'run', 'shoe']);
    expect(ex.score).toBeCloseTo(res.items[0].score, 12);
    expect((await cogr('index', 'explain', '--db', db, '--keywords', 'x', '--id', 'nope')).code).toBe(1);

    const list = JSON.parse((await cogr('index', 'list', '--db', db, '--json')).out);
    expect(list.generations.map((g: { generation: number; size: number }) => [g.generation, g.size])).toEqual([
      [0, 3],
      [1, 3],
    ]);
    expect(list.generations[0].meta.label).toBe('sft');
    const d = JSON.parse((await cogr('index', 'diff', '--db', db, '--from', '0', '--to', '1', '--json')).out);
    expect(d).toMatchObject({ added: ['i4'], removed: ['i3'], changed: ['i2'] });

    expect((await cogr('index', 'delete', '--db', db, '--generation', '0')).code).toBe(0);
    // Generation 1 was built from 0: the list says its parent is gone rather than naming it as if it were there.
    const listed = JSON.parse((await cogr('index', 'list', '--db', db, '--json')).out);
    expect(
      listed.generations.map((g: { generation: number; parent: number | null; parentDeleted: boolean }) => [
        g.generation,
        g.parent,
        g.parentDeleted,
      ]),
    ).toEqual([[1, 0, true]]);
    const table = (await cogr('index', 'list', '--db', db)).out;
    expect(table).toMatch(/^1\s+0 \(deleted\)\s/m);
    const after = JSON.parse(
      (await cogr('index', 'search', '--db', db, '--query', 'red shoes', '--keywords', 'running shoes|hat', '--json')).out,
    );
    expect(after).toEqual(res);
    const gone = await cogr('index', 'search', '--db', db, '--generation', '0', '--keywords', 'hat');
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/^error\[NOT_FOUND\]/);
  });

  it('imports the same file twice with one commit (idempotent, as import-generation is); another file or option commits anew', async () => {
    const db = join(dir, 'db-idem');
    const f = jsonl('idem.jsonl', [
      { id: 'i1', title: 'Red Shoes', keywords: ['running shoes', 'red'] },
      { id: 'i2', title: 'Blue Hat', keywords: ['hat'] },
    ]);
    const first = JSON.parse((await cogr('index', 'import', '--db', db, '--from', f, '--json')).out);
    expect(first).toMatchObject({ generation: 0, changed: 2, reused: false });
    const again = await cogr('index', 'import', '--db', db, '--from', f, '--json');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.out)).toMatchObject({ generation: 0, changed: 0, reused: true, entities: 2 });
    expect(again.err).toContain("item generation 0 is already this file's import");
    const list = JSON.parse((await cogr('index', 'list', '--db', db, '--json')).out);
    expect(list.generations ?? list).toHaveLength(1);
    // Another label, mode or base, or other content, is another import.
    expect(JSON.parse((await cogr('index', 'import', '--db', db, '--from', f, '--patch', '--json')).out)).toMatchObject({ generation: 1 });
    writeFileSync(f, JSON.stringify({ id: 'i1', title: 'Red Shoes', keywords: ['red'] }) + '\n');
    expect(JSON.parse((await cogr('index', 'import', '--db', db, '--from', f, '--patch', '--json')).out)).toMatchObject({
      generation: 2,
      reused: false,
    });
  });

  it('rejects bad input with clear errors', async () => {
    const db = join(dir, 'db2');
    const bad = jsonl('bad.jsonl', [
      { id: 'x', keywords: ['a'] },
      { id: 'y', keywords: 'oops' },
    ]);
    const r = await cogr('index', 'import', '--db', db, '--from', bad);
    expect(r.code).toBe(1);
    expect(r.err).toContain('error[DATA_FORMAT]');
    expect(r.err).toContain('bad.jsonl:2');
    const dup = jsonl('dup.jsonl', [
      { id: 'x', keywords: ['a'] },
      { id: 'x', keywords: ['b'] },
    ]);
    expect((await cogr('index', 'import', '--db', db, '--from', dup)).err).toContain('error[DUPLICATE_ID]');
    expect((await cogr('index', 'import', '--db', db, '--from', join(dir, 'missing.jsonl'))).err).toContain('error[DATA_MISSING]');
    expect((await cogr('index', 'import', '--db', db, '--side', 'both', '--from', dup)).err).toContain('--side: expected item or query');
    expect((await cogr('index', 'search', '--db', db, '--k', 'ten')).err).toContain('--k: expected an integer');
    expect((await cogr('index', 'search', '--db', db, '--b', '2')).err).toContain('--b: expected a number in [0, 1]');
    expect((await cogr('index', 'search', '--db', join(dir, 'none'))).err).toContain('error[NOT_FOUND]');
  });

  it('refuses a database of another format version', async () => {
    const db = join(dir, 'db3');
    const raw = new Level<string, string>(db);
    await raw.put(DB_META_KEY, JSON.stringify({ version: 0 }));
    await raw.close();
    // Writers open the database and read its version; readers only read published files.
    const r = await cogr('index', 'import', '--db', db, '--from', jsonl('v.jsonl', [{ id: 'x', keywords: ['a'] }]));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^error\[DB_VERSION\]: database .*db3 has format version 0, expected 2/);
  });

  it('names the path of a database held by another process to a writer; readers go on beside it', async () => {
    const db = join(dir, 'db4');
    expect(
      (await cogr('index', 'import', '--db', db, '--from', jsonl('l.jsonl', [{ id: 'x', title: 'red shoe', keywords: ['shoe'] }]))).code,
    ).toBe(0);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/hold-db.ts', db], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout!.on('data', (d) => String(d).includes('ready') && resolve()));
    try {
      const r = await cogr('index', 'delete', '--db', db, '--generation', '0');
      expect(r.code).toBe(1);
      expect(r.err).toContain(`error[DB_LOCKED]: database ${db} is in use by another process`);
      const list = await cogr('index', 'list', '--db', db, '--json');
      expect(list.code).toBe(0);
      expect(JSON.parse(list.out).generations.map((g: { generation: number }) => g.generation)).toEqual([0]);
      const search = await cogr('index', 'search', '--db', db, '--keywords', 'shoe', '--json');
      expect(JSON.parse(search.out)).toMatchObject({ generation: 0, matched: 1 });
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
  });
});
