/**
 * `npm run docs` writes the generated parts of the documentation from stored data;
 * `npm run docs -- --check` only compares them with the files and exits 1 naming every file
 * that differs (test/scripts/docs.test.ts makes the same comparison in `npm test`).
 *
 * Nothing here is typed by hand: every figure comes from a stored JSON file, printed with
 * the command that re-measures it.
 *
 * Sources:
 *   docs/results/<name>.json   what `npx cogr evolve --dataset <d> --folds <k> [run options] --json`
 *                              prints (scripts/docs/sources.ts EvolveJsonSchema: the fields read here; the
 *                              type check ties it to src/commands/evolve.ts summarizeFolds)
 *   docs/results/demo.json     what `npx cogr demo [run options] --json` prints (DemoJsonSchema)
 *   docs/results/audit/<d>.json, examples/<d>-{before,after}.json   what `npx cogr audit --json` prints
 *                              (AuditJsonSchema), after `cogr demo --dataset <d>` (examples: of the queries in
 *                              examples/<d>.jsonl, before with the open vocabulary, after with the shared one)
 *   docs/results/new-items/<d>.json   `npx cogr evolve … --new-items <f> --json` (NewItemsJsonSchema)
 *   docs/results/oracle/<d>.json   `npx cogr oracle --dataset <d> --folds <k> --json` (OracleJsonSchema)
 *   bench/results/*.json       `npm run bench -- evolve …` (bench/evolveChart.ts EvolveBenchResult)
 *   bench/results/llm-<d>.json `npm run bench -- llm --dataset <d>` (bench/llm.ts; LlmBenchSchema)
 *   data/expected-quality.json the BM25 figures `cogr baseline bm25 --check` holds a run to
 *   the OpenAPI documents of `cogr serve` and `cogr reward-server` (src/server/)
 *
 * Targets:
 *   blocks between `<!-- docs:<name>:start -->` and `<!-- docs:<name>:end -->` in README.md
 *   and docs/*.md (BLOCKS below: every block must be placed once, every marker must name a
 *   block), and the whole files docs/http-api.md (the OpenAPI documents), docs/cli.md (the
 *   commands, their options and defaults, from the CLI's own definitions) and
 *   docs/results/f1.svg (held-out F1 per step of the stored runs).
 *
 * The parts: docs/sources.ts (what is read, and the commands that re-measure it),
 * docs/results.ts (the tables and the chart), docs/reference.ts (the HTTP and command
 * references), docs/markdown.ts (formatting).
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { packageRoot } from '../index/core/paths.ts';
import { cliMarkdown, httpApiMarkdown } from './docs/reference.ts';
import {
  auditBlock,
  benchBlock,
  chartSvg,
  demoBlock,
  examplesBlock,
  expectedBlock,
  llmBlock,
  newItemsBlock,
  adoptionBlock,
  oracleBlock,
  resultsBlock,
  seedsBlock,
  denseBlock,
  staticBlock,
  judgeBlock,
  cutBlock,
  resultsDetailBlock,
} from './docs/results.ts';
import { readSources, type Sources } from './docs/sources.ts';

// ---------------------------------------------------------------------------
// Putting the blocks in place.

type BlockMaker = (s: Sources, root: string) => string;

/** Every generated block, by the name its markers carry. */
export const BLOCKS: Record<string, BlockMaker> = {
  results: (s) => resultsBlock(s),
  'results-detail': (s) => resultsDetailBlock(s),
  demo: (s) => demoBlock(s),
  'bm25-expected': (_s, root) => expectedBlock(root),
  'bench-evolve': (s) => benchBlock(s),
  audit: (s) => auditBlock(s),
  'keyword-examples': (s) => examplesBlock(s),
  'new-items': (s) => newItemsBlock(s),
  adoption: (s) => adoptionBlock(s),
  llm: (s) => llmBlock(s),
  oracle: (s) => oracleBlock(s),
  seeds: (s) => seedsBlock(s),
  dense: (s) => denseBlock(s),
  static: (s) => staticBlock(s),
  judge: (s) => judgeBlock(s),
  cut: (s) => cutBlock(s),
};

const MARKER = /<!-- docs:([a-z0-9-]+):(start|end) -->/g;

/**
 * A markdown file with each of its blocks' content replaced by `made(name)`; throws on a
 * marker without its pair or nested markers. Returns the names it placed.
 */
export function fillBlocks(text: string, made: (name: string) => string, file: string): { text: string; names: string[] } {
  const names: string[] = [];
  let out = '';
  let last = 0;
  let open: { name: string; at: number } | null = null;
  for (const m of text.matchAll(MARKER)) {
    const [whole, name, kind] = m;
    const at = m.index;
    if (kind === 'start') {
      if (open) throw new Error(`${file}: docs:${name}:start inside docs:${open.name}`);
      open = { name, at: at + whole.length };
      out += text.slice(last, at + whole.length);
    } else {
      if (!open || open.name !== name) throw new Error(`${file}: docs:${name}:end without its start`);
      out += `\n${made(name)}\n`;
      last = at;
      names.push(name);
      open = null;
    }
  }
  if (open) throw new Error(`${file}: docs:${open.name}:start without its end`);
  return { text: out + text.slice(last), names };
}

/** The pages written whole. */
const GENERATED_PAGES = ['docs/http-api.md', 'docs/cli.md'];

/** The markdown files that may hold blocks. */
function markdownFiles(root: string): string[] {
  const docs = join(root, 'docs');
  return [
    'README.md',
    ...(existsSync(docs)
      ? readdirSync(docs)
          .filter((f) => f.endsWith('.md') && !GENERATED_PAGES.includes(`docs/${f}`))
          .sort()
          .map((f) => `docs/${f}`)
      : []),
  ];
}

/** Every generated file's expected content, by path relative to the root. */
export async function generateDocs(root = packageRoot()): Promise<Map<string, string>> {
  const sources = readSources(root);
  const cache = new Map<string, string>();
  const made = (name: string) => {
    const maker = BLOCKS[name];
    if (!maker) throw new Error(`no generated block is called ${JSON.stringify(name)} (known: ${Object.keys(BLOCKS).join(', ')})`);
    if (!cache.has(name)) cache.set(name, maker(sources, root));
    return cache.get(name)!;
  };
  const out = new Map<string, string>();
  const placed: string[] = [];
  for (const file of markdownFiles(root)) {
    const { text, names } = fillBlocks(readFileSync(join(root, file), 'utf8'), made, file);
    placed.push(...names);
    out.set(file, text);
  }
  for (const name of Object.keys(BLOCKS)) {
    const n = placed.filter((x) => x === name).length;
    if (n !== 1) throw new Error(`block docs:${name} is placed ${n} times (README.md and docs/*.md); it must be placed once`);
  }
  out.set('docs/http-api.md', httpApiMarkdown());
  out.set('docs/cli.md', await cliMarkdown());
  out.set('docs/results/f1.svg', chartSvg(sources));
  return out;
}

/** The generated files that differ from the ones in `root`. */
export function staleFiles(root: string, generated: Map<string, string>): string[] {
  return [...generated]
    .filter(([file, text]) => !existsSync(join(root, file)) || readFileSync(join(root, file), 'utf8') !== text)
    .map(([f]) => f);
}

async function main(args: string[]): Promise<void> {
  const root = packageRoot();
  const generated = await generateDocs(root);
  const stale = staleFiles(root, generated);
  if (args.includes('--check')) {
    if (stale.length > 0) {
      process.stderr.write(`generated documentation out of date (run npm run docs): ${stale.join(', ')}\n`);
      process.exitCode = 1;
    }
    return;
  }
  for (const f of stale) writeFileSync(join(root, f), generated.get(f)!);
  process.stdout.write(stale.length ? `wrote ${stale.join(', ')}\n` : 'every generated file is up to date\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
