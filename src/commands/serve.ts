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
import type { Item } from '../../index/types.ts';
import { DEFAULTS } from '../../index/defaults.ts';
import { stderrLogger, type Logger } from '../../index/log.ts';
import { llmOptionsFromEnv, OpenAIGenerator } from '../../generators/llm.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { listPolicyRounds, loadPlanner, policyStore } from '../run/policies.ts';
import { readRunAt } from '../run/state.ts';
import { buildSearchServer } from '../server/app.ts';
import { storeDriftProvider } from '../server/drift.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { LiveSnapshot, type QueryKeywordSource } from '../server/state.ts';
import { generatorKeywordSource, storeSnapshotLoader, type KeywordSourceContext } from '../server/storeLoader.ts';
import { parseChoice, parseIntFlag, parseServerFlags, withLlmOptions, withServerOptions, type LlmFlags, type ServerFlags } from './options.ts';

interface ServeFlags extends ServerFlags, LlmFlags {
  generator: string;
  dataset?: string;
  budgetMs?: string;
  maxK?: string;
  maxQueryLength?: string;
}

/** The query keyword source of a round: its saved query planner, an LLM endpoint, or none. */
export function keywordSourceFactory(
  generator: string,
  flags: LlmFlags,
  log: Logger,
  items?: readonly Item[],
): (ctx: KeywordSourceContext) => Promise<QueryKeywordSource | null> {
  const kind = parseChoice('--generator', generator, ['embedded', 'openai', 'none'] as const);
  if (kind === 'none') return async () => null;
  if (kind === 'openai') {
    const gen = new OpenAIGenerator(llmOptionsFromEnv(flags), { logger: log });
    const src = generatorKeywordSource(gen, DEFAULTS.decoding.index);
    return async () => src;
  }
  return async ({ round, db, item }) => {
    const store = policyStore(db);
    const rounds = await listPolicyRounds(store, 'planner');
    if (rounds.length === 0) {
      log.warn('no query planner saved in the database: searches use the raw query only (fallback no_generator)');
      return null;
    }
    if (!items) {
      log.warn('the query planner needs the run\'s items (no stored run and no --dataset): searches use the raw query only (fallback no_generator)');
      return null;
    }
    // The round's planner, or the newest one saved at or before it.
    const usable = round === null ? rounds : rounds.filter((r) => r <= round);
    const pick = usable.length ? usable[usable.length - 1] : rounds[0];
    const planner = await loadPlanner(store, pick, items);
    planner.attachOpposite(item);
    log.info('query keywords from the query planner', { plannerRound: pick, servedRound: round });
    // Greedy decoding: the same query always gets the same keywords (and caches well).
    return generatorKeywordSource(planner, { temperature: 0 });
  };
}

export async function runServe(flags: ServeFlags, log: Logger = stderrLogger): Promise<void> {
  const server = parseServerFlags(flags, 64 * 1024 * 1024);
  // Titles and item fields come from the dataset: --dataset, else the stored run's (in its recorded format).
  const run = flags.dataset ? null : await readRunAt(server.dbPath);
  const corpus = flags.dataset ? (await loadDataset(flags.dataset, { logger: log })).corpus : run ? (await loadRunCorpus(run.config, log)).corpus : undefined;
  const loader = storeSnapshotLoader({
    dbPath: server.dbPath,
    round: server.round,
    ...(corpus ? { corpus } : {}),
    keywordSource: keywordSourceFactory(flags.generator, flags, log, corpus?.items),
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
  set('bodyLimit', server.bodyLimit);
  const app = buildSearchServer({ live, log, limits, drift: storeDriftProvider(server.dbPath), ...(server.token ? { token: server.token } : {}) });
  if (server.watch) live.watch(server.watch);
  await listenUntilSignal(app, server.host, server.port, 'cogr serve', log, () => live.stopWatch());
}

export function register(program: Command): void {
  const d = DEFAULTS.serve;
  withLlmOptions(
    withServerOptions(
      program.command('serve'),
      d,
      'round to serve',
      'the admin endpoints',
    ).option('--generator <kind>', "query keywords from: embedded (the round's saved query planner), openai (an endpoint), none (raw query only)", 'embedded'),
  )
    .option('--dataset <name|path>', "dataset of the index: item titles and structured fields for field predicates (default: the stored run's)")
    .option('--budget-ms <ms>', `time budget for generating a query's keywords (default ${d.keywordBudgetMs})`)
    .option('--max-k <n>', `largest k a request may ask for (default ${d.maxK})`)
    .option('--max-query-length <n>', `longest query text in characters (default ${d.maxQueryLength})`)
    .action(async (flags: ServeFlags) => runServe(flags));
}
