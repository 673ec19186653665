/**
 * `cogr reward-server`: CoGR rewards against frozen generations over HTTP
 * (src/server/rewardServer.ts), including OpenRLHF's `POST /get_reward`.
 *
 *   cogr reward-server [--dataset <name|path>] [--db <dir>] [--round latest|<n>]
 *                      [--port 8081] [--host 127.0.0.1] [--token <T>] [--side query|item]
 *                      [--k-max 30] [--watch <seconds>] [--body-limit <bytes>]
 *                      [--include-held-out]
 *
 * When the database holds a co-evolution run, the dataset defaults to the run's and only
 * the run's training queries are served: held-out queries and their judgements never
 * reach a trainer through rewards (a held-out id is NOT_FOUND) unless
 * --include-held-out says otherwise.
 */
import type { Command } from 'commander';
import { cogrError } from '../../index/errors.ts';
import { stderrLogger, type Logger } from '../../index/log.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { homePath } from '../home.ts';
import { buildRewardServer } from '../server/rewardServer.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { listenUntilSignal, parseIntFlag, parseRound } from './serve.ts';

interface RewardServerFlags {
  db?: string;
  round?: string;
  port: string;
  host: string;
  token?: string;
  dataset?: string;
  includeHeldOut?: boolean;
  side: string;
  kMax?: string;
  watch?: string;
  bodyLimit?: string;
}

export async function runRewardServer(flags: RewardServerFlags, log: Logger = stderrLogger): Promise<void> {
  const port = parseIntFlag('--port', flags.port, 0, 65535)!;
  const round = parseRound('--round', flags.round);
  if (flags.side !== 'query' && flags.side !== 'item') throw cogrError('INVALID_ARGUMENT', `--side: expected query or item, got ${JSON.stringify(flags.side)}`);
  const kMax = parseIntFlag('--k-max', flags.kMax, 1, 10_000);
  const watch = parseIntFlag('--watch', flags.watch, 1, 86_400);
  const bodyLimit = parseIntFlag('--body-limit', flags.bodyLimit, 256, 256 * 1024 * 1024);
  const token = flags.token ?? process.env.COGR_TOKEN;
  const dbPath = flags.db ?? homePath('db');
  const run = await readRunAt(dbPath);
  if (!flags.dataset && !run) throw cogrError('INVALID_ARGUMENT', `--dataset: required (the database ${dbPath} holds no co-evolution run to take it from)`);
  // The dataset as the run read it (its recorded format), unless --dataset names another.
  const loaded = (flags.dataset ? await loadDataset(flags.dataset, { logger: log }) : await loadRunCorpus(run!.config, log)).corpus;
  let corpus = loaded;
  if (run && !flags.includeHeldOut) {
    const train = new Set(run.split.train);
    corpus = { ...loaded, queries: loaded.queries.filter((q) => train.has(q.id)), relevant: new Map([...loaded.relevant].filter(([id]) => train.has(id))) };
    log.info(`reward-server: serving the run's ${train.size} training queries only (held-out queries excluded; --include-held-out to serve them)`);
  }
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round, corpus, log }), log);
  await live.reload();
  const app = buildRewardServer({
    live,
    corpus,
    defaultSide: flags.side,
    log,
    ...(kMax ? { kMax } : {}),
    ...(token ? { token } : {}),
    ...(bodyLimit ? { limits: { bodyLimit } } : {}),
  });
  if (watch) live.watch(watch);
  await listenUntilSignal(app, flags.host, port, 'cogr reward-server', log, () => live.stopWatch());
}

export function register(program: Command): void {
  program
    .command('reward-server')
    .description('serve CoGR rewards against frozen generations (OpenRLHF POST /get_reward and JSON endpoints)')
    .option('--dataset <name|path>', 'dataset the generations were built from (default: the stored run\'s)')
    .option('--include-held-out', 'also serve rewards for the run\'s held-out queries (leaks their judgements to the trainer)')
    .option('--db <path>', 'project database (default $COGR_HOME/db)')
    .option('--round <round>', 'round whose generations are frozen: "latest" or a number', 'latest')
    .option('--port <port>', 'TCP port (0 = any free port)', '8081')
    .option('--host <host>', 'interface to bind (loopback by default)', '127.0.0.1')
    .option('--token <token>', 'bearer token for the reward and admin endpoints (default COGR_TOKEN)')
    .option('--side <side>', 'side of a bare label without "query:" / "item:"', 'query')
    .option('--k-max <n>', 'keyword budget K_max (default 30)')
    .option('--watch <seconds>', 'poll for newly committed generations every this many seconds')
    .option('--body-limit <bytes>', 'largest request body (default 8 MiB)')
    .action(async (flags: RewardServerFlags) => runRewardServer(flags));
}
