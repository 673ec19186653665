/**
 * WANDS (Wayfair ANnotation DataSet): a folder with three tab-separated files, each
 * with a header line (columns found by name, extra columns ignored):
 * - `product.csv`: product_id, product_name, product_description, and optionally
 *   product_class, category hierarchy, product_features;
 * - `query.csv`: query_id, query (and query_class);
 * - `label.csv`: query_id, product_id, label, where label is Exact, Partial or
 *   Irrelevant. As in the CoGR paper, Exact (grade 2) and Partial (grade 1) are
 *   relevant; Irrelevant is grade 0.
 * A field may be wrapped in double quotes (pandas' minimal quoting: `""` is a quote,
 * tabs and new lines may occur inside).
 * Items: title = product_name, text = product_description; product_class, category
 * hierarchy and product_features go to `fields` (class, category, features).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { Item } from '../../index/core/types.ts';
import { CorpusBuilder, type ParsedDataset, formatError, readText } from './common.ts';

export const WANDS_GRADES: Readonly<Record<string, number>> = { exact: 2, partial: 1, irrelevant: 0 };

/** One parsed row and the line it starts on (1-based). */
export interface TsvRow {
  cells: string[];
  line: number;
}

/** Parse tab-separated text with optional double-quoted fields. */
export function parseTsv(text: string, file: string): TsvRow[] {
  const rows: TsvRow[] = [];
  let line = 1;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const start = line;
    const cells: string[] = [];
    for (;;) {
      let cell = '';
      if (text[i] === '"') {
        i++;
        for (;;) {
          if (i >= n) throw formatError(file, start, 'unterminated quoted field');
          const c = text[i];
          if (c === '"') {
            if (text[i + 1] === '"') {
              cell += '"';
              i += 2;
              continue;
            }
            i++;
            break;
          }
          if (c === '\n') line++;
          cell += c;
          i++;
        }
        if (i < n && text[i] !== '\t' && text[i] !== '\n') {
          throw formatError(file, line, 'unexpected character after a closing quote');
        }
      } else {
        while (i < n && text[i] !== '\t' && text[i] !== '\n') cell += text[i++];
      }
      cells.push(cell);
      if (i >= n) break;
      if (text[i] === '\t') {
        i++;
        continue;
      }
      // new line
      i++;
      line++;
      break;
    }
    if (!(cells.length === 1 && cells[0] === '')) rows.push({ cells, line: start });
  }
  return rows;
}

interface Table {
  file: string;
  rows: TsvRow[];
  col: (name: string) => number;
}

function readTable(file: string, required: string[]): Table {
  const rows = parseTsv(readText(file), file);
  const header = rows.shift();
  if (!header) throw cogrError('DATA_MISSING', `${file}: empty file (expected a header line)`, { file });
  const names = header.cells.map((c) => c.trim().toLowerCase());
  const missing = required.filter((r) => !names.includes(r));
  if (missing.length > 0) {
    throw cogrError('DATA_MISSING', `${file}:1: missing column(s) ${missing.join(', ')}`, { file, line: 1, missing });
  }
  for (const r of rows) {
    if (r.cells.length !== names.length) {
      throw formatError(file, r.line, `expected ${names.length} tab-separated columns, found ${r.cells.length}`);
    }
  }
  return { file, rows, col: (name) => names.indexOf(name) };
}

export function wandsFiles(dir: string): { product: string; query: string; label: string } {
  const f = { product: join(dir, 'product.csv'), query: join(dir, 'query.csv'), label: join(dir, 'label.csv') };
  const missing = Object.values(f).filter((p) => !existsSync(p));
  if (missing.length > 0)
    throw cogrError('DATA_MISSING', `${dir}: WANDS collection needs ${missing.map((p) => p.slice(dir.length + 1)).join(', ')}`);
  return f;
}

export function loadWands(dir: string, name: string, logger?: Logger): ParsedDataset {
  const files = wandsFiles(dir);
  const b = new CorpusBuilder();
  const p = readTable(files.product, ['product_id', 'product_name', 'product_description']);
  const [pid, pname, pdesc, pclass, pcat, pfeat] = [
    'product_id',
    'product_name',
    'product_description',
    'product_class',
    'category hierarchy',
    'product_features',
  ].map(p.col);
  for (const r of p.rows) {
    const id = r.cells[pid].trim();
    if (id === '') throw formatError(p.file, r.line, 'empty product_id');
    const item: Item = { id, title: r.cells[pname].trim(), text: r.cells[pdesc].trim() };
    const fields: Record<string, string> = {};
    if (pclass >= 0 && r.cells[pclass].trim()) fields.class = r.cells[pclass].trim();
    if (pcat >= 0 && r.cells[pcat].trim()) fields.category = r.cells[pcat].trim();
    if (pfeat >= 0 && r.cells[pfeat].trim()) fields.features = r.cells[pfeat].trim();
    if (Object.keys(fields).length > 0) item.fields = fields;
    b.addItem(item, `${p.file}:${r.line}`);
  }
  const q = readTable(files.query, ['query_id', 'query']);
  const [qid, qtext] = ['query_id', 'query'].map(q.col);
  for (const r of q.rows) {
    const id = r.cells[qid].trim();
    const text = r.cells[qtext].trim();
    if (id === '' || text === '') throw formatError(q.file, r.line, id === '' ? 'empty query_id' : 'empty query');
    b.addQuery({ id, text }, `${q.file}:${r.line}`);
  }
  const l = readTable(files.label, ['query_id', 'product_id', 'label']);
  const [lq, lp, ll] = ['query_id', 'product_id', 'label'].map(l.col);
  for (const r of l.rows) {
    const label = r.cells[ll].trim();
    const grade = WANDS_GRADES[label.toLowerCase()];
    if (grade === undefined)
      throw formatError(l.file, r.line, `label must be Exact, Partial or Irrelevant, found ${JSON.stringify(label)}`);
    b.addJudgement(r.cells[lq].trim(), r.cells[lp].trim(), grade, `${l.file}:${r.line}`);
  }
  return b.build(name, logger);
}
