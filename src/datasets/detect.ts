/**
 * Format detection from the files in a dataset folder. The first rule that matches
 * wins, most specific first:
 *   jsonl  items.jsonl                 beir   corpus.jsonl
 *   wands  product.csv + label.csv     trec   a *.docs file
 *   smart  a *.ALL file (any case)
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import type { DatasetFormat } from './common.ts';

export function detectFormat(dir: string): DatasetFormat {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw cogrError('DATA_MISSING', `${dir}: not a folder`, { path: dir });
  }
  const names = readdirSync(dir);
  const has = (f: string): boolean => names.includes(f);
  if (has('items.jsonl')) return 'jsonl';
  if (has('corpus.jsonl')) return 'beir';
  if (has('product.csv') && has('label.csv')) return 'wands';
  if (names.some((f) => f.endsWith('.docs'))) return 'trec';
  if (names.some((f) => f.toLowerCase().endsWith('.all') && statSync(join(dir, f)).isFile())) return 'smart';
  throw cogrError(
    'DATA_MISSING',
    `${dir}: cannot detect the dataset format (expected items.jsonl, corpus.jsonl, product.csv + label.csv, *.docs or *.ALL); name it with --format`,
    { path: dir },
  );
}
