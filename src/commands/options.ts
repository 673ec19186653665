/**
 * The options every command shares, declared and parsed in one place: a bad value is
 * reported the same way everywhere, `error[INVALID_ARGUMENT]: --flag: expected …, got "x"`,
 * and a default shown in help is the one used (index/core/defaults.ts).
 */
import { join } from 'node:path';
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import type { Side } from '../../index/core/types.ts';
import { cogrHome } from '../home.ts';
import { RUN_OPTIONS, type RunFlag, type RunOption } from '../run/config.ts';

export interface NumberFlagOptions {
  integer?: boolean;
  min?: number;
  max?: number;
}

/** A numeric flag (undefined when not given). */
export function parseNumberFlag(flag: string, value: string | undefined, opts: NumberFlagOptions = {}): number | undefined {
  if (value === undefined) return undefined;
  const s = value.trim();
  const n = Number(s);
  const bad =
    s === '' ||
    !Number.isFinite(n) ||
    (opts.integer === true && (!/^-?\d+$/.test(s) || !Number.isSafeInteger(n))) ||
    // Decimal notation only (Number() also reads "0x1", "0b1", "0o7" and "Infinity").
    !/^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s) ||
    (opts.min !== undefined && n < opts.min) ||
    (opts.max !== undefined && n > opts.max);
  if (bad) {
    const kind = opts.integer ? 'an integer' : 'a number';
    const range =
      opts.min !== undefined && opts.max !== undefined
        ? ` in [${opts.min}, ${opts.max}]`
        : opts.min !== undefined
          ? ` ≥ ${opts.min}`
          : opts.max !== undefined
            ? ` ≤ ${opts.max}`
            : '';
    throw cogrError('INVALID_ARGUMENT', `${flag}: expected ${kind}${range}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** An integer flag in [min, max] (undefined when not given). */
export function parseIntFlag(flag: string, value: string | undefined, min: number, max?: number): number | undefined {
  return parseNumberFlag(flag, value, { integer: true, min, ...(max !== undefined ? { max } : {}) });
}

/** One of a fixed list of words. */
export function parseChoice<T extends string>(flag: string, value: string, choices: readonly T[]): T {
  if (!(choices as readonly string[]).includes(value)) {
    const list =
      choices.length === 2 ? `${choices[0]} or ${choices[1]}` : `${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1]}`;
    throw cogrError('INVALID_ARGUMENT', `${flag}: expected ${list}, got ${JSON.stringify(value)}`);
  }
  return value as T;
}

/** `--side item|query`. */
export function parseSide(flag: string, value: string): Side {
  return parseChoice(flag, value, ['item', 'query'] as const);
}

/** A round or generation number, or "latest" (undefined counts as latest). */
export function parseLatestOr(flag: string, value: string | undefined): number | 'latest' {
  if (value === undefined || value === 'latest') return 'latest';
  if (!/^\d+$/.test(value.trim()))
    throw cogrError('INVALID_ARGUMENT', `${flag}: expected "latest" or an integer ≥ 0, got ${JSON.stringify(value)}`);
  return Number(value.trim());
}

// ---- option groups ---------------------------------------------------------------

/** The project database: `--db` or $COGR_HOME/db. */
export function dbPath(db: string | undefined): string {
  return db ?? join(cogrHome(), 'db');
}

export function withDbOption(cmd: Command, what = 'the project database'): Command {
  return cmd.option('--db <dir>', `${what} (default $COGR_HOME/db)`);
}

export interface DatasetFlags {
  dataset: string;
  format?: string;
}

/** `--dataset <name|path>` (required unless a default is said in `help`) and `--format`. */
export function withDatasetOptions(cmd: Command, help?: string): Command {
  const what = 'a shipped or registered dataset name, or a dataset folder';
  return (
    help === undefined
      ? cmd.requiredOption('--dataset <name|path>', what)
      : cmd.option('--dataset <name|path>', `${what} (default ${help})`)
  ).option('--format <format>', 'dataset format: smart | trec | beir | wands | jsonl (default: detected)');
}

export interface LlmFlags {
  baseUrl?: string;
  model?: string;
  apiKey?: string;
  llmTimeout?: string;
}

/**
 * An OpenAI-compatible endpoint: flags first, then OPENAI_BASE_URL, COGR_MODEL,
 * OPENAI_API_KEY, COGR_LLM_TIMEOUT_MS (generators/llm.ts llmOptionsFromEnv reads them).
 */
export function withLlmOptions(cmd: Command): Command {
  return cmd
    .option('--base-url <url>', 'openai: endpoint base URL (default $OPENAI_BASE_URL)')
    .option('--model <name>', 'openai: model name (default $COGR_MODEL)')
    .option('--api-key <key>', 'openai: API key (default $OPENAI_API_KEY)')
    .option(
      '--llm-timeout <ms>',
      `openai: deadline of one attempt in milliseconds, the whole answer counted from sending, then it is retried (default $COGR_LLM_TIMEOUT_MS, else ${DEFAULTS.llm.timeoutMs})`,
    );
}

export interface ServerFlags {
  db?: string;
  round?: string;
  port: string;
  host: string;
  token?: string;
  watch?: string;
  bodyLimit?: string;
  requestTimeout?: string;
  maxConnections?: string;
}

/** What both servers take: database, round, address, token, watch interval and body limit. */
export function withServerOptions(
  cmd: Command,
  defaults: { port: number; host: string; bodyLimit: number },
  roundHelp: string,
  tokenHelp: string,
  defaultRound: 'best' | 'latest' = 'latest',
): Command {
  return withDbOption(cmd)
    .option(
      '--round <round>',
      `${roundHelp}: "best" (the co-evolution run's best step on its dev queries; the latest without a run), "latest" or a number`,
      defaultRound,
    )
    .option('--port <port>', 'TCP port (0 = any free port)', String(defaults.port))
    .option('--host <host>', 'interface to bind (loopback by default)', defaults.host)
    .option('--token <token>', `bearer token for ${tokenHelp} (default $COGR_TOKEN)`)
    .option('--watch <seconds>', 'poll for newly committed generations every this many seconds')
    .option('--body-limit <bytes>', `largest request body (default ${defaults.bodyLimit})`)
    .option(
      '--request-timeout <ms>',
      `a request (headers and body) not received within this is answered 408 and closed (default ${DEFAULTS.http.requestTimeoutMs})`,
    )
    .option(
      '--max-connections <n>',
      `open connections at most (default ${DEFAULTS.http.maxConnections}, or ulimit -n − ${DEFAULTS.http.fdReserve} when lower); beyond it the longest-waiting connection without a request being handled is closed`,
    );
}

/**
 * The bearer token: `--token`, else $COGR_TOKEN, else none (the admin endpoints open, on
 * loopback by default). An empty or blank token is refused rather than read as "none":
 * `--token ''` or `COGR_TOKEN=$UNSET_VARIABLE` must not leave them open silently.
 */
export function parseToken(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const [from, value] = flag !== undefined ? ['--token', flag] : ['COGR_TOKEN', env.COGR_TOKEN];
  if (value !== undefined && value.trim() === '') {
    throw cogrError(
      'INVALID_ARGUMENT',
      `${from}: the token is empty; give a token, or leave ${from === '--token' ? 'the flag' : 'the variable'} unset to run without one`,
    );
  }
  return value;
}

/** The parsed common server flags. */
export function parseServerFlags(flags: ServerFlags, maxBody: number) {
  return {
    dbPath: dbPath(flags.db),
    round: flags.round === 'best' ? ('best' as const) : parseLatestOr('--round', flags.round),
    port: parseIntFlag('--port', flags.port, 0, 65535)!,
    host: flags.host,
    token: parseToken(flags.token),
    watch: parseIntFlag('--watch', flags.watch, 1, 86_400),
    bodyLimit: parseIntFlag('--body-limit', flags.bodyLimit, 256, maxBody),
    connections: {
      ...(flags.requestTimeout !== undefined
        ? { requestTimeoutMs: parseIntFlag('--request-timeout', flags.requestTimeout, 1, 3_600_000) }
        : {}),
      ...(flags.maxConnections !== undefined
        ? { maxConnections: parseIntFlag('--max-connections', flags.maxConnections, 1, 1_000_000) }
        : {}),
    },
  };
}

export type { EmbeddingsFlags } from '../embeddings/dense.ts';

/** What `--embeddings` is for on a command that loads a stored run's planner (withEmbeddingsOptions' `what`). */
/** What `--embeddings auto` does, in the help of every command that takes the flag. */
export const EMBEDDINGS_AUTO_HELP =
  'the shipped server (all-MiniLM-L6-v2 in the venv cogr embeddings install makes, installed on first use) started for this command on a free loopback port and stopped with it; or static: the built-in encoder (all-MiniLM-L6-v2 distilled into a token table shipped with cogr: no venv, no install) served the same way';

export const RUN_EMBEDDINGS_HELP =
  "a run fitted with embeddings: the endpoint serving its model (the planner's relevance features and keyword rule); default, for a run of all-MiniLM-L6-v2 or of the built-in encoder: auto or static";

/** `--embeddings URL` (an OpenAI-compatible /v1/embeddings API) and its model, deadline and cache. */
export function withEmbeddingsOptions(cmd: Command, what: string): Command {
  return cmd
    .option(
      '--embeddings <url>',
      `${what}: the base URL of an OpenAI-compatible embeddings API, e.g. http://127.0.0.1:8001/v1 (cogr embeddings serve), or auto: ${EMBEDDINGS_AUTO_HELP}`,
    )
    .option('--embeddings-model <name>', 'the embeddings model to ask for (default: the first one the endpoint lists)')
    .option(
      '--embeddings-timeout <ms>',
      `deadline of one embeddings request in milliseconds (default $COGR_EMBEDDINGS_TIMEOUT_MS, else ${DEFAULTS.embeddings.timeoutMs})`,
    )
    .option('--embeddings-cache <dir>', 'the database caching the vectors by model and text digest (default $COGR_HOME/db)');
}

// ---- run options (src/run/config.ts RUN_OPTIONS) --------------------------------

/** commander's attribute of a flag: `--relevance-query-tf <yes|no>` → `relevanceQueryTf`. */
function flagAttribute(flag: string): string {
  return flag
    .split(' ')[0]
    .replace(/^--/, '')
    .replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The flags of every run option of the table that `command` takes, in the table's order. */
export function addRunFlags(cmd: Command, command: 'demo' | 'evolve'): Command {
  for (const o of Object.values(RUN_OPTIONS) as RunOption[]) {
    if (o.cli && (o.cli.only === undefined || o.cli.only === command)) cmd.option(o.cli.flag, o.cli.help);
  }
  return cmd;
}

function runFlagValue(cli: RunFlag, value: string): unknown {
  const name = cli.flag.split(' ')[0];
  switch (cli.kind) {
    case 'int':
      return parseNumberFlag(name, value, { integer: true });
    case 'number':
      return parseNumberFlag(name, value, {});
    case 'yesno':
      return parseChoice(name, value, ['yes', 'no'] as const) === 'yes';
    case 'intOrAuto':
      return value === 'auto' ? 'auto' : parseNumberFlag(name, value, { integer: true });
    case 'string':
      return value;
  }
}

/** The config fields the given run flags set (parsed by their kind; flags not given are absent). */
export function runFlagValues(flags: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(RUN_OPTIONS) as [string, RunOption][]) {
    if (!o.cli) continue;
    const v = flags[flagAttribute(o.cli.flag)];
    if (typeof v === 'string') out[key] = runFlagValue(o.cli, v);
  }
  return out;
}
