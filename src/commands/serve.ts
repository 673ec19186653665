/**
 * `cogr serve`: serve a trained round's keyword retrieval over HTTP (src/server/app.ts).
 *
 *   cogr serve [--db <dir>] [--round latest|<n>] [--port 8080] [--host 127.0.0.1]
 *              [--generator embedded|openai|none] [--base-url <url> --model <m> --api-key <k>]
 *              [--token <T>] [--watch <seconds>] [--dataset <name|path>]
 *              [--budget-ms 250] [--max-k 1000] [--max-query-length 512] [--body-limit 65536]
 *
 * The database is read into memory and closed again; `--watch` polls for a newer
 * generation and `POST /v1/admin/reload` loads it on demand. Binds to loopback unless
 * `--host` says otherwise. The bearer token (flag or COGR_TOKEN) guards the admin
 * endpoint.
 */
import type { Command } from 'commander';
import type { FastifyInstance } from 'fastify';
import { cogrError } from '../../index/errors.ts';
import { stderrLogger, type Logger } from '../../index/log.ts';
import { llmOptionsFromEnv, OpenAIGenerator } from '../../generators/llm.ts';
import { listPolicyRounds, loadPolicy, policyStore } from '../run/policies.ts';
import { INDEX_DECODING } from '../../generators/types.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { homePath } from '../home.ts';
import { buildSearchServer } from '../server/app.ts';
import { storeDriftProvider } from '../server/drift.ts';
import { LiveSnapshot, type QueryKeywordSource } from '../server/state.ts';
import { generatorKeywordSource, storeSnapshotLoader, type KeywordSourceContext, type RoundSelector } from '../server/storeLoader.ts';
import { parseNumberFlag } from './flags.ts';

export function parseRound(flag: string, v: string | undefined): RoundSelector {
  if (v === undefined || v === 'latest') return 'latest';
  if (!/^\d+$/.test(v)) throw cogrError('INVALID_ARGUMENT', `${flag}: expected "latest" or a round number, got ${JSON.stringify(v)}`);
  return Number(v);
}

export function parseIntFlag(flag: string, v: string | undefined, min: number, max: number): number | undefined {
  return parseNumberFlag(flag, v, { integer: true, min, max });
}

function isLoopback(host: string): boolean {
  return host === '127.0.0.1' || host === '::1' || host === 'localhost' || host.startsWith('127.');
}

/** Listen, log the address, and close cleanly on SIGINT/SIGTERM. */
export async function listenUntilSignal(app: FastifyInstance, host: string, port: number, what: string, log: Logger, onClose?: () => void): Promise<void> {
  if (!isLoopback(host)) log.warn(`${what} listens on ${host}, reachable from other machines; set --token for the protected endpoints`);
  const address = await app.listen({ host, port });
  log.info(`${what} listening`, { address, docs: `${address}/docs` });
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      onClose?.();
      void app.close().then(() => resolve());
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

interface ServeFlags {
  db?: string;
  round?: string;
  port: string;
  host: string;
  generator: string;
  baseUrl?: string;
  model?: string;
  apiKey?: string;
  token?: string;
  watch?: string;
  dataset?: string;
  budgetMs?: string;
  maxK?: string;
  maxQueryLength?: string;
  bodyLimit?: string;
}

/** The query keyword source of a round: its saved embedded policy, an LLM endpoint, or none. */
export function keywordSourceFactory(
  generator: string,
  flags: { baseUrl?: string; model?: string; apiKey?: string },
  log: Logger,
): (ctx: KeywordSourceContext) => Promise<QueryKeywordSource | null> {
  if (generator === 'none') return async () => null;
  if (generator === 'openai') {
    const gen = new OpenAIGenerator(llmOptionsFromEnv(flags), { logger: log });
    const src = generatorKeywordSource(gen, { temperature: INDEX_DECODING.temperature, topP: INDEX_DECODING.topP });
    return async () => src;
  }
  if (generator !== 'embedded') throw cogrError('INVALID_ARGUMENT', `--generator: expected embedded, openai or none, got ${JSON.stringify(generator)}`);
  return async ({ round, db, item }) => {
    const store = policyStore(db);
    const rounds = await listPolicyRounds(store, 'query');
    if (rounds.length === 0) {
      log.warn('no query policy saved in the database: searches use the raw query only (fallback no_generator)');
      return null;
    }
    // The round's policy, or the newest one saved at or before it.
    const usable = round === null ? rounds : rounds.filter((r) => r <= round);
    const pick = usable.length ? usable[usable.length - 1] : rounds[0];
    const policy = await loadPolicy(store, 'query', pick);
    policy.attachOpposite(item);
    log.info('query keywords from the embedded policy', { policyRound: pick, servedRound: round });
    // Greedy decoding: the same query always gets the same keywords (and caches well).
    return generatorKeywordSource(policy, { temperature: 0 });
  };
}

export async function runServe(flags: ServeFlags, log: Logger = stderrLogger): Promise<void> {
  const port = parseIntFlag('--port', flags.port, 0, 65535)!;
  const round = parseRound('--round', flags.round);
  const watch = parseIntFlag('--watch', flags.watch, 1, 86_400);
  const token = flags.token ?? process.env.COGR_TOKEN;
  // Titles and item fields come from the dataset: --dataset, else the stored run's (in its recorded format).
  const run = flags.dataset ? null : await readRunAt(flags.db ?? homePath('db'));
  const corpus = flags.dataset ? (await loadDataset(flags.dataset, { logger: log })).corpus : run ? (await loadRunCorpus(run.config, log)).corpus : undefined;
  const loader = storeSnapshotLoader({
    dbPath: flags.db ?? homePath('db'),
    round,
    ...(corpus ? { corpus } : {}),
    keywordSource: keywordSourceFactory(flags.generator, flags, log),
    log,
  });
  const live = new LiveSnapshot(loader, log);
  await live.reload();
  const limits: Record<string, number> = {};
  const set = (k: string, v: number | undefined) => {
    if (v !== undefined) limits[k] = v;
  };
  set('keywordBudgetMs', parseIntFlag('--budget-ms', flags.budgetMs, 1, 600_000));
  set('maxK', parseIntFlag('--max-k', flags.maxK, 1, 1_000_000));
  set('maxQueryLength', parseIntFlag('--max-query-length', flags.maxQueryLength, 1, 100_000));
  set('bodyLimit', parseIntFlag('--body-limit', flags.bodyLimit, 256, 64 * 1024 * 1024));
  const app = buildSearchServer({ live, log, limits, drift: storeDriftProvider(flags.db ?? homePath('db')), ...(token ? { token } : {}) });
  if (watch) live.watch(watch);
  await listenUntilSignal(app, flags.host, port, 'cogr serve', log, () => live.stopWatch());
}

export function register(program: Command): void {
  program
    .command('serve')
    .description('serve keyword retrieval of a trained round over HTTP (OpenAPI at /openapi.json, docs at /docs)')
    .option('--db <path>', 'project database (default $COGR_HOME/db)')
    .option('--round <round>', 'round to serve: "latest" or a number', 'latest')
    .option('--port <port>', 'TCP port (0 = any free port)', '8080')
    .option('--host <host>', 'interface to bind (loopback by default)', '127.0.0.1')
    .option('--generator <kind>', 'query keywords from: embedded (the round\'s saved policy), openai (an endpoint), none (raw query only)', 'embedded')
    .option('--base-url <url>', 'openai: endpoint base URL (default OPENAI_BASE_URL)')
    .option('--model <name>', 'openai: model name (default COGR_MODEL)')
    .option('--api-key <key>', 'openai: API key (default OPENAI_API_KEY)')
    .option('--token <token>', 'bearer token for the admin endpoints (default COGR_TOKEN)')
    .option('--watch <seconds>', 'poll for a newly committed generation every this many seconds')
    .option('--dataset <name|path>', 'dataset of the index: item titles and structured fields for field predicates (default: the stored run\'s)')
    .option('--budget-ms <ms>', 'time budget for generating a query\'s keywords (default 250)')
    .option('--max-k <n>', 'largest k a request may ask for (default 1000)')
    .option('--max-query-length <n>', 'longest query text in characters (default 512)')
    .option('--body-limit <bytes>', 'largest request body (default 65536)')
    .action(async (flags: ServeFlags) => runServe(flags));
}
