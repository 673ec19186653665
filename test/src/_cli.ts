/**
 * Running `cogr` in process for CLI tests: the real command table and parser (src/cli.ts),
 * stdout and stderr captured, the exit code read back and reset.
 */
import { vi } from 'vitest';
import { main } from '../../src/cli.ts';

export async function cogr(...args: string[]): Promise<{ out: string; err: string; code: number }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  process.exitCode = 0;
  try {
    await main(['node', 'cogr', ...args]);
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
  const code = Number(process.exitCode ?? 0);
  process.exitCode = 0;
  return { out, err, code };
}
