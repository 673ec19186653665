/**
 * `cogr drift [--db <dir>] [--from 0] [--to latest] [--html <file>] [--json <file|->]
 * [--metrics <file.json>] [--limit 50]`: vocabulary drift of the keyword index across
 * generations (src/drift/). Prints a compact summary table; `--json -` prints the JSON
 * report on stdout instead. `--metrics` is a JSON array `[{round, side, f1}]` of held-out
 * F1 per round; without it, the F1 the co-evolution run in the database recorded is used.
 */
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { cogrError } from '../../index/core/errors.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { readText } from '../datasets/common.ts';
import { parseF1Points, type DriftReport, type F1Point } from '../drift/analyze.ts';
import { parseDriftQuery, writeDriftReport } from '../drift/fromStore.ts';
import { formatDriftSummary } from '../drift/summary.ts';
import { f1Points, readRunAt } from '../run/state.ts';
import { dbPath, withDbOption } from './options.ts';

export interface DriftCliOptions {
  db?: string;
  from: string;
  to: string;
  html?: string;
  json?: string;
  metrics?: string;
  limit: string;
}

/** Read `[{round, side, f1}]` from a JSON file; errors name the file. */
export function readF1Metrics(file: string): F1Point[] {
  if (!existsSync(file)) throw cogrError('DATA_MISSING', `metrics file ${file} does not exist`, { file });
  const text = readText(file); // strict UTF-8: a bad byte is DATA_FORMAT naming file:line:column
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw cogrError('DATA_FORMAT', `${file}: not valid JSON (${(e as Error).message})`, { file });
  }
  return parseF1Points(data, file);
}

/** Run the command: returns the report and the text it printed. */
export async function runDriftCommand(o: DriftCliOptions): Promise<{ report: DriftReport; output: string }> {
  const opts = parseDriftQuery({ from: o.from, to: o.to, limit: o.limit }, 'cli');
  const fromFile = o.metrics ? readF1Metrics(o.metrics) : null;
  const path = dbPath(o.db);
  // The published generation files and run state: no database lock, beside a running writer.
  const store = new PublishedIndex(path);
  await store.checkExists();
  // Held-out F1 per round: from --metrics, else from the co-evolution run stored in the database.
  const f1ByRound = fromFile ?? f1Points((await readRunAt(path))?.steps ?? []);
  const toStdout = o.json === '-';
  const report = await writeDriftReport(store, {
    ...opts,
    f1ByRound,
    ...(o.json && !toStdout ? { jsonPath: o.json } : {}),
    ...(o.html ? { htmlPath: o.html } : {}),
  });
  let output = toStdout ? JSON.stringify(report, null, 2) + '\n' : formatDriftSummary(report);
  if (!toStdout) {
    if (o.html) output += `\nHTML report written to ${o.html}\n`;
    if (o.json) output += `JSON report written to ${o.json}\n`;
  }
  return { report, output };
}

export function register(program: Command): void {
  withDbOption(program.command('drift'))
    .option('--from <n>', 'first generation analysed', '0')
    .option('--to <n|latest>', 'last generation analysed', 'latest')
    .option('--html <file>', 'write the self-contained HTML report here')
    .option('--json <file|->', 'write the JSON report here (- prints it on stdout instead of the table)')
    .option('--metrics <file.json>', "held-out F1 per round: JSON array of {round, side, f1} (default: the stored run's)")
    .option('--limit <n>', 'cap of the added/dropped keyword lists', '50')
    .action(async (o: DriftCliOptions) => {
      const { output } = await runDriftCommand(o);
      process.stdout.write(output);
    });
}
