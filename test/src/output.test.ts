/**
 * What the CLI writes, in child processes (the compiled `cogr`): a reader that closes the
 * pipe ends the command quietly; a full device (/dev/full) as stdout or as an output file
 * is one `error[DISK_FULL]` line naming it, without a stack or an unhandled 'error' event.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
let dir = '';

function run(
  args: string[],
  stdout: 'pipe' | number,
  onFirstOutput?: (child: ReturnType<typeof spawn>) => void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/cogr.mjs'), ...args], {
      cwd: dir,
      env: { ...process.env, COGR_HOME: join(dir, 'home') },
      stdio: ['ignore', stdout, 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d.toString()));
    if (child.stdout && onFirstOutput) child.stdout.once('data', () => onFirstOutput(child));
    child.on('exit', (code, signal) => res({ code, signal, stderr }));
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-output-'));
  // Enough inputs for megabytes of output: more than a pipe holds once its reader is gone.
  const lines = Array.from({ length: 3000 }, (_, i) =>
    JSON.stringify({
      id: `i${i}`,
      title: `red running shoes model ${i}`,
      text: `lightweight red running shoes with foam sole, model ${i}, for trail and road`,
    }),
  );
  writeFileSync(join(dir, 'items.jsonl'), lines.join('\n') + '\n');
  writeFileSync(
    join(dir, 'entries.jsonl'),
    Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: `i${i}`, title: `item ${i}`, keywords: ['red', `k${i}`] })).join('\n') + '\n',
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const generate = ['generate', '--side', 'item', '--from', 'items.jsonl', '--samples', '20', '--temperature', '1'];

describe('a closed stdout', () => {
  it('ends the command quietly (cogr … | head -1)', { timeout: 120_000 }, async () => {
    const r = await run(generate, 'pipe', (child) => child.stdout!.destroy());
    expect(r.stderr).toBe('');
    expect(r.signal).toBeNull();
    expect(r.code).toBe(0);
  });
});

describe('a closed stderr', () => {
  it('drops the logs and the command goes on', { timeout: 120_000 }, async () => {
    const r = await new Promise<{ code: number | null; stdout: string }>((res) => {
      const child = spawn(
        process.execPath,
        [join(ROOT, 'bin/cogr.mjs'), 'index', 'import', '--side', 'item', '--from', 'entries.jsonl', '--db', join(dir, 'stderr-db')],
        {
          cwd: dir,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      child.stderr!.destroy(); // before the command logs its commit
      let stdout = '';
      child.stdout!.on('data', (d) => (stdout += d.toString()));
      child.on('exit', (code) => res({ code, stdout }));
    });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+$/); // the generation number
  });
});

describe.skipIf(!existsSync('/dev/full'))('a full device', () => {
  it('as stdout is one error[DISK_FULL] line naming stdout, exit 1', { timeout: 120_000 }, async () => {
    const fd = openSync('/dev/full', 'w');
    try {
      const r = await run(generate, fd);
      expect(r.stderr).toBe('error[DISK_FULL]: stdout: no space left on device\n');
      expect(r.code).toBe(1);
    } finally {
      closeSync(fd);
    }
  });

  it('as an output file (--html, --json) is one error[DISK_FULL] line naming the path', { timeout: 120_000 }, async () => {
    const imported = await run(['index', 'import', '--side', 'item', '--from', 'entries.jsonl', '--label', 'x'], 'pipe');
    expect(imported.code).toBe(0);
    for (const flag of ['--html', '--json']) {
      const r = await run(['drift', flag, '/dev/full'], 'pipe');
      expect(r.stderr, flag).toBe('error[DISK_FULL]: /dev/full: no space left on device\n');
      expect(r.code).toBe(1);
    }
  });
});
