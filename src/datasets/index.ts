/**
 * Loading datasets: `loadDataset(nameOrPath)` resolves a shipped or registered name
 * or a folder path (registry.ts), detects the format from the files unless one is
 * given (detect.ts), and runs that format's loader. Every loader returns one corpus
 * shape (index/core/types.ts Corpus); see common.ts for the shared rules (relevance
 * threshold grade >= 1, duplicate ids, unknown-id judgements counted in warnings).
 */
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { DATASET_FORMATS, type DatasetFormat, type LoadedDataset, type ParsedDataset } from './common.ts';
import { detectFormat } from './detect.ts';
import { resolveDataset } from './registry.ts';
import { loadBeir } from './beir.ts';
import { loadJsonl } from './jsonl.ts';
import { loadSmart } from './smart.ts';
import { loadTrec } from './trec.ts';
import { loadWands } from './wands.ts';

export type { DatasetFormat, LoadedDataset } from './common.ts';
export { checkRegistration, datasetIdentity, listDatasets, registerDataset, unregisterDataset } from './registry.ts';

export interface LoadDatasetOptions {
  format?: DatasetFormat;
  logger?: Logger;
}

const optionsSchema = z.object({
  format: z.enum(DATASET_FORMATS, { message: `format must be one of ${DATASET_FORMATS.join(', ')}` }).optional(),
  logger: z.any().optional(),
});

const LOADERS: Record<DatasetFormat, (dir: string, name: string, logger?: Logger) => ParsedDataset> = {
  smart: loadSmart,
  trec: loadTrec,
  beir: loadBeir,
  wands: loadWands,
  jsonl: loadJsonl,
};

/** Parse a `--format` value (INVALID_ARGUMENT naming the field otherwise). */
export function parseFormat(value: string | undefined): DatasetFormat | undefined {
  if (value === undefined) return undefined;
  if ((DATASET_FORMATS as readonly string[]).includes(value)) return value as DatasetFormat;
  throw cogrError('INVALID_ARGUMENT', `format: ${JSON.stringify(value)} is not one of ${DATASET_FORMATS.join(', ')}`);
}

export async function loadDataset(nameOrPath: string, opts: LoadDatasetOptions = {}): Promise<LoadedDataset> {
  const parsed = optionsSchema.safeParse(opts);
  if (!parsed.success) throw schemaError('INVALID_ARGUMENT', parsed.error);
  if (typeof nameOrPath !== 'string' || nameOrPath.trim() === '') {
    throw cogrError('INVALID_ARGUMENT', 'dataset: expected a dataset name or a folder path');
  }
  const entry = resolveDataset(nameOrPath);
  const format = opts.format ?? entry.format ?? detectFormat(entry.path);
  const { corpus, warnings } = LOADERS[format](entry.path, entry.name, opts.logger);
  if (corpus.items.length === 0) throw cogrError('DATA_MISSING', `${entry.path}: the dataset has no items`);
  return { corpus, format, source: entry.path, warnings };
}
