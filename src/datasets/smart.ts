/**
 * SMART collections (MED, CISI and the other Glasgow test collections).
 *
 * A folder holds three files, found by extension (case-insensitive):
 * - `*.ALL`: items. A record starts with `.I <id>`; field markers on their own line
 *   (`.T` title, `.A` authors, `.W` text, `.B` source, `.X` cross references, any
 *   other `.<letter>`) start a field whose text runs to the next marker.
 * - `*.QRY`: queries in the same record format; the query text is `.W` (`.T` when
 *   there is no `.W`).
 * - `*.REL`: relevance, one pair per line: `qid docid [more columns]`. SMART lists
 *   only relevant pairs, so every line is a relevant judgement with grade 1 (MED's
 *   third column is 1; CISI's `0 0.000000` columns carry no grade).
 *
 * Items: `title` is `.T` when present (CISI); otherwise (MED has only `.W`) the first
 * sentence of `.W`, up to the first " ." (or the first 20 words when there is none).
 * `text` is `.W` in full (so for MED it begins with the title sentence). `.A` and `.B`
 * go to `fields.authors` / `fields.source`; `.X` is dropped.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { Item } from '../../index/core/types.ts';
import { CorpusBuilder, type ParsedDataset, formatError, readLines, squash } from './common.ts';

export interface SmartRecord {
  id: string;
  line: number;
  fields: Map<string, string>;
}

const MARKER = /^\.([A-Z])(?:\s+(.*))?$/;

/** Parse a SMART record file into records with their starting line. */
export function parseSmartFile(path: string): SmartRecord[] {
  const lines = readLines(path);
  const records: SmartRecord[] = [];
  let cur: SmartRecord | null = null;
  let field: string | null = null;
  let buf: string[] = [];
  const flush = (): void => {
    if (cur && field !== null) {
      const prev = cur.fields.get(field);
      const text = squash(buf.join('\n'));
      cur.fields.set(field, prev ? `${prev} ${text}` : text);
    }
    buf = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    const m = MARKER.exec(raw.trimEnd());
    if (m) {
      const letter = m[1];
      const rest = (m[2] ?? '').trim();
      if (letter === 'I') {
        flush();
        if (!/^\S+$/.test(rest)) throw formatError(path, i + 1, `expected ".I <id>", found ${JSON.stringify(raw.trim())}`);
        cur = { id: rest, line: i + 1, fields: new Map() };
        records.push(cur);
        field = null;
        continue;
      }
      if (!cur) throw formatError(path, i + 1, `expected ".I <id>" before field ${JSON.stringify(`.${letter}`)}`);
      flush();
      field = letter;
      if (rest) buf.push(rest);
      continue;
    }
    if (raw.trim() === '') {
      if (field !== null) buf.push('');
      continue;
    }
    if (!cur) throw formatError(path, i + 1, `expected ".I <id>", found text ${JSON.stringify(raw.trim().slice(0, 40))}`);
    if (field === null) throw formatError(path, i + 1, `expected a field marker (.T, .A, .W, ...) after .I ${cur.id}`);
    buf.push(raw);
  }
  flush();
  return records;
}

/** The first sentence of a text: up to the first " ." (SMART's tokenised full stop). */
export function firstSentence(text: string): string {
  const at = text.indexOf(' .');
  if (at > 0) return text.slice(0, at).trim();
  const words = text.split(' ');
  return words.slice(0, 20).join(' ');
}

function findByExt(dir: string, ext: string): string | null {
  const hits = readdirSync(dir).filter((f) => f.toLowerCase().endsWith(ext));
  if (hits.length > 1) {
    throw cogrError('DATA_FORMAT', `${dir}: more than one *${ext.toUpperCase()} file (${hits.join(', ')})`);
  }
  return hits.length === 1 ? join(dir, hits[0]) : null;
}

export function smartFiles(dir: string): { all: string; qry: string; rel: string } {
  const all = findByExt(dir, '.all');
  const qry = findByExt(dir, '.qry');
  const rel = findByExt(dir, '.rel');
  const missing = [!all && '*.ALL', !qry && '*.QRY', !rel && '*.REL'].filter(Boolean);
  if (missing.length > 0 || !all || !qry || !rel) {
    throw cogrError('DATA_MISSING', `${dir}: SMART collection needs ${missing.join(', ')}`);
  }
  return { all, qry, rel };
}

export function loadSmart(dir: string, name: string, logger?: Logger): ParsedDataset {
  const { all, qry, rel } = smartFiles(dir);
  const b = new CorpusBuilder();
  for (const r of parseSmartFile(all)) {
    const w = r.fields.get('W') ?? '';
    const t = r.fields.get('T');
    const title = t && t.length > 0 ? t : firstSentence(w);
    const item: Item = { id: r.id, title, text: w };
    const fields: Record<string, string> = {};
    const a = r.fields.get('A');
    const src = r.fields.get('B');
    if (a) fields.authors = a;
    if (src) fields.source = src;
    if (Object.keys(fields).length > 0) item.fields = fields;
    if (title === '' && w === '') throw formatError(all, r.line, `record .I ${r.id} has neither .T nor .W text`);
    b.addItem(item, `${all}:${r.line}`);
  }
  for (const r of parseSmartFile(qry)) {
    const text = r.fields.get('W') ?? r.fields.get('T') ?? '';
    if (text === '') throw formatError(qry, r.line, `query .I ${r.id} has no .W text`);
    b.addQuery({ id: r.id, text }, `${qry}:${r.line}`);
  }
  const lines = readLines(rel);
  for (let i = 0; i < lines.length; i++) {
    const s = lines[i].trim();
    if (s === '') continue;
    const cols = s.split(/\s+/);
    if (cols.length < 2) throw formatError(rel, i + 1, `expected "qid docid [...]", found ${JSON.stringify(s)}`);
    b.addJudgement(cols[0], cols[1], 1, `${rel}:${i + 1}`);
  }
  return b.build(name, logger);
}
