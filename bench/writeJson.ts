/**
 * Bench results kept in git (bench/results/) are written in the repository's Prettier
 * format, so that a re-measurement leaves `npm test`'s format check passing: the same
 * values, laid out as `prettier --write` would lay them out.
 */
import { writeFileSync } from 'node:fs';
import { format, resolveConfig } from 'prettier';

export async function writeResultJson(file: string, value: unknown): Promise<void> {
  const options = (await resolveConfig(file)) ?? {};
  writeFileSync(file, await format(JSON.stringify(value), { ...options, filepath: file }));
}
