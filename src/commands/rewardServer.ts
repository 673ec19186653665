/**
 * `cogr reward-server`: CoGR rewards against frozen generations over HTTP
 * (src/server/rewardServer.ts), including OpenRLHF's `POST /get_reward`.
 *
 *   cogr reward-server [--dataset <name|path>] [--db <dir>] [--round latest|<n>]
 *                      [--port 8081] [--host 127.0.0.1] [--token <T>] [--side query|item]
 *                      [--k-max 30] [--watch <seconds>] [--body-limit <bytes>]
 *                      [--include-dev] [--include-held-out] [--strict-labels]
 *
 * When the database holds a co-evolution run, the dataset defaults to the run's and only
 * the run's core training queries are served (coreIds: the training queries outside the
 * dev split): dev queries, which decide adoption, and held-out queries, which measure
 * the result, never reach a trainer through rewards (their ids are NOT_FOUND, named as
 * withheld) unless --include-dev / --include-held-out say otherwise. In a /get_reward batch
 * a label that cannot be scored gets a null reward and an entry in `errors`, the others
 * their rewards; --strict-labels refuses the batch instead.
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { checkPublishedRunData, coreIds, readRunAt } from '../run/state.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { buildRewardServer } from '../server/rewardServer.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { parseIntFlag, parseServerFlags, parseSide, withServerOptions, type ServerFlags } from './options.ts';

interface RewardServerFlags extends ServerFlags {
  dataset?: string;
  includeHeldOut?: boolean;
  includeDev?: boolean;
  strictLabels?: boolean;
  side: string;
  kMax?: string;
}

export async function runRewardServer(flags: RewardServerFlags, log: Logger = stderrLogger): Promise<void> {
  const server = parseServerFlags(flags, 256 * 1024 * 1024);
  const defaultSide = parseSide('--side', flags.side);
  const kMax = parseIntFlag('--k-max', flags.kMax, 1, 10_000);
  const run = await readRunAt(server.dbPath);
  if (!flags.dataset && !run)
    throw cogrError('INVALID_ARGUMENT', `--dataset: required (the database ${server.dbPath} holds no co-evolution run to take it from)`);
  // The dataset as the run read it (its recorded format), unless --dataset names another.
  const loaded = (flags.dataset ? await loadDataset(flags.dataset, { logger: log }) : await loadRunCorpus(run!.config, log)).corpus;
  // Rewards from other judgements than the run's would be served without a word.
  if (run && !flags.dataset) checkPublishedRunData(server.dbPath, run, loaded);
  let corpus = loaded;
  const withheld = new Map<string, 'dev' | 'held-out'>();
  if (run && !(flags.includeHeldOut && flags.includeDev)) {
    if (!flags.includeDev) for (const id of run.split.dev) withheld.set(id, 'dev');
    if (!flags.includeHeldOut) for (const id of run.split.eval) withheld.set(id, 'held-out');
    const core = coreIds(run.split);
    const served = new Set([...core, ...(flags.includeDev ? run.split.dev : []), ...(flags.includeHeldOut ? run.split.eval : [])]);
    corpus = {
      ...loaded,
      queries: loaded.queries.filter((q) => served.has(q.id)),
      relevant: new Map([...loaded.relevant].filter(([id]) => served.has(id))),
    };
    const left = [
      ...(flags.includeDev ? [] : [`${run.split.dev.length} dev (--include-dev)`]),
      ...(flags.includeHeldOut ? [] : [`${run.split.eval.length} held-out (--include-held-out)`]),
    ];
    log.info(
      `reward-server: serving the run's ${core.length} core training queries${flags.includeDev ? ` and ${run.split.dev.length} dev` : ''}${flags.includeHeldOut ? ` and ${run.split.eval.length} held-out` : ''} (${served.size} in all); not served: ${left.join(', ')}`,
    );
  }
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: server.dbPath, round: server.round, corpus, log }), log);
  await live.reload();
  const app = buildRewardServer({
    live,
    corpus,
    defaultSide,
    withheld,
    strictLabels: flags.strictLabels === true,
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
    .option(
      '--include-dev',
      "also serve rewards for the run's dev queries (they decide which half-rounds are adopted: a trainer that sees them biases adoption)",
    )
    .option('--include-held-out', "also serve rewards for the run's held-out queries (leaks their judgements to the trainer)")
    .option(
      '--strict-labels',
      "refuse a whole /get_reward batch (404) when one label cannot be scored (an unknown id, or a withheld dev or held-out query); by default that sample gets a null reward, named in the answer's errors",
    )
    .option('--side <side>', 'side of a bare label without "query:" / "item:"', 'query')
    .option('--k-max <n>', `keyword budget K_max (default ${DEFAULTS.kMax})`)
    .action(async (flags: RewardServerFlags) => runRewardServer(flags));
}
