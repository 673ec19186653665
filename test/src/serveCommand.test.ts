/**
 * End to end: `cogr serve` in its own process, while another process (the test)
 * commits a new generation to the same database (the server must not hold the
 * LevelDB lock), then `POST /v1/admin/reload` switches to it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer as createNetServer } from 'node:net';
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
    await commitGeneration(
      dbPath,
      'item',
      [
        { id: 'x1', self: 'Red Shoes', keywords: ['running shoes', 'red'] },
        { id: 'x2', self: 'Wool Hat', keywords: ['hat', 'wool'] },
        { id: 'x3', self: 'Rain Jacket', keywords: ['jacket'] },
      ],
      0,
    );

    child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--generator', 'none', '--token', 't0k'], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
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
    await commitGeneration(
      dbPath,
      'item',
      [
        { id: 'x1', self: 'Red Shoes', keywords: ['sneakers'] },
        { id: 'x4', self: 'Red Sneakers', keywords: ['sneakers', 'red'] },
        { id: 'x2', self: 'Wool Hat', keywords: ['hat'] },
      ],
      1,
    );

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
  it('start-up refusals are one line: no database (with a hint), an empty token, a port in use', async () => {
    const run = (args: string[], extraEnv: Record<string, string> = {}) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        execFile(process.execPath, [BIN, ...args], { env: { ...env, ...extraEnv } }, (err, _out, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
        );
      });
    const noDb = await run(['serve', '--db', join(tmp.dir, 'nothing-here'), '--port', '0']);
    expect(noDb.code).toBe(1);
    expect(noDb.stderr).toMatch(
      /^error\[NOT_FOUND\]: no database at .*nothing-here: run `cogr demo` \(or `cogr evolve`, `cogr index import`\) first, or point --db at a database\n$/,
    );

    const dbPath = join(tmp.dir, 'home', 'db'); // committed by the test above
    const empty = await run(['serve', '--port', '0', '--token', '']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toBe(
      'error[INVALID_ARGUMENT]: --token: the token is empty; give a token, or leave the flag unset to run without one\n',
    );
    const emptyEnv = await run(['reward-server', '--port', '0'], { COGR_TOKEN: '' });
    expect(emptyEnv.code).toBe(2);
    expect(emptyEnv.stderr).toMatch(/^error\[INVALID_ARGUMENT\]: COGR_TOKEN: the token is empty/);

    const taken = createNetServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (taken.address() as { port: number }).port;
      const busy = await run(['serve', '--db', dbPath, '--port', String(port), '--generator', 'none']);
      expect(busy.code).toBe(1);
      const lines = busy.stderr.trimEnd().split('\n');
      expect(lines[lines.length - 1]).toBe(
        `error[ADDRESS_UNAVAILABLE]: cogr serve cannot listen on 127.0.0.1:${port}: the address is already in use (another server runs there: stop it, or choose another --port; --port 0 takes any free one)`,
      );
      expect(busy.stderr).not.toMatch(/^\s+at /m);
      expect(busy.stderr).not.toMatch(/Warning/); // e.g. a fastify deprecation of an option we pass
    } finally {
      await new Promise<void>((r) => taken.close(() => r()));
    }
  });
});
