/**
 * The `cogr` command. The commands are listed below, each with the module that
 * implements it (src/commands/, exporting `register(program)`); only the module of the
 * command being run is imported, so `cogr --help` or `cogr index search` does not load
 * the HTTP server, the LLM client or the worker pool. Errors become one clear line on
 * stderr and a non-zero exit code; a closed stdout ends the command quietly, a full one
 * is `error[DISK_FULL]` (output.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { isCogrError, levelError, systemError } from '../index/core/errors.ts';
import { packageRoot } from '../index/core/paths.ts';
import { guardStdio } from './output.ts';

export type Register = (program: Command) => void;

interface CommandModule {
  register: Register;
}

interface CommandEntry {
  name: string;
  description: string;
  load: () => Promise<CommandModule>;
}

/** Every command, in the order `cogr --help` lists them. Several commands may share a module. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    name: 'demo',
    description:
      'the main job: SFT and co-evolution rounds with the embedded policy on shipped data, then a table per half-round beside BM25',
    load: () => import('./commands/evolve.ts'),
  },
  {
    name: 'evolve',
    description: 'k-fold evaluation of the co-evolution: one resumable run per fold, BM25 on the same folds',
    load: () => import('./commands/evolve.ts'),
  },
  {
    name: 'datasets',
    description: 'list the shipped and registered datasets (items, queries, judged queries, mean relevant per judged query)',
    load: () => import('./commands/datasets.ts'),
  },
  {
    name: 'audit',
    description: "are a run's keywords language or addresses: what its query and item keywords match, and how they relate to the query",
    load: () => import('./commands/audit.ts'),
  },
  {
    name: 'oracle',
    description: 'ceiling analysis on the stored k-fold run: oracle query side, oracle item side, perfectly ordered served set',
    load: () => import('./commands/oracle.ts'),
  },
  { name: 'baseline', description: 'reference retrieval baselines', load: () => import('./commands/baseline.ts') },
  {
    name: 'sft',
    description: 'SFT phase (Algorithm 1): base item keywords, query targets, train and save both embedded policies as round 0',
    load: () => import('./commands/sft.ts'),
  },
  {
    name: 'generate',
    description: 'sample keyword sets for the inputs of a JSONL file ({"id", "text", "title"?} per line)',
    load: () => import('./commands/generate.ts'),
  },
  {
    name: 'rollouts',
    description: 'write GRPO rollouts (prompts, completions, rewards, reasons, advantages, group ids) of one round as JSONL',
    load: () => import('./commands/rollouts.ts'),
  },
  {
    name: 'import-generation',
    description: 'commit keywords produced by an external model as a new generation of the run and evaluate it',
    load: () => import('./commands/rollouts.ts'),
  },
  {
    name: 'llm',
    description: 'the real model: install SmolLM2-135M-Instruct (llm install) and serve it as an OpenAI-compatible endpoint (llm serve)',
    load: () => import('./commands/llm.ts'),
  },
  {
    name: 'embeddings',
    description:
      "the embeddings server: install its venv (embeddings install) and serve all-MiniLM-L6-v2 as OpenAI's /v1/embeddings on loopback (embeddings serve)",
    load: () => import('./commands/embeddings.ts'),
  },
  {
    name: 'reward-server',
    description: 'serve CoGR rewards against frozen generations (OpenRLHF POST /get_reward and JSON endpoints)',
    load: () => import('./commands/rewardServer.ts'),
  },
  {
    name: 'serve',
    description: 'serve keyword retrieval of a trained round over HTTP (OpenAPI at /openapi.json, docs at /docs)',
    load: () => import('./commands/serve.ts'),
  },
  {
    name: 'export',
    description:
      'publish a stored item generation into OpenSearch behind an alias (export opensearch: strict mapping, bulk load, atomic swap)',
    load: () => import('./commands/export.ts'),
  },
  {
    name: 'drift',
    description:
      'vocabulary drift across keyword-index generations: metrics per side and generation, alignment, churn, added/dropped keywords',
    load: () => import('./commands/drift.ts'),
  },
  {
    name: 'verify',
    description:
      'check every generation file, the run state and the policies against their digests and the database; --repair rewrites them',
    load: () => import('./commands/verify.ts'),
  },
  {
    name: 'eval',
    description: "cogr's metrics of a TREC run file against a dataset's judgements",
    load: () => import('./commands/eval.ts'),
  },
  {
    name: 'index',
    description: 'the keyword inverted index: import generations, search, explain, list, diff, delete',
    load: () => import('./commands/index.ts'),
  },
  {
    name: 'items',
    description:
      'the served catalog: add, update and delete items, set keywords by hand, preview their effect, fold the writes into a dataset',
    load: () => import('./commands/items.ts'),
  },
];

/** The command an argument vector runs (`cogr help <command>` counts as that command), if any. */
export function requestedCommand(argv: readonly string[]): CommandEntry | undefined {
  const args = argv.slice(2).filter((a) => !a.startsWith('-'));
  const name = args[0] === 'help' ? args[1] : args[0];
  return COMMANDS.find((c) => c.name === name);
}

function version(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The program for an argument vector: the requested command registered by its module,
 * every other command as a name and description (enough for the command list of --help);
 * the descriptions of the top-level commands are the table's.
 * Without argv, every module is loaded (every command complete).
 */
export async function buildProgram(argv?: readonly string[]): Promise<Command> {
  const program = new Command();
  program
    .name('cogr')
    .description('Keyword co-evolution retrieval: keyword generators, keyword index, rewards and GRPO rounds.')
    .version(version(), '-V, --version', 'print the cogr version')
    .showHelpAfterError()
    .exitOverride();
  const wanted = argv === undefined ? COMMANDS : [requestedCommand(argv)].filter((c): c is CommandEntry => c !== undefined);
  const modules = new Set<CommandModule>();
  for (const c of wanted) modules.add(await c.load());
  for (const m of modules) m.register(program);
  const registered = new Map(program.commands.map((c) => [c.name(), c]));
  for (const c of COMMANDS) (registered.get(c.name) ?? program.command(c.name)).description(c.description);
  // List the commands in the table's order, whichever were registered in full.
  const order = new Map(COMMANDS.map((c, i) => [c.name, i]));
  (program.commands as Command[]).sort((a, b) => (order.get(a.name()) ?? 0) - (order.get(b.name()) ?? 0));
  return program;
}

export async function main(argv: string[]): Promise<void> {
  guardStdio();
  try {
    const program = await buildProgram(argv);
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    // A file-system or LevelDB error that no layer named is named here (path, no stack).
    const named = isCogrError(e) ? e : (levelError(e) ?? systemError(e));
    if (named) {
      process.stderr.write(`error[${named.code}]: ${named.message}\n`);
      process.exitCode = named.code === 'INVALID_ARGUMENT' ? 2 : 1;
      return;
    }
    const err = e as Error;
    process.stderr.write(`error: ${err?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  }
}
