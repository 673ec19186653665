/**
 * NFCorpus / TREC-style tab-separated collections.
 *
 * A folder holds (found by extension):
 * - one `*.docs` file: `id<TAB>text` or `id<TAB>title<TAB>text`, one item per line;
 * - one or more `*.queries` files: `id<TAB>text`. Several files are merged; an id in
 *   two files must carry the same text (NFCorpus's q-nontopictitles is a subset of
 *   q-titles), otherwise it is a DUPLICATE_ID error;
 * - one or more `*.qrel` / `*.qrels` files: `qid 0 docid grade` (white space
 *   separated, TREC qrels). Grade >= 1 is relevant (NFCorpus grades 1 and 2 both are).
 *
 * Items with two columns (NFCorpus: title merged into the lower-cased, stop-worded
 * text) get as `title` the words before the first "abstract" or "summary" marker among
 * the first 40 words (NFCorpus writes "<title> abstract <body>"; this holds for all
 * but 20 of its 3,162 items), otherwise the first 12 words. `text` stays the whole
 * column, title included.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { CorpusBuilder, type ParsedDataset, formatError, parseGrade, readLines } from './common.ts';

const TITLE_MARKERS = new Set(['abstract', 'summary']);

/** Title of an item whose title is merged into its text (see the module comment). */
export function mergedTitle(text: string): string {
  const words = text.split(/\s+/).filter(Boolean);
  const limit = Math.min(words.length, 40);
  for (let i = 1; i < limit; i++) if (TITLE_MARKERS.has(words[i].toLowerCase())) return words.slice(0, i).join(' ');
  return words.slice(0, 12).join(' ');
}

export function trecFiles(dir: string): { docs: string; queries: string[]; qrels: string[] } {
  const names = readdirSync(dir).sort();
  const docs = names.filter((f) => f.endsWith('.docs'));
  const queries = names.filter((f) => f.endsWith('.queries'));
  const qrels = names.filter((f) => f.endsWith('.qrel') || f.endsWith('.qrels'));
  const missing = [docs.length === 0 && '*.docs', queries.length === 0 && '*.queries', qrels.length === 0 && '*.qrel'].filter(Boolean);
  if (missing.length > 0) throw cogrError('DATA_MISSING', `${dir}: TREC collection needs ${missing.join(', ')}`);
  if (docs.length > 1) throw cogrError('DATA_FORMAT', `${dir}: more than one *.docs file (${docs.join(', ')})`);
  return { docs: join(dir, docs[0]), queries: queries.map((f) => join(dir, f)), qrels: qrels.map((f) => join(dir, f)) };
}

export function loadTrec(dir: string, name: string, logger?: Logger): ParsedDataset {
  const files = trecFiles(dir);
  const b = new CorpusBuilder();
  const docLines = readLines(files.docs);
  for (let i = 0; i < docLines.length; i++) {
    const line = docLines[i];
    if (line.trim() === '') continue;
    const cols = line.split('\t');
    const where = `${files.docs}:${i + 1}`;
    if (cols.length < 2 || cols.length > 3 || cols[0].trim() === '') {
      throw formatError(files.docs, i + 1, `expected "id<TAB>text" or "id<TAB>title<TAB>text", found ${cols.length} column(s)`);
    }
    const id = cols[0].trim();
    if (cols.length === 3) b.addItem({ id, title: cols[1].trim(), text: cols[2].trim() }, where);
    else b.addItem({ id, title: mergedTitle(cols[1]), text: cols[1].trim() }, where);
  }
  for (const file of files.queries) {
    const lines = readLines(file);
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      if (line.trim() === '') continue;
      const cols = line.split('\t');
      if (cols.length !== 2 || cols[0].trim() === '' || cols[1].trim() === '') {
        throw formatError(file, i + 1, `expected "id<TAB>text", found ${JSON.stringify(line.slice(0, 60))}`);
      }
      b.addQuery({ id: cols[0].trim(), text: cols[1].trim() }, `${file}:${i + 1}`, true);
    }
  }
  for (const file of files.qrels) {
    const lines = readLines(file);
    for (let i = 0; i < lines.length; i++) {
      const s = lines[i].trim();
      if (s === '') continue;
      const cols = s.split(/\s+/);
      if (cols.length !== 4) throw formatError(file, i + 1, `expected "qid 0 docid grade", found ${JSON.stringify(s.slice(0, 60))}`);
      b.addJudgement(cols[0], cols[2], parseGrade(cols[3], file, i + 1), `${file}:${i + 1}`);
    }
  }
  return b.build(name, logger);
}
