import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Level } from 'level';
import { DB_FORMAT_VERSION, DB_META_KEY, openDb } from '../../index/store/db.ts';
import { isCogrError } from '../../index/core/errors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-db-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function holdInChild(path: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/hold-db.ts', path], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (d) => (err += String(d)));
    child.stdout!.on('data', (d) => {
      if (String(d).includes('ready')) resolve(child);
    });
    child.on('exit', (code) => reject(new Error(`holder exited ${code}: ${err}`)));
  });
}

describe('openDb', () => {
  it('creates a database with a format version and JSON sublevels', async () => {
    const path = join(dir, 'db');
    const db = await openDb(path);
    expect(db.path).toBe(path);
    const sub = db.sublevel<{ a: number }>('cache');
    await sub.put('k1', { a: 1 });
    expect(await sub.get('k1')).toEqual({ a: 1 });
    expect(db.sublevel('cache')).toBe(sub);
    expect(JSON.parse((await db.level.get(DB_META_KEY))!).version).toBe(DB_FORMAT_VERSION);
    await db.close();
    const again = await openDb(path, { createIfMissing: false });
    expect(await again.sublevel<{ a: number }>('cache').get('k1')).toEqual({ a: 1 });
    await again.close();
  });

  it('refuses a missing database when createIfMissing is false', async () => {
    await expect(openDb(join(dir, 'nope'), { createIfMissing: false })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('refuses another format version, naming path, found and expected', async () => {
    const path = join(dir, 'db');
    const raw = new Level<string, string>(path);
    await raw.put(DB_META_KEY, JSON.stringify({ version: 99, createdAt: 'x' }));
    await raw.close();
    const e = await openDb(path).catch((x: unknown) => x);
    expect(isCogrError(e, 'DB_VERSION')).toBe(true);
    expect((e as Error).message).toContain(path);
    expect((e as Error).message).toContain('99');
    expect((e as Error).message).toContain(String(DB_FORMAT_VERSION));
    // The refused database is closed again: it can be opened raw.
    const check = new Level<string, string>(path);
    expect(JSON.parse((await check.get(DB_META_KEY))!).version).toBe(99);
    await check.close();
  });

  it('refuses a version-1 database (before analyzers) and says how to rebuild it', async () => {
    const path = join(dir, 'db');
    const raw = new Level<string, string>(path);
    await raw.put(DB_META_KEY, JSON.stringify({ version: 1, createdAt: 'x' }));
    await raw.close();
    const e = await openDb(path).catch((x: unknown) => x);
    expect(isCogrError(e, 'DB_VERSION')).toBe(true);
    expect((e as Error).message).toMatch(
      /format version 1, expected 2; refusing to read it: it was written by an older cogr; rebuild it: `cogr demo --fresh`/,
    );
  });

  it('refuses a non-empty LevelDB without a format record', async () => {
    const path = join(dir, 'db');
    const raw = new Level<string, string>(path);
    await raw.put('something', 'else');
    await raw.close();
    await expect(openDb(path)).rejects.toMatchObject({ code: 'DB_VERSION' });
  });

  it('reports a database held by another process as DB_LOCKED naming the path', async () => {
    const path = join(dir, 'db');
    const child = await holdInChild(path);
    try {
      const e = await openDb(path).catch((x: unknown) => x);
      expect(isCogrError(e, 'DB_LOCKED')).toBe(true);
      expect((e as Error).message).toContain(path);
      expect((e as Error).message).toContain('in use by another process');
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    // After the holder is gone the lock is free again.
    const db = await openDb(path);
    await db.close();
  });
});
