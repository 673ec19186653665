/**
 * BEIR collections: a folder with
 * - `corpus.jsonl`: `{"_id", "title", "text", "metadata"?}` per line;
 * - `queries.jsonl`: `{"_id", "text", "metadata"?}` per line;
 * - `qrels/*.tsv`: `query-id<TAB>corpus-id<TAB>score` with that header line. All tsv
 *   files under qrels/ are read (train, dev, test): their union is the judgement set.
 *   Score >= 1 is relevant; score 0 is judged not relevant.
 * Items keep BEIR's title (empty when the corpus has none) and text.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { CorpusBuilder, type ParsedDataset, formatError, idSchema, parseGrade, readJsonl, readLines } from './common.ts';

const corpusLine = z.object({ _id: idSchema, title: z.string().optional().default(''), text: z.string() });
const queryLine = z.object({ _id: idSchema, text: z.string().min(1) });

export function beirFiles(dir: string): { corpus: string; queries: string; qrels: string[] } {
  const corpus = join(dir, 'corpus.jsonl');
  const queries = join(dir, 'queries.jsonl');
  const qdir = join(dir, 'qrels');
  const qrels = existsSync(qdir)
    ? readdirSync(qdir)
        .filter((f) => f.endsWith('.tsv'))
        .sort()
        .map((f) => join(qdir, f))
    : [];
  const missing = [
    !existsSync(corpus) && 'corpus.jsonl',
    !existsSync(queries) && 'queries.jsonl',
    qrels.length === 0 && 'qrels/*.tsv',
  ].filter(Boolean);
  if (missing.length > 0) throw cogrError('DATA_MISSING', `${dir}: BEIR collection needs ${missing.join(', ')}`);
  return { corpus, queries, qrels };
}

export function loadBeir(dir: string, name: string, logger?: Logger): ParsedDataset {
  const files = beirFiles(dir);
  const b = new CorpusBuilder();
  for (const { value, line } of readJsonl(files.corpus, corpusLine)) {
    b.addItem({ id: value._id, title: value.title.trim(), text: value.text.trim() }, `${files.corpus}:${line}`);
  }
  for (const { value, line } of readJsonl(files.queries, queryLine)) {
    b.addQuery({ id: value._id, text: value.text.trim() }, `${files.queries}:${line}`);
  }
  for (const file of files.qrels) {
    const lines = readLines(file);
    const header = (lines[0] ?? '').split('\t').map((s) => s.trim());
    if (header[0] !== 'query-id' || header[1] !== 'corpus-id' || header[2] !== 'score') {
      throw cogrError('DATA_MISSING', `${file}:1: expected the header "query-id<TAB>corpus-id<TAB>score"`, { file, line: 1 });
    }
    for (let i = 1; i < lines.length; i++) {
      if (lines[i].trim() === '') continue;
      const cols = lines[i].split('\t').map((s) => s.trim());
      if (cols.length !== 3 || cols[0] === '' || cols[1] === '') {
        throw formatError(file, i + 1, `expected "query-id<TAB>corpus-id<TAB>score", found ${cols.length} column(s)`);
      }
      b.addJudgement(cols[0], cols[1], parseGrade(cols[2], file, i + 1), `${file}:${i + 1}`);
    }
  }
  return b.build(name, logger);
}
