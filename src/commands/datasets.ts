/**
 * `cogr datasets [--json]`: the shipped and registered datasets with their sizes.
 * `cogr datasets add <name> <path> [--format f] [--replace]`: register a folder under a
 * name in $COGR_HOME/datasets.json; it is loaded first, and a folder that does not load is
 * not registered; a name registered already is refused unless --replace (the same folder
 * and format again is accepted and changes nothing). `cogr datasets remove <name>`: forget a registered name.
 */
import type { Command } from 'commander';
import { isCogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { checkRegistration, listDatasets, loadDataset, parseFormat, registerDataset, unregisterDataset } from '../datasets/index.ts';
import { trainingShortfalls } from '../datasets/requirements.ts';
import { judgedQueryIds } from '../splits.ts';
import { formatQrels } from '../trec.ts';
import { writeFileAtomic } from '../../index/store/sealed.ts';
import { renderTable } from '../table.ts';

export interface DatasetSummary {
  name: string;
  shipped: boolean;
  path: string;
  format?: string;
  items?: number;
  queries?: number;
  judgedQueries?: number;
  meanRelevant?: number;
  unknownIdJudgements?: number;
  error?: { code: string; message: string };
}

export async function summarizeDatasets(): Promise<DatasetSummary[]> {
  const out: DatasetSummary[] = [];
  for (const d of listDatasets()) {
    try {
      const { corpus, format, warnings } = await loadDataset(d.name);
      const judged = judgedQueryIds(corpus);
      let rel = 0;
      for (const id of judged) rel += corpus.relevant.get(id)?.size ?? 0;
      out.push({
        name: d.name,
        shipped: d.shipped,
        path: d.path,
        format,
        items: corpus.items.length,
        queries: corpus.queries.length,
        judgedQueries: judged.length,
        meanRelevant: judged.length > 0 ? rel / judged.length : 0,
        unknownIdJudgements: warnings.unknownItemIds + warnings.unknownQueryIds,
      });
    } catch (e) {
      if (!isCogrError(e)) throw e;
      out.push({ name: d.name, shipped: d.shipped, path: d.path, error: { code: e.code, message: e.message } });
    }
  }
  return out;
}

export function register(program: Command): void {
  const cmd = program
    .command('datasets')
    .option('--json', 'print one JSON object on stdout')
    .action(async (opts: { json?: boolean }) => {
      const list = await summarizeDatasets();
      if (opts.json) {
        process.stdout.write(JSON.stringify({ datasets: list }) + '\n');
        return;
      }
      const rows = list.map((d) =>
        d.error
          ? [d.name, d.shipped ? 'shipped' : 'registered', '-', '-', '-', '-', '-', `error[${d.error.code}]: ${d.error.message}`]
          : [
              d.name,
              d.shipped ? 'shipped' : 'registered',
              d.format ?? '',
              String(d.items),
              String(d.queries),
              String(d.judgedQueries),
              (d.meanRelevant ?? 0).toFixed(1),
              d.path,
            ],
      );
      process.stdout.write(
        renderTable(['name', 'kind', 'format', 'items', 'queries', 'judged', 'rel/query', 'path'], rows, { right: [3, 4, 5, 6] }),
      );
    });
  cmd
    .command('add <name> <path>')
    .description('register a dataset folder under a name (format detected from its files unless --format)')
    .option('--format <format>', 'smart | trec | beir | wands | jsonl')
    .option('--replace', 'point a registered name at another folder (a run made on the old one refuses to resume on other data)')
    .action(async (name: string, path: string, opts: { format?: string; replace?: boolean }) => {
      const format = parseFormat(opts.format);
      const replace = opts.replace ?? false;
      // Check the name and load the folder first: a broken dataset is reported and never registered.
      const abs = checkRegistration(name, path, { ...(format ? { format } : {}), replace });
      const { corpus, format: used, warnings } = await loadDataset(abs, { ...(format ? { format } : {}), logger: stderrLogger });
      const entry = registerDataset(name, abs, format, { replace });
      // Registered all the same (it can be searched, evaluated, exported), but no run can be made on it: say so now.
      for (const why of trainingShortfalls(corpus)) stderrLogger.warn(`${why}: demo and evolve will refuse it`);
      process.stdout.write(
        `registered ${entry.name} (${used}) -> ${entry.path}: ${corpus.items.length} items, ${corpus.queries.length} queries, ${judgedQueryIds(corpus).length} judged` +
          (warnings.unknownItemIds + warnings.unknownQueryIds > 0
            ? `; ${warnings.unknownItemIds + warnings.unknownQueryIds} judgement(s) point to unknown ids`
            : '') +
          '\n',
      );
    });
  cmd
    .command('export-qrels')
    .description(
      "write a dataset's judgements as TREC qrels (qid 0 docid grade; every judged pair with its grade, queries and ids in byte order), for trec_eval and pytrec_eval",
    )
    .requiredOption('--dataset <name|path>', 'a shipped or registered dataset name, or a dataset folder')
    .option('--format <format>', 'dataset format: smart | trec | beir | wands | jsonl (default: detected)')
    .option('--out <file>', 'the qrels file (default: stdout)')
    .action(async (opts: { dataset: string; format?: string; out?: string }) => {
      const format = parseFormat(opts.format);
      const { corpus } = await loadDataset(opts.dataset, { ...(format ? { format } : {}), logger: stderrLogger });
      const text = formatQrels(corpus.qrels);
      if (opts.out === undefined) {
        process.stdout.write(text);
        return;
      }
      await writeFileAtomic(opts.out, [Buffer.from(text, 'utf8')]);
      const pairs = [...corpus.qrels.values()].reduce((a, m) => a + m.size, 0);
      stderrLogger.info(`qrels ${opts.out}: ${corpus.qrels.size} queries, ${pairs} judgements`);
    });
  cmd
    .command('remove <name>')
    .description('forget a registered dataset (its folder is left alone)')
    .action((name: string) => {
      const d = unregisterDataset(name);
      process.stdout.write(`removed ${d.name} (${d.path} is left alone)\n`);
    });
}
