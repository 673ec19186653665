/**
 * Expected quality per shipped dataset (data/expected-quality.json), in the spirit of
 * Pyserini's 2CR files: the figures live beside the data and `cogr baseline bm25 --check`
 * compares a fresh run with them (5 folds, seed 1), failing when any metric is off by more
 * than the file's tolerance.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import { dataRoot } from '../datasets/registry.ts';

const Metrics = z.object({ f1: z.number(), precision: z.number(), recall: z.number(), ndcg10: z.number() });
const ExpectedSchema = z.object({
  bm25: z.record(z.string(), Metrics),
  'bm25-lucene': z.record(z.string(), Metrics).optional(),
  tolerance: z.number().positive(),
});
export type ExpectedQuality = z.infer<typeof ExpectedSchema>;

export function expectedQualityPath(): string {
  return join(dataRoot(), 'expected-quality.json');
}

export function readExpectedQuality(path = expectedQualityPath()): ExpectedQuality {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw cogrError('DATA_FORMAT', `${path}: cannot read expected quality (${(e as Error).message})`);
  }
  const r = ExpectedSchema.safeParse(raw);
  if (!r.success) throw schemaError('DATA_FORMAT', r.error, { what: path });
  return r.data;
}

export interface CheckRow {
  metric: string;
  expected: number;
  measured: number;
  ok: boolean;
}

/** Compare measured BM25 figures with the expected ones of a dataset (`bm25` for the wink analysis, `bm25-lucene` for the Lucene one). */
export function checkBm25(
  dataset: string,
  measured: z.infer<typeof Metrics>,
  analysis: 'lucene' | 'wink' | ExpectedQuality = 'wink',
  expectedIn?: ExpectedQuality,
): CheckRow[] {
  const expected = typeof analysis === 'object' ? analysis : (expectedIn ?? readExpectedQuality());
  const table = typeof analysis === 'object' || analysis === 'wink' ? expected.bm25 : (expected['bm25-lucene'] ?? {});
  const want = table[dataset];
  if (!want)
    throw cogrError(
      'NOT_FOUND',
      `--check: no expected BM25 figures for dataset ${JSON.stringify(dataset)}${typeof analysis === 'string' ? ` with the ${analysis} analysis` : ''} (known: ${Object.keys(table).join(', ')})`,
    );
  return (['f1', 'precision', 'recall', 'ndcg10'] as const).map((m) => ({
    metric: m,
    expected: want[m],
    measured: measured[m],
    ok: Math.abs(measured[m] - want[m]) <= expected.tolerance,
  }));
}
