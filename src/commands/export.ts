/**
 * `cogr export opensearch --url U[,U2,…] --index NAME [--round best|latest|<n>] [--db <dir>]
 *                         [--dataset <name|path>] [--shards 1] [--replicas 1] [--batch-size 500]
 *                         [--timeout-ms 30000] [--force] [--json]`
 *
 * Publishes one stored item generation (chosen as `cogr serve` chooses it: src/server/
 * storeLoader.ts) into OpenSearch as a new index behind the alias NAME (src/opensearch/
 * index.ts): strict mapping, bulk load with retries of rejected documents, count check,
 * then one atomic `_aliases` call (remove the old index with must_exist, add the new one).
 * A re-export of the generation the alias already serves changes nothing (`--force` builds
 * a new index anyway). Prints the result as one line (JSON with --json).
 */
import type { Command } from 'commander';
import { stderrLogger, type Logger } from '../../index/core/log.ts';
import { loadDataset } from '../datasets/index.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { readRunAt } from '../run/state.ts';
import { storeSnapshotLoader } from '../server/storeLoader.ts';
import { checkIndexName, OpenSearchNodes, parseNodeUrls } from '../opensearch/client.ts';
import { exportGeneration } from '../opensearch/index.ts';
import { dbPath, parseIntFlag, parseLatestOr, withDbOption } from './options.ts';

interface ExportFlags {
  db?: string;
  url?: string;
  index?: string;
  round?: string;
  dataset?: string;
  shards?: string;
  replicas?: string;
  batchSize?: string;
  timeoutMs?: string;
  force?: boolean;
  json?: boolean;
}

async function runExportOpenSearch(flags: ExportFlags, log: Logger = stderrLogger): Promise<void> {
  const nodes = parseNodeUrls('--url', flags.url);
  const alias = checkIndexName('--index', flags.index);
  const round = flags.round === undefined || flags.round === 'best' ? ('best' as const) : parseLatestOr('--round', flags.round);
  const shards = parseIntFlag('--shards', flags.shards, 1, 1024) ?? 1;
  const replicas = parseIntFlag('--replicas', flags.replicas, 0, 16) ?? 1;
  const batchSize = parseIntFlag('--batch-size', flags.batchSize, 1, 100_000) ?? 500;
  const timeoutMs = parseIntFlag('--timeout-ms', flags.timeoutMs, 100, 3_600_000) ?? 30_000;
  const db = dbPath(flags.db);
  const run = flags.dataset ? null : await readRunAt(db);
  const dataset = flags.dataset ? await loadDataset(flags.dataset, { logger: log }) : null;
  const corpus = dataset ? dataset.corpus : run ? (await loadRunCorpus(run.config, log)).corpus : undefined;
  const snap = await storeSnapshotLoader({ dbPath: db, round, ...(corpus ? { corpus } : {}), log }).load();
  const os = new OpenSearchNodes(nodes, { timeoutMs });
  const out = await exportGeneration({
    os,
    alias,
    dbPath: db,
    dataset: flags.dataset ?? run?.config.dataset ?? null,
    round: snap.round,
    view: snap.item,
    titles: snap.titles,
    fields: snap.fields,
    shards,
    replicas,
    batchSize,
    force: flags.force === true,
    log,
  });
  process.stdout.write(
    flags.json
      ? `${JSON.stringify(out)}\n`
      : out.unchanged
        ? `${alias} already serves item generation ${out.generation} (${out.index}); nothing exported\n`
        : `${alias} → ${out.index}: item generation ${out.generation}, ${out.items} items${out.previous ? ` (was ${out.previous})` : ''}\n`,
  );
}

export function register(program: Command): void {
  const exp = program.command('export').description('publish a stored generation into another engine');
  withDbOption(exp.command('opensearch').description('export one item generation into an OpenSearch index behind an alias (atomic swap)'))
    .option('--url <urls>', 'OpenSearch node URLs, comma-separated (every one is used; a dead one is skipped)')
    .option('--index <alias>', 'the alias to publish under (the index itself is <alias>-g<generation>-<digest>-<time>)')
    .option('--round <round>', 'round to export, chosen as `cogr serve` chooses it: "best", "latest" or a number', 'best')
    .option('--dataset <name|path>', "dataset of the index: titles and item fields (default: the stored run's)")
    .option('--shards <n>', 'primary shards (default 1)')
    .option('--replicas <n>', 'replicas of each shard (default 1)')
    .option('--batch-size <n>', 'documents per bulk request (default 500)')
    .option('--timeout-ms <ms>', 'deadline of one request on one node (bulk requests: at least 120,000; default 30,000)')
    .option('--force', 'build a new index even when the alias already serves this generation')
    .option('--json', 'print the result as JSON')
    .action(async (flags: ExportFlags) => runExportOpenSearch(flags));
}
