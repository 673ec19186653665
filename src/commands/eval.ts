/**
 * `cogr eval --run <file> --dataset <d> [--json] [--per-query]`: cogr's metrics of a TREC
 * run file (src/trec.ts) against a dataset's judgements. Every judged query of the
 * dataset is evaluated; one the run lacks counts with an empty ranking (all zeros), a run
 * query without judgements is left out (as trec_eval does) and counted. Lines with an
 * unknown query or document id, a rank or document given twice, or a malformed field are
 * refused with the file and line. Each query's lines are ordered as trec_eval orders them
 * (score, then document id); its whole list is also the retrieved set of P/R/F1.
 */
import type { Command } from 'commander';
import { stderrLogger } from '../../index/core/log.ts';
import { loadDataset, parseFormat } from '../datasets/index.ts';
import { DEFAULT_CUTOFFS, evaluateRun, type RunEntry } from '../metrics.ts';
import { judgedQueryIds } from '../splits.ts';
import { readRunFile } from '../trec.ts';
import { renderTable } from '../table.ts';
import { withDatasetOptions, type DatasetFlags } from './options.ts';

export function register(program: Command): void {
  withDatasetOptions(
    program.command('eval').description("cogr's metrics of a TREC run file (qid Q0 docid rank score tag) against a dataset's judgements"),
  )
    .requiredOption('--run <file>', 'the run file')
    .option('--per-query', "with --json: every query's figures too")
    .option('--json', 'print one JSON object on stdout')
    .action(async (opts: DatasetFlags & { run: string; perQuery?: boolean; json?: boolean }) => {
      const format = parseFormat(opts.format);
      const { corpus } = await loadDataset(opts.dataset, { ...(format ? { format } : {}), logger: stderrLogger });
      const run = readRunFile(opts.run, {
        queries: new Set(corpus.queries.map((q) => q.id)),
        items: new Set(corpus.items.map((i) => i.id)),
      });
      const byQuery = new Map(run.map((q) => [q.queryId, q.hits]));
      const judged = judgedQueryIds(corpus);
      const judgedSet = new Set(judged);
      const longest = run.reduce((m, q) => Math.max(m, q.hits.length), 0);
      const cutoffs = longest > Math.max(...DEFAULT_CUTOFFS) ? [...DEFAULT_CUTOFFS, longest] : DEFAULT_CUTOFFS;
      const entries: RunEntry[] = judged.map((id) => {
        const hits = byQuery.get(id) ?? [];
        const ranked = hits.map((h) => h.id);
        return { queryId: id, ranked, scores: hits.map((h) => h.score), matched: ranked };
      });
      const ev = evaluateRun(entries, corpus, { cutoffs });
      const mapKey = `ap@${Math.max(...cutoffs)}` as const;
      const summary = {
        dataset: corpus.name,
        run: opts.run,
        judgedQueries: judged.length,
        missingQueries: judged.filter((id) => !byQuery.has(id)).length,
        unjudgedRunQueries: run.filter((q) => !judgedSet.has(q.queryId)).length,
        precision: ev.set?.precision ?? 0,
        recall: ev.set?.recall ?? 0,
        f1: ev.set?.f1 ?? 0,
        ndcg10: ev.ranked['ndcg@10'],
        map: ev.ranked[mapKey],
        ranked: ev.ranked,
        ...(opts.perQuery ? { perQuery: ev.perQuery } : {}),
      };
      if (opts.json) {
        process.stdout.write(JSON.stringify(summary) + '\n');
        return;
      }
      const f4 = (x: number) => x.toFixed(4);
      process.stdout.write(
        `${opts.run} on ${corpus.name}: ${judged.length} judged queries (${summary.missingQueries} absent from the run, counted as empty; ${summary.unjudgedRunQueries} run queries without judgements left out)\n\n` +
          renderTable(
            ['P (set)', 'R (set)', 'F1 (set)', 'nDCG@10', 'MAP', 'R@100', 'MRR@10'],
            [
              [
                f4(summary.precision),
                f4(summary.recall),
                f4(summary.f1),
                f4(summary.ndcg10),
                f4(summary.map),
                f4(ev.ranked['r@100']),
                f4(ev.ranked['mrr@10']),
              ],
            ],
            { right: [0, 1, 2, 3, 4, 5, 6] },
          ),
      );
    });
}
