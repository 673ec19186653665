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
import { DEFAULTS } from '../../index/defaults.ts';
import { cogrError } from '../../index/errors.ts';
import { stderrLogger, type Logger } from '../../index/log.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { buildRewardServer } from '../server/rewardServer.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { parseIntFlag, parseServerFlags, parseSide, withServerOptions, type ServerFlags } from './options.ts';

interface RewardServerFlags extends ServerFlags {
  dataset?: string;
  includeHeldOut?: boolean;
  side: string;
  kMax?: string;
}

export async function runRewardServer(flags: RewardServerFlags, log: Logger = stderrLogger): Promise<void> {
  const server = parseServerFlags(flags, 256 * 1024 * 1024);
  const defaultSide = parseSide('--side', flags.side);
  const kMax = parseIntFlag('--k-max', flags.kMax, 1, 10_000);
  const run = await readRunAt(server.dbPath);
  if (!flags.dataset && !run) throw cogrError('INVALID_ARGUMENT', `--dataset: required (the database ${server.dbPath} holds no co-evolution run to take it from)`);
  // The dataset as the run read it (its recorded format), unless --dataset names another.
  const loaded = (flags.dataset ? await loadDataset(flags.dataset, { logger: log }) : await loadRunCorpus(run!.config, log)).corpus;
  let corpus = loaded;
  if (run && !flags.includeHeldOut) {
    const train = new Set(run.split.train);
    corpus = { ...loaded, queries: loaded.queries.filter((q) => train.has(q.id)), relevant: new Map([...loaded.relevant].filter(([id]) => train.has(id))) };
    log.info(`reward-server: serving the run's ${train.size} training queries only (held-out queries excluded; --include-held-out to serve them)`);
  }
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: server.dbPath, round: server.round, corpus, log }), log);
  await live.reload();
  const app = buildRewardServer({
    live,
    corpus,
    defaultSide,
    log,
    ...(kMax ? { kMax } : {}),
    ...(server.token ? { token: server.token } : {}),
    ...(server.bodyLimit ? { limits: { bodyLimit: server.bodyLimit } } : {}),
    connections: server.connections,
  });
  if (server.watch) live.watch(server.watch);
  await listenUntilSignal(app, server.host, server.port, 'cogr reward-server', log, () => live.stopWatch());
}

export function register(program: Command): void {
  withServerOptions(
    program.command('reward-server'),
    DEFAULTS.rewardServer,
    'round whose generations are frozen',
    'the reward and admin endpoints',
  )
    .option('--dataset <name|path>', "dataset the generations were built from (default: the stored run's)")
    .option('--include-held-out', "also serve rewards for the run's held-out queries (leaks their judgements to the trainer)")
    .option('--side <side>', 'side of a bare label without "query:" / "item:"', 'query')
    .option('--k-max <n>', `keyword budget K_max (default ${DEFAULTS.kMax})`)
    .action(async (flags: RewardServerFlags) => runRewardServer(flags));
}
