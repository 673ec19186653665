/**
 * Bench results kept in git (bench/results/) are written in the repository's Prettier
 * format, so that a re-measurement leaves `npm test`'s format check passing: the same
 * values, laid out as `prettier --write` would lay them out.
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { format, resolveConfig } from 'prettier';

export async function writeResultJson(file: string, value: unknown): Promise<void> {
  const options = (await resolveConfig(file)) ?? {};
  writeFileSync(file, await format(JSON.stringify(value), { ...options, filepath: file }));
}

/** A bench result with what the machine was doing when it was measured: its load average and the time. */
export function stamped<T extends object>(result: T): T & { load_average: number[]; measured_at: string } {
  return {
    ...result,
    load_average: loadavg().map((l) => Math.round(l * 100) / 100),
    measured_at: new Date().toISOString(),
  };
}

/** A bench's result: written to `out` when given, then printed as one JSON line (`json`) or as the bench's text. */
export async function emitResult(result: unknown, out: string | undefined, json: boolean, text: () => string): Promise<void> {
  if (out !== undefined) await writeResultJson(out, result);
  process.stdout.write(json ? JSON.stringify(result) + '\n' : text());
}
