/**
 * Pieces shared by every dataset loader: the format names, the warnings shape, file
 * reading with line numbers, and CorpusBuilder, which turns raw records into one
 * validated Corpus (index/core/types.ts).
 *
 * Rules every loader follows through CorpusBuilder:
 * - An item or query id that occurs twice is a DUPLICATE_ID error naming both places.
 * - A judgement is `(queryId, itemId, grade)`. Relevance threshold: grade >= 1 is
 *   relevant (RELEVANCE_THRESHOLD). `corpus.qrels` keeps the grades of relevant
 *   judgements (grade > 0, so graded metrics can use them); grade-0 judgements are
 *   counted as judged-not-relevant and otherwise dropped.
 * - The same (query, item) pair judged twice with the same grade is accepted once;
 *   with different grades it is a DUPLICATE_ID error.
 * - Judgements that name an unknown query id or item id are never silently dropped:
 *   they are counted in `warnings` with up to 5 examples ("file:line: ...") and
 *   reported through the logger; they do not enter `qrels`.
 * - Queries without any relevant item stay in `corpus.queries` but are not judged
 *   (`warnings.unjudgedQueries` counts them); only judged queries enter splits.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { Corpus, Item, Query } from '../../index/core/types.ts';

export const DATASET_FORMATS = ['smart', 'trec', 'beir', 'wands', 'jsonl'] as const;
export type DatasetFormat = (typeof DATASET_FORMATS)[number];

/** Grades at or above this are relevant. */
export const RELEVANCE_THRESHOLD = 1;

export interface DatasetWarnings {
  /** Judgements whose query id is not a known query. */
  unknownQueryIds: number;
  /** Judgements whose item id is not a known item. */
  unknownItemIds: number;
  /** Up to 5 examples, each "file:line: ...". */
  examples: string[];
  /** Queries kept in the corpus that have no relevant item (excluded from evaluation). */
  unjudgedQueries: number;
  /** Texts cut at DEFAULTS.text.maxWords words (see `capWords`), and the words dropped from them. */
  cappedTexts?: number;
  droppedWords?: number;
}

export interface LoadedDataset {
  corpus: Corpus;
  format: DatasetFormat;
  /** The folder the dataset was read from (absolute). */
  source: string;
  warnings: DatasetWarnings;
}

/** The part of a loader's result that does not depend on where it was resolved from. */
export interface ParsedDataset {
  corpus: Corpus;
  warnings: DatasetWarnings;
}

const MAX_EXAMPLES = 5;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Byte offset of the first byte of the first ill-formed UTF-8 sequence in `b` (a byte
 * that cannot start a sequence, a lead byte without its continuation bytes, an overlong
 * form, a surrogate, a code point beyond U+10FFFF), −1 when `b` is well-formed.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  const n = b.length;
  let i = 0;
  while (i < n) {
    const c = b[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      if (c === 0xe0) lo = 0xa0; // no overlong forms
      if (c === 0xed) hi = 0x9f; // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      if (c === 0xf0) lo = 0x90;
      if (c === 0xf4) hi = 0x8f; // nothing past U+10FFFF
    } else return i;
    for (let k = 1; k <= need; k++) {
      const d = i + k < n ? b[i + k] : -1;
      if (d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) return i;
    }
    i += need + 1;
  }
  return -1;
}

/** DATA_FORMAT at file:line:column (column in characters) of the first byte that is not UTF-8. */
function notUtf8(path: string, buf: Uint8Array, at: number): Error {
  let lineStart = 0;
  let line = 1;
  for (let i = 0; i < at; i++) {
    if (buf[i] === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  // The line up to the bad byte is valid UTF-8: count its characters.
  const column = [...UTF8.decode(buf.subarray(lineStart, at))].length + 1;
  const byte = buf[at].toString(16).toUpperCase().padStart(2, '0');
  return cogrError(
    'DATA_FORMAT',
    `${path}:${line}:${column}: not valid UTF-8 (byte 0x${byte} at offset ${at}); data files must be UTF-8 (convert it, e.g. iconv -f latin1 -t utf-8)`,
    { file: path, line, column, offset: at },
  );
}

/**
 * Read a text file, failing with DATA_MISSING naming the file. Strict UTF-8: the first
 * byte that is not UTF-8 is DATA_FORMAT naming file:line:column (no other encoding is
 * guessed). A leading BOM is dropped; CRLF becomes LF.
 */
export function readText(path: string): string {
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw cogrError('DATA_MISSING', `${path}: file not found`, { file: path });
  }
  const buf = readFileSync(path);
  let text: string;
  try {
    text = UTF8.decode(buf);
  } catch {
    throw notUtf8(path, buf, Math.max(0, firstInvalidUtf8(buf)));
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return text.replace(/\r\n?/g, '\n');
}

/** Lines of a file (1-based numbering is `index + 1`); a trailing empty line is dropped. */
export function readLines(path: string): string[] {
  const lines = readText(path).split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

export function formatError(file: string, line: number, message: string): Error {
  return cogrError('DATA_FORMAT', `${file}:${line}: ${message}`, { file, line });
}

/** Parse a grade: a finite number; failing that, DATA_FORMAT at file:line. */
export function parseGrade(raw: string, file: string, line: number): number {
  const g = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(g)) {
    throw formatError(file, line, `expected a numeric grade, found ${JSON.stringify(raw)}`);
  }
  return g;
}

interface Judgement {
  queryId: string;
  itemId: string;
  grade: number;
  where: string;
}

/** JavaScript's white space (`\s`). */
function isSpace(c: number): boolean {
  return (
    c === 0x20 ||
    (c >= 0x09 && c <= 0x0d) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * A text cut after its `max`-th white-space separated word (the white space after it
 * dropped too), with the number of words dropped; the text itself when it has no more. One
 * pass over the characters: linear in the text's length.
 */
export function capWords(text: string, max: number): { text: string; dropped: number } {
  let words = 0;
  let cut = -1;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    if (isSpace(text.charCodeAt(i))) inWord = false;
    else if (!inWord) {
      inWord = true;
      if (++words === max + 1) cut = i;
    }
  }
  if (cut < 0) return { text, dropped: 0 };
  let end = cut;
  while (end > 0 && isSpace(text.charCodeAt(end - 1))) end--;
  return { text: text.slice(0, end), dropped: words - max };
}

export class CorpusBuilder {
  private readonly items = new Map<string, { item: Item; where: string }>();
  private readonly queries = new Map<string, { query: Query; where: string; raw: string }>();
  private readonly judgements: Judgement[] = [];
  /** Texts cut at the word cap: where, whose, the words dropped. */
  private readonly capped: { where: string; what: string; dropped: number }[] = [];

  /** `s` cut at DEFAULTS.text.maxWords words, the cut recorded for the warning. */
  private cap(s: string, where: string, what: string): string {
    if (s.length <= DEFAULTS.text.maxWords) return s; // fewer characters than the cap has words
    const c = capWords(s, DEFAULTS.text.maxWords);
    if (c.dropped > 0) this.capped.push({ where, what, dropped: c.dropped });
    return c.text;
  }

  /** `where` is "file:line", used in error messages. */
  addItem(item: Item, where: string): void {
    if (item.id === '') throw cogrError('DATA_FORMAT', `${where}: empty item id`);
    const prev = this.items.get(item.id);
    if (prev) {
      throw cogrError('DUPLICATE_ID', `${where}: duplicate item id ${JSON.stringify(item.id)} (first at ${prev.where})`, {
        id: item.id,
      });
    }
    const title = this.cap(item.title, where, `item ${JSON.stringify(item.id)} title`);
    const text = this.cap(item.text, where, `item ${JSON.stringify(item.id)} text`);
    this.items.set(item.id, { item: title === item.title && text === item.text ? item : { ...item, title, text }, where });
  }

  /**
   * Add a query. With `mergeIdentical`, a repeated id whose text is the same is
   * accepted once (several query files of one collection may overlap).
   */
  addQuery(query: Query, where: string, mergeIdentical = false): void {
    if (query.id === '') throw cogrError('DATA_FORMAT', `${where}: empty query id`);
    const prev = this.queries.get(query.id);
    if (prev) {
      if (mergeIdentical && prev.raw === query.text) return;
      throw cogrError('DUPLICATE_ID', `${where}: duplicate query id ${JSON.stringify(query.id)} (first at ${prev.where})`, {
        id: query.id,
      });
    }
    const text = this.cap(query.text, where, `query ${JSON.stringify(query.id)} text`);
    this.queries.set(query.id, { query: text === query.text ? query : { ...query, text }, where, raw: query.text });
  }

  addJudgement(queryId: string, itemId: string, grade: number, where: string): void {
    this.judgements.push({ queryId, itemId, grade, where });
  }

  get itemCount(): number {
    return this.items.size;
  }

  build(name: string, logger?: Logger): ParsedDataset {
    const warnings: DatasetWarnings = { unknownQueryIds: 0, unknownItemIds: 0, examples: [], unjudgedQueries: 0 };
    const qrels = new Map<string, Map<string, number>>();
    const seen = new Map<string, Judgement>();
    for (const j of this.judgements) {
      const key = `${j.queryId}\u0000${j.itemId}`;
      const prev = seen.get(key);
      if (prev) {
        if (prev.grade !== j.grade) {
          throw cogrError(
            'DUPLICATE_ID',
            `${j.where}: judgement ${j.queryId} -> ${j.itemId} repeated with grade ${j.grade} (grade ${prev.grade} at ${prev.where})`,
          );
        }
        continue;
      }
      seen.set(key, j);
      const unknownQ = !this.queries.has(j.queryId);
      const unknownI = !this.items.has(j.itemId);
      if (unknownQ || unknownI) {
        if (unknownQ) warnings.unknownQueryIds++;
        if (unknownI) warnings.unknownItemIds++;
        if (warnings.examples.length < MAX_EXAMPLES) {
          const what = [
            unknownQ ? `unknown query id ${JSON.stringify(j.queryId)}` : '',
            unknownI ? `unknown item id ${JSON.stringify(j.itemId)}` : '',
          ]
            .filter(Boolean)
            .join(' and ');
          warnings.examples.push(`${j.where}: ${what}`);
        }
        continue;
      }
      if (j.grade < RELEVANCE_THRESHOLD) continue;
      let m = qrels.get(j.queryId);
      if (!m) {
        m = new Map();
        qrels.set(j.queryId, m);
      }
      m.set(j.itemId, j.grade);
    }
    const queries = [...this.queries.values()].map((q) => q.query);
    const relevant = new Map<string, Set<string>>();
    // qrels and relevant follow the order of corpus.queries.
    const orderedQrels = new Map<string, Map<string, number>>();
    for (const q of queries) {
      const m = qrels.get(q.id);
      if (!m || m.size === 0) {
        warnings.unjudgedQueries++;
        continue;
      }
      orderedQrels.set(q.id, m);
      relevant.set(q.id, new Set(m.keys()));
    }
    if (logger && (warnings.unknownQueryIds > 0 || warnings.unknownItemIds > 0)) {
      logger.warn(`${name}: judgements pointing to unknown ids were left out`, {
        unknownQueryIds: warnings.unknownQueryIds,
        unknownItemIds: warnings.unknownItemIds,
        examples: warnings.examples,
      });
    }
    if (this.capped.length > 0) {
      warnings.cappedTexts = this.capped.length;
      warnings.droppedWords = this.capped.reduce((a, c) => a + c.dropped, 0);
      logger?.warn(
        `${name}: ${this.capped.length} text(s) longer than ${DEFAULTS.text.maxWords} words were cut there (DEFAULTS.text.maxWords); ${warnings.droppedWords} words dropped in all, not analysed`,
        { texts: this.capped.slice(0, MAX_EXAMPLES).map((c) => `${c.where}: ${c.what}: ${c.dropped} words dropped`) },
      );
    }
    const corpus: Corpus = {
      name,
      items: [...this.items.values()].map((i) => i.item),
      queries,
      qrels: orderedQrels,
      relevant,
    };
    return { corpus, warnings };
  }
}

/** Collapse white space runs to one space and trim. */
export function squash(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

/**
 * The one JSON-lines reader: each non-empty line of `path` parsed and validated with
 * `schema`, yielded with its line number. A missing file is DATA_MISSING; a line that
 * is not JSON or does not validate is DATA_FORMAT naming file, line and field; with
 * `uniqueId`, an id seen twice is DUPLICATE_ID naming file and line.
 */
export function* jsonlRecords<T>(
  path: string,
  schema: z.ZodType<T>,
  opts: { uniqueId?: (value: T) => string } = {},
): Generator<{ value: T; line: number }> {
  const lines = readLines(path);
  const seen = opts.uniqueId ? new Set<string>() : null;
  for (let i = 0; i < lines.length; i++) {
    const s = lines[i].trim();
    if (s === '') continue;
    let raw: unknown;
    try {
      raw = JSON.parse(s);
    } catch (e) {
      throw formatError(path, i + 1, `not valid JSON (${(e as Error).message})`);
    }
    const r = schema.safeParse(raw);
    if (!r.success) throw schemaError('DATA_FORMAT', r.error, { what: `${path}:${i + 1}`, details: { file: path, line: i + 1 } });
    if (seen && opts.uniqueId) {
      const id = opts.uniqueId(r.data);
      if (seen.has(id))
        throw cogrError('DUPLICATE_ID', `${path}:${i + 1}: id ${JSON.stringify(id)} occurs twice`, { file: path, line: i + 1, id });
      seen.add(id);
    }
    yield { value: r.data, line: i + 1 };
  }
}

/** All records of a JSON-lines file (see jsonlRecords). */
export function readJsonl<T>(
  path: string,
  schema: z.ZodType<T>,
  opts: { uniqueId?: (value: T) => string } = {},
): { value: T; line: number }[] {
  return [...jsonlRecords(path, schema, opts)];
}

/** An id that may be written as a JSON string or number; always a non-empty string. */
export const idSchema = z.union([z.string().min(1), z.number().transform((n) => String(n))]);
