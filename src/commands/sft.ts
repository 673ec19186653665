/**
 * `cogr sft --dataset <name|path> [--format f] [--seed n] [--eval-fraction f] [--epochs n]
 *   [--m auto|n] [--n 15] [--query-targets planner|pooled] [--export <dir>] [--commit-index]
 *   [--db <path>] [--pseudo-queries n] [--json]`
 * `cogr sft --db <run db> [--export <dir>] [--pseudo-queries n] [--query-targets planner|oracle] [--json]`
 *
 * The SFT phase (Algorithm 1) for the embedded generators on the training queries of a
 * seeded train/eval split (the same split as `cogr evolve` with the same seed and
 * fraction): the query planner's relevance model and α, the base item keywords (M per
 * item, chosen on training F1 with `--m auto`) and the item policy trained on them, both
 * saved as round 0 in the project database (`policies` sublevel). `--commit-index` also
 * commits the base item keywords as a new item index generation. `--export <dir>` also
 * writes item.jsonl and query.jsonl in TRL's conversational prompt–completion format, the
 * query targets being the planner's keywords (default) or the paper's pooled targets (the
 * N most frequent keywords of a query's relevant items).
 *
 * `cogr sft --db <run db> [--export <dir>] [--json]` on a database that holds a co-evolution
 * run reads the run's own SFT step instead of splitting and training again
 * (src/evolve/sftData.ts): the SFT item generation's keywords of every item judged by a core
 * training query, the SFT planner's keywords of every core training query (planned as held
 * out), and the same for the dev queries under `<dir>/dev/` (a trainer's dev loss); the
 * prompts are compact (the user message alone, generators/prompts.ts); `<dir>/vocabulary.json`
 * holds the phrases query half-round r1-query's keywords may be (sftData.ts
 * exportQueryVocabulary: the keywords of its frozen item generation the planner may plan,
 * with their carrier counts). With `--pseudo-queries n`, `<dir>/pseudo.jsonl` holds up to n
 * pseudo-queries (item titles) with the SFT planner's keywords for them (sftData.ts
 * pseudoQueryTargets). `--query-targets oracle`: the judged (core and dev) queries' targets are
 * the greedy oracle's keywords of their judgements in the planner's vocabulary instead
 * (sftData.ts oracleTargets). Read from the published files: the database is not locked.
 */
import type { Command } from 'commander';
import { openDb } from '../../index/store/db.ts';
import { DEFAULTS, K_MAX } from '../../index/core/defaults.ts';
import { cogrError } from '../../index/core/errors.ts';
import { stderrLogger } from '../../index/core/log.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { buildQueryTargets, exportTrl, itemEntries, runSft } from '../../generators/sft.ts';
import { outputError } from '../output.ts';
import { loadDataset, parseFormat } from '../datasets/index.ts';
import { policyStore, savePlanner, savePolicy } from '../run/policies.ts';
import { judgedQueryIds, trainEvalSplit } from '../splits.ts';
import { exportQueryVocabulary, exportSftTargets, QUERY_TARGET_KINDS, runSftTargets } from '../evolve/sftData.ts';
import { openPublishedRun } from '../run/context.ts';
import { readRunAt } from '../run/state.ts';
import {
  dbPath,
  parseIntFlag,
  withDatasetOptions,
  withDbOption,
  RUN_EMBEDDINGS_HELP,
  withEmbeddingsOptions,
  type DatasetFlags,
  type EmbeddingsFlags,
} from './options.ts';
import { registerRunEmbeddings } from '../embeddings/dense.ts';

interface SftFlags extends Omit<DatasetFlags, 'dataset'>, EmbeddingsFlags {
  dataset?: string;
  seed: string;
  evalFraction: string;
  epochs: string;
  m: string;
  n: string;
  queryTargets: string;
  export?: string;
  pseudoQueries: string;
  commitIndex?: boolean;
  db?: string;
  json?: boolean;
}

export function register(program: Command): void {
  const cmd = withDbOption(
    withDatasetOptions(program.command('sft'), "the run's, when --db holds a co-evolution run: its SFT step is read, not made again")
      .option('--seed <n>', 'split and training seed', String(DEFAULTS.run.seed))
      .option('--eval-fraction <f>', 'share of judged queries held out', String(DEFAULTS.run.evalFraction))
      .option('--epochs <n>', 'SFT epochs per policy', String(DEFAULTS.run.sftEpochs))
      .option(
        '--m <n>',
        `keywords per item from the base generator (M), or auto: the best on training F1 of ${DEFAULTS.sft.itemKeywordsGrid.join(', ')}`,
        'auto',
      )
      .option('--n <n>', 'keywords per pooled query target (N, with --query-targets pooled)', String(DEFAULTS.sft.queryKeywords))
      .option(
        '--query-targets <kind>',
        "exported query targets: planner (its keywords, planned as held out), pooled (the paper's; without --db) or oracle (with --db: the greedy oracle's keywords of each judged query, in the planner's vocabulary; src/evolve/sftData.ts)",
        'planner',
      )
      .option('--export <dir>', 'also write item.jsonl / query.jsonl in TRL conversational prompt–completion format')
      .option(
        '--pseudo-queries <n>',
        "with --export on a run: also write pseudo.jsonl, up to n item titles as queries with the SFT planner's keywords for them (unjudged text: more query examples than the core training queries)",
        '0',
      )
      .option('--commit-index', 'also commit the item index built from the base item keywords as a new item generation'),
  ).option('--json', 'print a JSON summary');
  withEmbeddingsOptions(cmd, RUN_EMBEDDINGS_HELP).action(async function (this: Command, flags: SftFlags) {
    const stored = flags.dataset ? null : await readRunAt(dbPath(flags.db));
    if (!flags.dataset && !stored)
      throw cogrError('INVALID_ARGUMENT', `--dataset: required (the database ${dbPath(flags.db)} holds no co-evolution run)`);
    if (stored) {
      const given = ['seed', 'evalFraction', 'epochs', 'm', 'n', 'commitIndex', 'format'].filter(
        (k) => this.getOptionValueSource(k) === 'cli',
      );
      if (given.length > 0)
        throw cogrError(
          'INVALID_ARGUMENT',
          `${given.map((k) => '--' + k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())).join(', ')}: the database holds a run, whose SFT step is read as it was made; name --dataset to make a new one`,
        );
      const run = await openPublishedRun(dbPath(flags.db), { logger: stderrLogger });
      await registerRunEmbeddings(flags, run.config, run.corpus, stderrLogger);
      const pseudoQueries = parseIntFlag('--pseudo-queries', flags.pseudoQueries, 0)!;
      if (pseudoQueries > 0 && !flags.export)
        throw cogrError('INVALID_ARGUMENT', '--pseudo-queries: only with --export (they are written to its pseudo.jsonl)');
      const queryTargets = QUERY_TARGET_KINDS.find((k) => k === flags.queryTargets);
      if (!queryTargets)
        throw cogrError(
          'INVALID_ARGUMENT',
          `--query-targets: on a run, expected ${QUERY_TARGET_KINDS.join(' or ')}, got ${JSON.stringify(flags.queryTargets)} (pooled targets are made with --dataset)`,
        );
      const limit = Math.min(run.config.kMax ?? K_MAX, DEFAULTS.llm.maxKeywords);
      const t = await runSftTargets(run, { pseudoQueries, queryTargets, keywordLimit: limit });
      let exported: ReturnType<typeof exportSftTargets> | null = null;
      let vocabulary: Awaited<ReturnType<typeof exportQueryVocabulary>> | null = null;
      try {
        if (flags.export) {
          exported = exportSftTargets(run, t, flags.export, limit);
          vocabulary = await exportQueryVocabulary(run, flags.export);
        }
      } catch (e) {
        throw outputError(e, (e as { path?: string }).path ?? flags.export!);
      }
      const summary = {
        dataset: run.config.dataset,
        fromRun: true,
        itemGeneration: t.itemGeneration,
        items: t.items.size,
        queries: t.queries.size,
        devItems: t.devItems.size,
        devQueries: t.devQueries.size,
        keywordLimit: limit,
        queryTargets: t.queryTargets,
        exported: exported && flags.export ? { dir: flags.export, ...exported } : null,
        vocabulary,
      };
      process.stdout.write(
        flags.json
          ? JSON.stringify(summary) + '\n'
          : `the run's SFT step (item generation ${t.itemGeneration}): ${t.items.size} judged items and ${t.queries.size} core training queries with their SFT targets, ${t.devQueries.size} dev queries and ${t.devItems.size} dev-only items` +
              (t.queryTargets.kind === 'oracle'
                ? `; query targets: the oracle's keywords for ${t.queryTargets.oracle} judged queries, the planner's for ${t.queryTargets.planner} (no related shared keyword reaches a relevant item)`
                : '') +
              (exported ? `; wrote them to ${flags.export} (dev under ${flags.export}/dev)` : '') +
              (exported?.pseudo ? `, and ${exported.pseudo} pseudo-queries (item titles) to ${flags.export}/pseudo.jsonl` : '') +
              (vocabulary
                ? `; ${vocabulary.half}'s query vocabulary (${vocabulary.phrases} phrases of item generation ${vocabulary.itemGeneration} that ${vocabulary.minCarriers}+ items carry) to ${flags.export}/vocabulary.json`
                : '') +
              '\n',
      );
      return;
    }
    if (this.getOptionValueSource('pseudoQueries') === 'cli')
      throw cogrError(
        'INVALID_ARGUMENT',
        '--pseudo-queries: only with --db on a database that holds a co-evolution run (its SFT planner plans them)',
      );
    const seed = parseIntFlag('--seed', flags.seed, 0)!;
    const epochs = parseIntFlag('--epochs', flags.epochs, 0)!;
    const M = flags.m === 'auto' ? [...DEFAULTS.sft.itemKeywordsGrid] : parseIntFlag('--m', flags.m, 1)!;
    const N = parseIntFlag('--n', flags.n, 1)!;
    if (flags.queryTargets !== 'planner' && flags.queryTargets !== 'pooled')
      throw cogrError(
        'INVALID_ARGUMENT',
        `--query-targets: expected planner or pooled, got ${JSON.stringify(flags.queryTargets)}${flags.queryTargets === 'oracle' ? ' (oracle targets are read from a run: --db)' : ''}`,
      );
    const evalFraction = Number(flags.evalFraction);
    if (!(evalFraction > 0 && evalFraction < 1))
      throw cogrError('INVALID_ARGUMENT', `--eval-fraction: expected a number in (0, 1), got ${JSON.stringify(flags.evalFraction)}`);
    const { corpus } = await loadDataset(flags.dataset!, { format: parseFormat(flags.format), logger: stderrLogger });
    const split = trainEvalSplit(judgedQueryIds(corpus), { seed, evalFraction });
    const train = new Set(split.train);
    const trainQueries = corpus.queries.filter((q) => train.has(q.id));
    const r = runSft({ items: corpus.items, trainQueries, relevant: corpus.relevant, M, epochs, seed, logger: stderrLogger });
    const db = await openDb(dbPath(flags.db), { logger: stderrLogger });
    let itemGeneration: number | null = null;
    try {
      const store = policyStore(db);
      await savePolicy(store, 0, r.itemPolicy);
      await savePlanner(store, 0, r.planner, { dataset: flags.dataset!, ...(flags.format ? { format: flags.format } : {}) });
      if (flags.commitIndex) {
        const w = new KeywordIndexStore(db).writer('item', { mode: 'replace', base: null });
        for (const e of itemEntries(corpus.items, r.itemKeywords)) w.set(e.id, e.self, e.keywords);
        itemGeneration = await w.commit({ source: 'sft-base', dataset: corpus.name, M: r.M });
      }
    } finally {
      await db.close();
    }
    const queryTargets =
      flags.queryTargets === 'pooled' ? buildQueryTargets(trainQueries, corpus.relevant, r.itemKeywords, N) : r.queryTargets;
    let exported: ReturnType<typeof exportTrl> | null = null;
    try {
      if (flags.export)
        exported = exportTrl(flags.export, { items: corpus.items, itemKeywords: r.itemKeywords, queries: corpus.queries, queryTargets });
    } catch (e) {
      throw outputError(e, (e as { path?: string }).path ?? flags.export!);
    }
    const summary = {
      dataset: corpus.name,
      items: corpus.items.length,
      trainQueries: split.train.length,
      evalQueries: split.eval.length,
      itemKeywords: r.M,
      itemKeywordsCurve: r.mCurve,
      itemLoss: r.itemReport.epochLoss,
      itemTargetCoverage: r.itemReport.coverage,
      relevance: r.relevanceFit,
      alpha: r.planner.alpha,
      queryTargets: queryTargets.size,
      savedRound: 0,
      itemGeneration,
      exported: exported && flags.export ? { dir: flags.export, ...exported } : null,
    };
    if (flags.json) process.stdout.write(JSON.stringify(summary) + '\n');
    else {
      process.stdout.write(
        `SFT on ${summary.dataset}: ${summary.items} items, ${summary.trainQueries} training queries (${summary.evalQueries} held out)\n` +
          `relevance model: ${summary.relevance.pairs} (query, item) pairs in ${summary.relevance.rows} rows, ${summary.relevance.iterations} Newton steps; planner α ${summary.alpha}\n` +
          `item keywords M = ${summary.itemKeywords} (training F1 by M: ${summary.itemKeywordsCurve.map(([m, f]) => `${m}: ${f.toFixed(4)}`).join(', ')})\n` +
          `item policy: loss ${summary.itemLoss.map((x) => x.toFixed(3)).join(' → ')}, target coverage ${summary.itemTargetCoverage.toFixed(3)}\n` +
          `saved the item policy and the planner as round 0` +
          (itemGeneration !== null ? `; committed the base item index as item generation ${itemGeneration}` : '') +
          (exported ? `; wrote ${exported.item} item and ${exported.query} query examples to ${flags.export}` : '') +
          '\n',
      );
    }
  });
}
