import type { Command } from 'commander';
import { readFileSync } from 'node:fs';

export function register(program: Command): void {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  program.version(pkg.version, '-V, --version', 'print the cogr version');
}
