/**
 * `cogr reward-server`: CoGR rewards against frozen generations over HTTP
 * (src/server/rewardServer.ts), including OpenRLHF's `POST /get_reward`.
 *
 *   cogr reward-server [--db <dir>] [--half rR-query|rR-item|next]
 *                      [--port 8081] [--host 127.0.0.1] [--token <T>]
 *                      [--body-limit <bytes>] [--include-dev] [--include-held-out] [--strict-labels]
 *   cogr reward-server --dataset <name|path> [--round latest|<n>] [--side query|item] [--k-max 30] [--watch <s>]
 *
 * When the database holds a co-evolution run, the server serves one of its half-rounds
 * (`--half`, default `next`: the first half-round the run has neither made nor imported,
 * r1-query after `cogr demo --rounds 0`), opened from the published files and built by the
 * one function the loop and `cogr rollouts` build it with (run/context.ts frozenHalfRound):
 * its frozen base generations, the run's β and K_max, each query scored as held out, the
 * counterfactual over the core training queries. Only the half-round's side is served, and
 * only the run's core training queries (coreIds): dev queries, which decide adoption, and
 * held-out queries, which measure the result, never reach a trainer through rewards (their
 * ids are NOT_FOUND, named as withheld) unless --include-dev / --include-held-out add them
 * (scored the same way). A run without an SFT step yet (its first step still training) is
 * served as a database without a run, with a warning.
 *
 * Without a run (generations imported by hand, `--dataset` naming their data) the server
 * scores against the generations `--round` selects, with `--k-max` and the default β, the
 * query's own string {q} matched, reloaded with `--watch`.
 *
 * In a /get_reward batch a label that cannot be scored gets a null reward and an entry in
 * `errors`, the others their rewards; --strict-labels refuses the batch instead.
 */
import type { Command } from 'commander';
import { DEFAULTS } from '../../index/core/defaults.ts';
import type { Corpus } from '../../index/core/types.ts';
import { scorerFromData } from '../../rewards/scorer.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { frozenHalfRound, halfRoundScorerData, openPublishedRun } from '../run/context.ts';
import { checkPublishedRunData, coreIds, nextHalfRound, parseHalfRound, readRunAt, type StoredRun } from '../run/state.ts';
import { listenUntilSignal } from '../server/listen.ts';
import { buildRewardServer, halfRoundSnapshot, type RewardServerOptions } from '../server/rewardServer.ts';
import { LiveSnapshot } from '../server/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import {
  parseIntFlag,
  parseServerFlags,
  parseSide,
  RUN_EMBEDDINGS_HELP,
  withEmbeddingsOptions,
  withServerOptions,
  type EmbeddingsFlags,
  type ServerFlags,
} from './options.ts';
import { registerRunEmbeddings } from '../embeddings/dense.ts';

interface RewardServerFlags extends ServerFlags, EmbeddingsFlags {
  dataset?: string;
  includeHeldOut?: boolean;
  includeDev?: boolean;
  strictLabels?: boolean;
  side: string;
  kMax?: string;
  half?: string;
}

/** The flags that only a database without a run reads, when given on the command line. */
type GivenFlags = Partial<Record<'round' | 'side' | 'kMax' | 'watch' | 'dataset', boolean>>;

export async function runRewardServer(flags: RewardServerFlags, log: Logger = stderrLogger, given: GivenFlags = {}): Promise<void> {
  const server = parseServerFlags(flags, 256 * 1024 * 1024);
  const defaultSide = parseSide('--side', flags.side);
  const kMax = parseIntFlag('--k-max', flags.kMax, 1, 10_000);
  const run = await readRunAt(server.dbPath);
  if (!flags.dataset && !run)
    throw cogrError('INVALID_ARGUMENT', `--dataset: required (the database ${server.dbPath} holds no co-evolution run to take it from)`);
  const halfName = run && !flags.dataset ? (flags.half === undefined || flags.half === 'next' ? nextHalfRound(run) : flags.half) : null;
  if (flags.half !== undefined && halfName === null)
    throw cogrError(
      'INVALID_ARGUMENT',
      run
        ? flags.dataset
          ? "--half: serves the run's own data; leave out --dataset"
          : `--half: the run in ${server.dbPath} has no SFT step yet, so no half-round`
        : `--half: the database ${server.dbPath} holds no co-evolution run`,
    );
  if (halfName !== null) return serveHalfRound(run!, halfName, flags, server, log, given);
  if (run && !flags.dataset)
    log.warn(
      `reward-server: the run in ${server.dbPath} has no SFT step yet: rewards against the generations --round ${String(server.round)} selects, not a half-round's`,
    );
  // The dataset as the run read it (its recorded format), unless --dataset names another.
  const loaded = (flags.dataset ? await loadDataset(flags.dataset, { logger: log }) : await loadRunCorpus(run!.config, log)).corpus;
  // Rewards from other judgements than the run's would be served without a word.
  if (run && !flags.dataset) checkPublishedRunData(server.dbPath, run, loaded);
  await registerRunEmbeddings(flags, run && !flags.dataset ? run.config : null, loaded, log);
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

/** A run's half-round (`--half`), its rewards from the half-round's one scorer, read from the published files. */
async function serveHalfRound(
  stored: StoredRun,
  name: string,
  flags: RewardServerFlags,
  server: ReturnType<typeof parseServerFlags>,
  log: Logger,
  given: GivenFlags,
): Promise<void> {
  const { side, round } = parseHalfRound(name);
  const ignored = (['round', 'side', 'kMax', 'watch'] as const).filter((k) => given[k]);
  if (ignored.length > 0)
    throw cogrError(
      'INVALID_ARGUMENT',
      `${ignored.map((k) => `--${k === 'kMax' ? 'k-max' : k}`).join(', ')}: a run's rewards are its half-round's (--half ${name}: its frozen generations, the run's K_max ${stored.config.kMax} and β ${stored.config.beta}); these flags are for a database without a run`,
    );
  const run = await openPublishedRun(server.dbPath, { logger: log });
  await registerRunEmbeddings(flags, run.config, run.corpus, log);
  const half = await frozenHalfRound(run, side, round);
  const include = [...(flags.includeDev ? run.devQueries : []), ...(flags.includeHeldOut ? run.evalQueries : [])];
  let scorer = half.scorer;
  if (include.length > 0) {
    if (side === 'item')
      throw cogrError(
        'INVALID_ARGUMENT',
        `--include-dev, --include-held-out: an item half-round's reward sums over the core training queries only`,
      );
    // The same one scorer, over more queries (each scored as held out, as the core ones).
    const queries = [...run.coreQueries, ...include];
    const relevant = new Map(queries.map((q) => [q.id, new Set(run.corpus.relevant.get(q.id) ?? [])]));
    scorer = scorerFromData(halfRoundScorerData('query', half, { queries, relevant }, half.planner, run.config));
  }
  const withheld = new Map<string, 'dev' | 'held-out'>();
  if (!flags.includeDev) for (const q of run.devQueries) withheld.set(q.id, 'dev');
  if (!flags.includeHeldOut) for (const q of run.evalQueries) withheld.set(q.id, 'held-out');
  log.info(
    `reward-server: half-round ${name} (frozen generations of step ${half.base}: item ${half.itemView.generation}${half.queryView ? `, query ${half.queryView.generation}` : ''}; K_max ${run.config.kMax}, β ${run.config.beta}), ${side} rewards for the run's ${run.coreQueries.length} core training queries${include.length ? ` and ${include.length} more (--include-dev/--include-held-out)` : ''}`,
  );
  const snap = halfRoundSnapshot(half, run.corpus);
  const live = LiveSnapshot.fromSnapshot(snap, { description: `${server.dbPath} half-round ${name}`, load: async () => snap }, log);
  const corpus: Pick<Corpus, 'queries' | 'relevant'> = run.corpus;
  const opts: RewardServerOptions = {
    live,
    corpus,
    defaultSide: side,
    withheld,
    strictLabels: flags.strictLabels === true,
    log,
    kMax: run.config.kMax,
    beta: run.config.beta,
    half: { name, side, scorer },
    ...(server.token ? { token: server.token } : {}),
    ...(server.bodyLimit ? { limits: { bodyLimit: server.bodyLimit } } : {}),
    connections: server.connections,
  };
  await listenUntilSignal(buildRewardServer(opts), server.host, server.port, 'cogr reward-server', log);
}

export function register(program: Command): void {
  const cmd = withServerOptions(
    program.command('reward-server'),
    DEFAULTS.rewardServer,
    'round whose generations are frozen',
    'the reward and admin endpoints',
  )
    .option(
      '--half <name>',
      "the run's half-round whose rewards are served, r<round>-query or r<round>-item, or next (default: the first half-round the run has neither made nor imported)",
    )
    .option('--dataset <name|path>', "dataset the generations were built from (a database without a run; default: the stored run's)")
    .option(
      '--include-dev',
      "also serve rewards for the run's dev queries (they decide which half-rounds are adopted: a trainer that sees them biases adoption)",
    )
    .option('--include-held-out', "also serve rewards for the run's held-out queries (leaks their judgements to the trainer)")
    .option(
      '--strict-labels',
      "refuse a whole /get_reward batch (404) when one label cannot be scored (an unknown id, or a withheld dev or held-out query); by default that sample gets a null reward, named in the answer's errors",
    )
    .option('--side <side>', 'side of a bare label without "query:" / "item:" (without a run; a half-round\'s is its side)', 'query')
    .option('--k-max <n>', `keyword budget K_max (without a run; default ${DEFAULTS.kMax}; a run's is its own)`);
  withEmbeddingsOptions(cmd, RUN_EMBEDDINGS_HELP).action(async function (this: Command, flags: RewardServerFlags) {
    const cli = (k: string) => this.getOptionValueSource(k) === 'cli';
    await runRewardServer(flags, stderrLogger, {
      round: cli('round'),
      side: cli('side'),
      kMax: cli('kMax'),
      watch: cli('watch'),
      dataset: cli('dataset'),
    });
  });
}
