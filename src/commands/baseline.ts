/**
 * `cogr baseline bm25|rm3|model --dataset <name|path> [--format f] [--folds 5] [--seed 1]
 * [--json]`: the paper's BM25 baseline with a cut-off tuned on training folds, BM25 +
 * RM3 tuned the same way, and the relevance model with an expected-F1 cut. A readable table by default; `--json` prints one JSON object on
 * stdout. Progress goes to stderr.
 */
import type { Command } from 'commander';
import { cogrError } from '../../index/core/errors.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { stderrLogger } from '../../index/core/log.ts';
import type { Corpus } from '../../index/core/types.ts';
import { runBm25Baseline, type Bm25BaselineResult } from '../baseline/bm25.ts';
import { checkBm25 } from '../baseline/expected.ts';
import { loadDataset, parseFormat } from '../datasets/index.ts';
import { renderTable } from '../table.ts';
import {
  EMBEDDINGS_AUTO_HELP,
  parseChoice,
  parseIntFlag,
  parseNumberFlag,
  withDatasetOptions,
  type DatasetFlags,
  type EmbeddingsFlags,
} from './options.ts';
import { RM3_DEFAULTS, runRm3Baseline } from '../baseline/rm3.ts';
import { runModelBaseline } from '../baseline/model.ts';
import { runDenseBaseline } from '../baseline/dense.ts';
import { embeddingsSetupOf } from '../embeddings/dense.ts';
import { TEXT_ANALYSES } from '../../index/text/english.ts';
import { writeRunFile, type RunQuery } from '../trec.ts';

const RUN_FILE_HELP =
  "write every judged query's ranking (its top --max-cutoff items, at most 1000 for model) as a TREC run file (qid Q0 docid rank score tag; ties by docid as trec_eval)";

/** Write a baseline's run file and say so on stderr. */
async function writeRun(path: string | undefined, run: RunQuery[], tag: string): Promise<void> {
  if (path === undefined) return;
  const lines = await writeRunFile(path, run, tag);
  stderrLogger.info(`run file ${path}: ${run.length} queries, ${lines} lines (tag ${tag})`);
}

const f4 = (x: number): string => x.toFixed(4);

export function renderBm25(
  r: Bm25BaselineResult,
  title = `BM25 baseline on ${r.dataset}`,
  what = 'BM25 ranking, top 1000',
  params: string | null = `k1=${r.k1} b=${r.b}, ${r.analysis} analysis`,
): string {
  const head = `${title}: ${r.items} items, ${r.judgedQueries} judged queries, ${r.folds} folds (seed ${r.seed})${params === null ? '' : `, ${params}`}\n\n`;
  const rows = r.perFold.map((f) => [
    String(f.fold),
    String(f.trainQueries),
    String(f.evalQueries),
    Number.isInteger(f.cutoff) ? String(f.cutoff) : f.cutoff.toFixed(1),
    f4(f.trainF1),
    f4(f.precision),
    f4(f.recall),
    f4(f.f1),
    f4(f.ndcg10),
    f4(f.map),
  ]);
  rows.push(['all', '', String(r.judgedQueries), '', '', f4(r.precision), f4(r.recall), f4(r.f1), f4(r.ndcg10), f4(r.map)]);
  const folds = renderTable(['fold', 'train', 'eval', 'cutoff', 'train F1', 'P', 'R', 'F1', 'nDCG@10', 'MAP'], rows, {
    right: [1, 2, 3, 4, 5, 6, 7, 8, 9],
  });
  const ks = [...new Set(Object.keys(r.ranked).map((k) => Number(k.split('@')[1])))];
  const names = ['mrr', 'ndcg', 'ndcgBinary', 'p', 'r', 'f1', 'hit', 'ap'] as const;
  const ranked = renderTable(
    ['k', ...names],
    ks.map((k) => [String(k), ...names.map((n) => f4(r.ranked[`${n}@${k}`]))]),
    { right: names.map((_, i) => i + 1).concat(0) },
  );
  return `${head}${folds}\nranked metrics over all held-out queries (${what}):\n${ranked}`;
}

/** `--folds`, `--seed` and (for a ranking cut on the training folds) `--max-cutoff`: the options every baseline shares. */
function withFoldOptions(cmd: Command, seedHelp: string, cutoff: boolean): Command {
  cmd
    .option('--folds <n>', 'cross-validation folds over judged queries', String(DEFAULTS.run.folds))
    .option('--seed <n>', seedHelp, String(DEFAULTS.run.seed));
  return cutoff ? cmd.option('--max-cutoff <n>', 'largest retrieval cut-off searched', String(DEFAULTS.baseline.maxCutoff)) : cmd;
}

/** `--run-file`, `--run-tag` and `--json`: how a baseline's result leaves the command. */
function withOutputOptions(cmd: Command, runFileHelp: string, tag: string): Command {
  return cmd
    .option('--run-file <path>', runFileHelp)
    .option('--run-tag <tag>', "the run file's tag column", tag)
    .option('--json', 'print one JSON object on stdout');
}

interface FoldFlags extends DatasetFlags {
  folds: string;
  seed: string;
  maxCutoff?: string;
  runFile?: string;
  runTag: string;
  json?: boolean;
}

function parseFolds(opts: FoldFlags): { folds: number; seed: number; maxCutoff: number } {
  return {
    folds: parseIntFlag('--folds', opts.folds, 2)!,
    seed: parseIntFlag('--seed', opts.seed, 0)!,
    maxCutoff: opts.maxCutoff === undefined ? DEFAULTS.baseline.maxCutoff : parseIntFlag('--max-cutoff', opts.maxCutoff, 1)!,
  };
}

async function loadCorpus(opts: DatasetFlags): Promise<Corpus> {
  const format = parseFormat(opts.format);
  return (await loadDataset(opts.dataset, { ...(format ? { format } : {}), logger: stderrLogger })).corpus;
}

/** Write the run file, then the result: one JSON object with --json, else the text. */
async function emit(opts: FoldFlags, run: RunQuery[], r: unknown, text: () => string): Promise<void> {
  await writeRun(opts.runFile, run, opts.runTag);
  process.stdout.write(opts.json ? JSON.stringify(r) + '\n' : text());
}

export function register(program: Command): void {
  const baseline = program.command('baseline');
  withOutputOptions(
    withFoldOptions(
      withDatasetOptions(
        baseline.command('bm25').description('BM25 over raw item text with the retrieval cut-off tuned on training folds to maximise F1'),
      ),
      'seed of the fold assignment',
      true,
    ),
    RUN_FILE_HELP,
    'cogr-bm25',
  )
    .option(
      '--analysis <name>',
      `text analysis: lucene (Lucene's EnglishAnalyzer, as Pyserini: UAX #29 words, possessives, 33 stop words, Porter v1) | wink (lower-case letter/digit runs, wink's stop words, no stemming) (default ${DEFAULTS.baseline.analysis})`,
      DEFAULTS.baseline.analysis,
    )
    .option('--check', 'compare with data/expected-quality.json (5 folds, seed 1, per analysis); exit non-zero when a metric is off')
    .action(async (opts: FoldFlags & { analysis: string; check?: boolean }) => {
      const { folds, seed, maxCutoff } = parseFolds(opts);
      const analysis = parseChoice('--analysis', opts.analysis, TEXT_ANALYSES);
      const corpus = await loadCorpus(opts);
      const run: RunQuery[] = [];
      const r = runBm25Baseline(corpus, { folds, seed, maxCutoff, analysis, logger: stderrLogger, run });
      if (opts.check) {
        await writeRun(opts.runFile, run, opts.runTag);
        if (folds !== 5 || seed !== 1) throw cogrError('INVALID_ARGUMENT', '--check: the expected figures are for --folds 5 --seed 1');
        const rows = checkBm25(corpus.name, r, analysis);
        const bad = rows.filter((x) => !x.ok);
        if (opts.json) process.stdout.write(JSON.stringify({ dataset: corpus.name, ok: bad.length === 0, rows }) + '\n');
        else
          process.stdout.write(
            rows
              .map((x) => `${x.ok ? 'ok  ' : 'FAIL'} ${x.metric.padEnd(9)} expected ${f4(x.expected)} measured ${f4(x.measured)}`)
              .join('\n') + '\n',
          );
        if (bad.length > 0)
          throw cogrError(
            'QUALITY_REGRESSION',
            `BM25 on ${corpus.name} is off the expected figures: ${bad.map((x) => x.metric).join(', ')}`,
          );
        return;
      }
      await emit(opts, run, r, () => renderBm25(r));
    });

  withFoldOptions(
    withDatasetOptions(
      baseline
        .command('rm3')
        .description(
          "BM25 + RM3 pseudo-relevance feedback (Anserini's defaults: 10 feedback items, 10 terms, original query weight 0.5), cut-off tuned on training folds",
        ),
    ),
    'seed of the fold assignment',
    true,
  )
    .option('--fb-docs <n>', 'feedback items', String(RM3_DEFAULTS.fbDocs))
    .option('--fb-terms <n>', 'feedback terms', String(RM3_DEFAULTS.fbTerms))
    .option('--original-query-weight <x>', 'weight of the original query in the expanded one', String(RM3_DEFAULTS.originalQueryWeight))
    .option(
      '--analysis <name>',
      `text analysis: lucene (Lucene's EnglishAnalyzer, as Pyserini) | wink (letter/digit runs, wink's stop words, no stemming) (default ${DEFAULTS.baseline.analysis})`,
      DEFAULTS.baseline.analysis,
    )
    .option('--run-file <path>', RUN_FILE_HELP)
    .option('--run-tag <tag>', "the run file's tag column", 'cogr-rm3')
    .option('--json', 'print one JSON object on stdout')
    .action(async (opts: FoldFlags & { fbDocs: string; fbTerms: string; originalQueryWeight: string; analysis: string }) => {
      const { folds, seed, maxCutoff } = parseFolds(opts);
      const rm3 = {
        fbDocs: parseIntFlag('--fb-docs', opts.fbDocs, 1)!,
        fbTerms: parseIntFlag('--fb-terms', opts.fbTerms, 1)!,
        originalQueryWeight: parseNumberFlag('--original-query-weight', opts.originalQueryWeight, { integer: false })!,
      };
      const corpus = await loadCorpus(opts);
      const analysis = parseChoice('--analysis', opts.analysis, TEXT_ANALYSES);
      const run: RunQuery[] = [];
      const r = runRm3Baseline(corpus, { folds, seed, maxCutoff, analysis, rm3, logger: stderrLogger, run });
      await emit(opts, run, r, () =>
        renderBm25(
          r,
          `BM25 + RM3 baseline on ${r.dataset} (${r.rm3.fbDocs} feedback items, ${r.rm3.fbTerms} terms, original query weight ${r.rm3.originalQueryWeight})`,
          'BM25 + RM3 ranking, top 1000',
        ),
      );
    });

  withFoldOptions(
    withDatasetOptions(
      baseline
        .command('model')
        .description(
          "the planner's relevance model p(item | query) without the keyword constraint: every item sorted by p, cut where the expected F1 peaks (α tuned on training folds)",
        ),
    ),
    'seed of the fold assignment and the fit',
    false,
  )
    .option(
      '--relevance-analysis <name>',
      `the words of the relevance model's text BM25 features: wink | lucene (default ${DEFAULTS.relevance.textAnalysis})`,
      DEFAULTS.relevance.textAnalysis,
    )
    .option(
      '--relevance-rm3 <yes|no>',
      `the relevance model's BM25 + RM3 features (default ${DEFAULTS.relevance.rm3 ? 'yes' : 'no'})`,
      DEFAULTS.relevance.rm3 ? 'yes' : 'no',
    )
    .option(
      '--run-file <path>',
      "write every judged query's ranking by p (the fold where it is held out; top 1000) as a TREC run file (qid Q0 docid rank score tag; ties by docid as trec_eval)",
    )
    .option('--run-tag <tag>', "the run file's tag column", 'cogr-model')
    .option('--json', 'print one JSON object on stdout')
    .action(async (opts: FoldFlags & { relevanceAnalysis: string; relevanceRm3: string }) => {
      const { folds, seed } = parseFolds(opts);
      const textAnalysis = parseChoice('--relevance-analysis', opts.relevanceAnalysis, TEXT_ANALYSES);
      const rm3 = parseChoice('--relevance-rm3', opts.relevanceRm3, ['yes', 'no'] as const) === 'yes';
      const corpus = await loadCorpus(opts);
      const run: RunQuery[] = [];
      const r = runModelBaseline(corpus, { folds, seed, relevance: { textAnalysis, rm3 }, logger: stderrLogger, run });
      await emit(opts, run, r, () =>
        renderBm25(
          r,
          `relevance-model baseline on ${r.dataset} (expected-F1 cut; α per fold ${r.alphas.join(', ')}; cutoff = mean set size)`,
          'items by p, top 1000',
        ),
      );
    });

  const denseCmd = withDatasetOptions(
    baseline
      .command('dense')
      .description(
        "dense retrieval: items by the cosine of their embedding with the query's (an OpenAI-compatible /v1/embeddings endpoint, e.g. cogr embeddings serve), cut-off tuned on training folds as BM25's; vectors cached in the project database",
      ),
  )
    .requiredOption(
      '--embeddings <url>',
      `the base URL of the embeddings API, e.g. http://127.0.0.1:8001/v1, or auto: ${EMBEDDINGS_AUTO_HELP}`,
    )
    .option('--model <name>', 'the embeddings model to ask for (default: the first one the endpoint lists)')
    .option(
      '--embeddings-timeout <ms>',
      'deadline of one embeddings request in milliseconds (default $COGR_EMBEDDINGS_TIMEOUT_MS, else 120000)',
    )
    .option('--db <dir>', 'the database caching the vectors by model and text digest (default $COGR_HOME/db)');
  const dense = withOutputOptions(withFoldOptions(denseCmd, 'seed of the fold assignment', true), RUN_FILE_HELP, 'cogr-dense');
  dense.action(async (opts: FoldFlags & EmbeddingsFlags & { model?: string; db?: string }) => {
    const { folds, seed, maxCutoff } = parseFolds(opts);
    const setup = (await embeddingsSetupOf(
      {
        embeddings: opts.embeddings,
        ...(opts.model !== undefined ? { embeddingsModel: opts.model } : {}),
        ...(opts.embeddingsTimeout !== undefined ? { embeddingsTimeout: opts.embeddingsTimeout } : {}),
        ...(opts.db !== undefined ? { embeddingsCache: opts.db } : {}),
      },
      stderrLogger,
    ))!;
    const corpus = await loadCorpus(opts);
    const run: RunQuery[] = [];
    const r = await runDenseBaseline(corpus, setup, { folds, seed, maxCutoff, logger: stderrLogger }, run);
    await emit(opts, run, r, () =>
      renderBm25(
        r,
        `dense baseline on ${r.dataset} (${r.model}, dimension ${r.dim}, cosine over all items)`,
        'items by cosine, top 1000',
        null,
      ),
    );
  });
}
