/**
 * `cogr baseline bm25 --dataset <name|path> [--format f] [--folds 5] [--seed 1]
 * [--max-cutoff 1000] [--json]`: the paper's BM25 baseline with a cut-off tuned on
 * training folds. A readable table by default; `--json` prints one JSON object on
 * stdout. Progress goes to stderr.
 */
import type { Command } from 'commander';
import { cogrError } from '../../index/errors.ts';
import { DEFAULTS } from '../../index/defaults.ts';
import { stderrLogger } from '../../index/log.ts';
import { runBm25Baseline, type Bm25BaselineResult } from '../baseline/bm25.ts';
import { checkBm25 } from '../baseline/expected.ts';
import { loadDataset, parseFormat } from '../datasets/index.ts';
import { renderTable } from '../table.ts';
import { parseIntFlag, withDatasetOptions, type DatasetFlags } from './options.ts';

const f4 = (x: number): string => x.toFixed(4);

export function renderBm25(r: Bm25BaselineResult): string {
  const head = `BM25 baseline on ${r.dataset}: ${r.items} items, ${r.judgedQueries} judged queries, ${r.folds} folds (seed ${r.seed}), k1=${r.k1} b=${r.b}\n\n`;
  const rows = r.perFold.map((f) => [
    String(f.fold),
    String(f.trainQueries),
    String(f.evalQueries),
    String(f.cutoff),
    f4(f.trainF1),
    f4(f.precision),
    f4(f.recall),
    f4(f.f1),
    f4(f.ndcg10),
  ]);
  rows.push(['all', '', String(r.judgedQueries), '', '', f4(r.precision), f4(r.recall), f4(r.f1), f4(r.ndcg10)]);
  const folds = renderTable(['fold', 'train', 'eval', 'cutoff', 'train F1', 'P', 'R', 'F1', 'nDCG@10'], rows, { right: [1, 2, 3, 4, 5, 6, 7, 8] });
  const ks = [...new Set(Object.keys(r.ranked).map((k) => Number(k.split('@')[1])))];
  const names = ['mrr', 'ndcg', 'ndcgBinary', 'p', 'r', 'f1', 'hit'] as const;
  const ranked = renderTable(
    ['k', ...names],
    ks.map((k) => [String(k), ...names.map((n) => f4(r.ranked[`${n}@${k}`]))]),
    { right: names.map((_, i) => i + 1).concat(0) },
  );
  return `${head}${folds}\nranked metrics over all held-out queries (BM25 ranking, top 1000):\n${ranked}`;
}

export function register(program: Command): void {
  const baseline = program.command('baseline');
  withDatasetOptions(baseline.command('bm25').description('BM25 over raw item text with the retrieval cut-off tuned on training folds to maximise F1'))
    .option('--folds <n>', 'cross-validation folds over judged queries', String(DEFAULTS.run.folds))
    .option('--seed <n>', 'seed of the fold assignment', String(DEFAULTS.run.seed))
    .option('--max-cutoff <n>', 'largest retrieval cut-off searched', String(DEFAULTS.baseline.maxCutoff))
    .option('--json', 'print one JSON object on stdout')
    .option('--check', 'compare with data/expected-quality.json (5 folds, seed 1); exit non-zero when a metric is off')
    .action(async (opts: DatasetFlags & { folds: string; seed: string; maxCutoff: string; json?: boolean; check?: boolean }) => {
      const folds = parseIntFlag('--folds', opts.folds, 2)!;
      const seed = parseIntFlag('--seed', opts.seed, 0)!;
      const maxCutoff = parseIntFlag('--max-cutoff', opts.maxCutoff, 1)!;
      const format = parseFormat(opts.format);
      const { corpus } = await loadDataset(opts.dataset, { ...(format ? { format } : {}), logger: stderrLogger });
      const r = runBm25Baseline(corpus, { folds, seed, maxCutoff, logger: stderrLogger });
      if (opts.check) {
        if (folds !== 5 || seed !== 1) throw cogrError('INVALID_ARGUMENT', '--check: the expected figures are for --folds 5 --seed 1');
        const rows = checkBm25(corpus.name, r);
        const bad = rows.filter((x) => !x.ok);
        if (opts.json) process.stdout.write(JSON.stringify({ dataset: corpus.name, ok: bad.length === 0, rows }) + '\n');
        else process.stdout.write(rows.map((x) => `${x.ok ? 'ok  ' : 'FAIL'} ${x.metric.padEnd(9)} expected ${f4(x.expected)} measured ${f4(x.measured)}`).join('\n') + '\n');
        if (bad.length > 0) throw cogrError('QUALITY_REGRESSION', `BM25 on ${corpus.name} is off the expected figures: ${bad.map((x) => x.metric).join(', ')}`);
        return;
      }
      if (opts.json) process.stdout.write(JSON.stringify(r) + '\n');
      else process.stdout.write(renderBm25(r));
    });
}
