/**
 * `cogr oracle --dataset <d> [--folds 5] [--db dir] [--json]`: the ceiling analysis
 * (src/evolve/oracle.ts) on the stored `cogr evolve` run of each fold — F1 of an oracle
 * query side over the SFT item generation (any keyword, shared keywords only, and what the run's planner may plan) and of an oracle item side against the SFT
 * planner's keywords, nDCG@10 of the served set perfectly ordered — beside cogr's own
 * figures (SFT and final step, served ranking) and BM25's on the same held-out queries.
 */
import { join } from 'node:path';
import type { Command } from 'commander';
import { openDb } from '../../index/store/db.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { servedSet } from '../../generators/planner/ranking.ts';
import { queryInput } from '../../generators/sft.ts';
import { datasetIdentity } from '../datasets/index.ts';
import { bm25OnSplit } from '../evolve/baseline.ts';
import { oracleFigures } from '../evolve/oracle.ts';
import { cogrHome } from '../home.ts';
import { loadRunCorpus } from '../run/corpus.ts';
import { plannerVocabulary } from '../run/config.ts';
import { openRun, runPlanner } from '../run/context.ts';
import { bestServing, readStoredRun, servedFloor, servedRanking } from '../run/state.ts';
import { renderTable } from '../table.ts';
import {
  parseIntFlag,
  withDatasetOptions,
  RUN_EMBEDDINGS_HELP,
  withEmbeddingsOptions,
  type DatasetFlags,
  type EmbeddingsFlags,
} from './options.ts';
import { registerRunEmbeddings } from '../embeddings/dense.ts';

const f4 = (x: number): string => x.toFixed(4);

export function register(program: Command): void {
  withEmbeddingsOptions(
    withDatasetOptions(
      program
        .command('oracle')
        .description(
          "ceiling analysis on the stored k-fold run: oracle query side, oracle item side and a perfectly ordered served set, beside cogr's and BM25's figures",
        ),
    )
      .option('--folds <n>', 'folds of the stored `cogr evolve` run', '5')
      .option('--db <dir>', 'folder of the per-fold run databases (default: $COGR_HOME/evolve/<dataset>/fold-<k>/db)')
      .option('--json', 'print one JSON object on stdout'),
    RUN_EMBEDDINGS_HELP,
  ).action(async (flags: DatasetFlags & EmbeddingsFlags & { folds: string; db?: string; json?: boolean }) => {
    const folds = parseIntFlag('--folds', flags.folds, 2)!;
    const identity = datasetIdentity(flags.dataset);
    const rows: Record<string, number | string>[] = [];
    // The stored runs' configuration (every fold's is the same run's): what re-makes them.
    let config: unknown = null;
    for (let k = 0; k < folds; k++) {
      const path = flags.db ? join(flags.db, `fold-${k}`) : join(cogrHome(), 'evolve', identity.folder, `fold-${k}`, 'db');
      const db = await openDb(path, { logger: stderrLogger });
      try {
        const stored = await readStoredRun(db);
        config ??= stored.config;
        const sft = stored.steps.find((s) => s.phase === 'sft');
        const best = bestServing(stored.steps);
        if (!sft || !best)
          throw cogrError(
            'NOT_FOUND',
            `fold ${k}: no finished SFT step in ${path}; run \`cogr evolve --dataset ${flags.dataset} --folds ${folds}\` first`,
          );
        const loaded = (await loadRunCorpus(stored.config, stderrLogger)).corpus;
        // Every fold's run is the same run's: its vectors once, in this thread.
        if (k === 0) await registerRunEmbeddings(flags, stored.config, loaded, stderrLogger, db);
        const run = await openRun(db, loaded, stored);
        const { corpus, evalQueries: queries } = run;
        const sftView = await run.store.openView('item', sft.itemGeneration);
        const sftPlanner = await runPlanner(run, 0);
        // cogr's served sets of the final step (its items, planner, floor), re-ordered by grade for the ceiling (so the ranker's order does not matter).
        const finalView = await run.store.openView('item', best.itemGeneration);
        const finalPlanner = await runPlanner(run, best.plannerRound);
        finalPlanner.attachOpposite(finalView);
        const floor = servedFloor(stored.steps);
        const served = new Map(
          queries.map((q) => {
            const input = queryInput(q);
            const found = finalView.search({ self: q.text, keywords: finalPlanner.plan(input).keywords }, { all: true }).items;
            return [q.id, servedSet(finalView, found, finalPlanner, input, floor).items.map((x) => x.id)];
          }),
        );
        const o = oracleFigures({
          corpus,
          queries,
          sftItemView: sftView,
          planner: sftPlanner,
          served,
          kMax: run.config.kMax,
          minCarriers: run.config.minCarriers,
          rule: plannerVocabulary(run.config),
        });
        const finalStep = run.steps.find((s) => s.step === best.step)!;
        const bm25 = bm25OnSplit(corpus, run.split);
        rows.push({
          fold: k,
          queries: o.queries,
          oracle_query_f1: o.oracleQueryF1,
          oracle_shared_query_f1: o.oracleSharedQueryF1,
          oracle_planned_query_f1: o.oraclePlannedQueryF1,
          oracle_item_f1: o.oracleItemF1,
          sft_f1: sft.metrics.f1,
          final_f1: finalStep.metrics.f1,
          bm25_f1: bm25.f1,
          perfect_order_ndcg10: o.perfectOrderNdcg10,
          final_ndcg10: servedRanking(run.steps, finalStep).ndcg10,
          bm25_ndcg10: bm25.ndcg10,
        });
      } finally {
        await db.close();
      }
    }
    const keys = [
      'oracle_query_f1',
      'oracle_shared_query_f1',
      'oracle_planned_query_f1',
      'oracle_item_f1',
      'sft_f1',
      'final_f1',
      'bm25_f1',
      'perfect_order_ndcg10',
      'final_ndcg10',
      'bm25_ndcg10',
    ] as const;
    const total = rows.reduce((a, r) => a + Number(r.queries), 0) || 1;
    const mean = Object.fromEntries(keys.map((key) => [key, rows.reduce((a, r) => a + Number(r[key]) * Number(r.queries), 0) / total]));
    if (flags.json) {
      process.stdout.write(JSON.stringify({ dataset: flags.dataset, folds, config, mean, perFold: rows }) + '\n');
      return;
    }
    process.stdout.write(`\nCeiling analysis on ${flags.dataset}, ${folds} folds (means over held-out queries)\n\n`);
    const table = [
      ...rows.map((r) => [String(r.fold), ...keys.map((key) => f4(Number(r[key])))]),
      ['all', ...keys.map((key) => f4(mean[key]))],
    ];
    process.stdout.write(
      renderTable(
        [
          'fold',
          'oracle query F1',
          'oracle query F1, shared keywords',
          'oracle query F1, plannable keywords',
          'oracle item F1',
          'SFT F1',
          'final F1',
          'BM25 F1',
          'perfect-order nDCG@10',
          'final nDCG@10',
          'BM25 nDCG@10',
        ],
        table,
        { right: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] },
      ),
    );
  });
}
