/**
 * `npm run bench -- <name> [args...]` runs bench/<name>.ts, whose module exports
 * `run(args: string[]): Promise<void>`. Every benchmark measures ratios against a
 * baseline run in the same process (tinybench) and prints a table, or one JSON object
 * on stdout with `--json`.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = dirname(fileURLToPath(import.meta.url));
const names = readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts' && !f.startsWith('_'))
  .map((f) => f.slice(0, -3))
  .sort();
const [name, ...args] = process.argv.slice(2);
if (!name || !names.includes(name)) {
  process.stderr.write(`usage: npm run bench -- <${names.join('|')}> [--json] [options]\n`);
  process.exit(name ? 2 : 0);
}
const mod = (await import(pathToFileURL(join(dir, `${name}.ts`)).href)) as { run: (args: string[]) => Promise<void> };
await mod.run(args);
