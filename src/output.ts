/**
 * What the commands write: stdout and stderr, and output files (`--html`, `--json <file>`,
 * `--out`, `--export`). A reader that closes the pipe (`cogr … | head -1`) ends the
 * command quietly, as git and ripgrep do; a full device is one line,
 * `error[DISK_FULL]: <path or stdout>: no space left on device`, never a stack or an
 * unhandled 'error' event.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { cogrError } from '../index/core/errors.ts';

function errnoCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A failed write of an output named `what` (a path, or "stdout"): DISK_FULL when the device is full, else the error itself. */
export function outputError(e: unknown, what: string): Error {
  if (errnoCode(e) === 'ENOSPC') return cogrError('DISK_FULL', `${what}: no space left on device`, { path: what }, e);
  return e instanceof Error ? e : new Error(String(e));
}

/** Write an output file, creating its folder; a full device is DISK_FULL naming the path. */
export function writeOutputFile(path: string, content: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  } catch (e) {
    throw outputError(e, path);
  }
}

let guarded = false;

/**
 * Errors of stdout and stderr never surface as an unhandled 'error' event. stdout: a
 * closed pipe (EPIPE) ends the process at once, quietly, with the exit code so far; a
 * full device is `error[DISK_FULL]: stdout: …` on stderr and exit code 1. stderr carries
 * only progress and logs: when it fails (its reader gone, its device full) they are
 * dropped and the command goes on. Installed once.
 */
export function guardStdio(): void {
  if (guarded) return;
  guarded = true;
  process.stdout.on('error', (e: unknown) => {
    const code = errnoCode(e);
    if (code === 'EPIPE') process.exit(Number(process.exitCode ?? 0));
    const line =
      code === 'ENOSPC'
        ? `error[DISK_FULL]: stdout: no space left on device\n`
        : `error: stdout: ${e instanceof Error ? e.message : String(e)}\n`;
    process.stderr.write(line);
    process.exit(1);
  });
  process.stderr.on('error', () => {
    // Logs and progress only: dropped.
  });
}
