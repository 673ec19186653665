/**
 * `npm run bench -- <name> [args...]` runs one benchmark: a module below exporting
 * `run(args: string[]): Promise<void>`. Every benchmark measures ratios against a
 * baseline run in the same process (tinybench), or against bare Node (`cli`), and prints
 * a table, or one JSON object on stdout with `--json`.
 */
interface BenchModule {
  run(args: string[]): Promise<void>;
}

const BENCHMARKS: Record<string, () => Promise<BenchModule>> = {
  index: () => import('./index.ts'),
  rewards: () => import('./rewards.ts'),
  serve: () => import('./serve.ts'),
  policy: () => import('./policy.ts'),
  drift: () => import('./drift.ts'),
  baseline: () => import('./baseline.ts'),
  cli: () => import('./cli.ts'),
  crosscheck: () => import('./crosscheck.ts'),
  evolve: () => import('./evolve.ts'),
  cut: () => import('./cut.ts'),
  catalog: () => import('./catalog.ts'),
  llm: () => import('./llm.ts'),
  embeddings: () => import('./embeddings.ts'),
  static: () => import('./static.ts'),
};

const [name, ...args] = process.argv.slice(2);
const load = name === undefined ? undefined : BENCHMARKS[name];
if (!load) {
  process.stderr.write(`usage: npm run bench -- <${Object.keys(BENCHMARKS).join('|')}> [--json] [options]\n`);
  process.exit(name ? 2 : 0);
}
await (await load()).run(args);
