/**
 * End to end: `cogr serve` in its own process, while another process (the test)
 * commits a new generation to the same database (the server must not hold the
 * LevelDB lock), then `POST /v1/admin/reload` switches to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { commitGeneration, tempDir } from './_serverFixture.ts';

const BIN = fileURLToPath(new URL('../../bin/cogr.mjs', import.meta.url));
const tmp = tempDir('cogr-serve-cli-');
const env = { ...process.env, COGR_HOME: join(tmp.dir, 'home') };
let child: ChildProcess | null = null;

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
  }
  tmp.cleanup();
});

describe('cogr serve', () => {
  it('serves, lets another process commit, reloads, and stops on SIGTERM', async () => {
    const dbPath = join(tmp.dir, 'home', 'db');
    await commitGeneration(dbPath, 'item', [
      { id: 'x1', self: 'Red Shoes', keywords: ['running shoes', 'red'] },
      { id: 'x2', self: 'Wool Hat', keywords: ['hat', 'wool'] },
      { id: 'x3', self: 'Rain Jacket', keywords: ['jacket'] },
    ], 0);

    child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--generator', 'none', '--token', 't0k'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start: ${stderr}`)), 30_000);
      child!.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        const m = /listening address=(http:\/\/127\.0\.0\.1:\d+)/.exec(stderr);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child!.once('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
    });

    const s1 = (await (await fetch(`${base}/v1/search?q=red+shoes`)).json()) as any;
    expect(s1.generation).toBe(0);
    expect(s1.items.map((h: any) => h.id)).toEqual(['x1']);
    expect(s1.fallback.reason).toBe('no_generator');

    // Another process (this test process) commits while the server runs.
    await commitGeneration(dbPath, 'item', [
      { id: 'x1', self: 'Red Shoes', keywords: ['sneakers'] },
      { id: 'x4', self: 'Red Sneakers', keywords: ['sneakers', 'red'] },
      { id: 'x2', self: 'Wool Hat', keywords: ['hat'] },
    ], 1);

    expect((await fetch(`${base}/v1/admin/reload`, { method: 'POST' })).status).toBe(401);
    const r = (await (await fetch(`${base}/v1/admin/reload`, { method: 'POST', headers: { authorization: 'Bearer t0k' } })).json()) as any;
    expect(r).toMatchObject({ swapped: true, item: { generation: 1, previous: 0 } });
    const s2 = (await (await fetch(`${base}/v1/search?q=sneakers`)).json()) as any;
    expect(s2.generation).toBe(1);
    expect(s2.items.map((h: any) => h.id).sort()).toEqual(['x1', 'x4']);

    child.kill('SIGTERM');
    const code = await new Promise<number | null>((res) => child!.once('exit', (c) => res(c)));
    expect(code).toBe(0);
  });
});
