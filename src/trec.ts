/**
 * TREC files: run files (the 6-column `qid Q0 docid rank score tag` lines trec_eval and
 * pytrec_eval read) and qrels (`qid 0 docid grade`).
 *
 * Order. trec_eval ignores the rank column: it sorts each query's lines by score,
 * highest first, and breaks ties by document id in decreasing byte order (its
 * `comp_sim_docno` compares the second id with the first); it keeps scores as 32-bit
 * floats, so scores equal in single precision tie (pytrec_eval does the same: checked by
 * the crosscheck bench). `trecOrder` sorts the same
 * way, the writer writes lines in that order with ranks 1, 2, … and every score in the
 * shortest form that reads back as the same double, so trec_eval sees exactly the ties
 * cogr saw; cogr's metrics (src/metrics.ts, entries with scores) rank in this order
 * too, so its figures on a run equal trec_eval's on the file written from it.
 *
 * Reading refuses, naming the file and line: a line that is not 6 fields, a rank that is
 * not a positive integer, a score that is not a finite number, an unknown query or
 * document id (when the caller gives the known ones), a query's rank or document given
 * twice.
 */
import { readFileSync } from 'node:fs';
import { cogrError } from '../index/core/errors.ts';
import { writeFileAtomic } from '../index/store/sealed.ts';

export interface ScoredId {
  id: string;
  score: number;
}

/** A query's scored documents in one run. */
export interface RunQuery {
  queryId: string;
  hits: readonly ScoredId[];
}

/** trec_eval's comparison of document ids on tied scores: the larger id (byte order) first. */
function compareIdsDesc(a: string, b: string): number {
  return a === b ? 0 : Buffer.compare(Buffer.from(b), Buffer.from(a));
}

/**
 * Score, highest first; ties by document id in decreasing byte order, as trec_eval breaks
 * them. trec_eval (and pytrec_eval) keep a score as a 32-bit float, so scores equal in
 * single precision tie here too. A new array.
 */
export function trecOrder<T extends ScoredId>(hits: readonly T[]): T[] {
  const ascii = hits.every((h) => /^[\x00-\x7f]*$/.test(h.id));
  const f = new Map<T, number>(hits.map((h) => [h, Math.fround(h.score)]));
  return [...hits].sort((a, b) => f.get(b)! - f.get(a)! || (ascii ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : compareIdsDesc(a.id, b.id)));
}

const TAG = /^\S+$/;
const ID = /^\S+$/;

/** The shortest decimal that parses back to the same double (JavaScript's own), so ties survive the file. */
function scoreText(x: number): string {
  if (!Number.isFinite(x)) throw cogrError('INVALID_ARGUMENT', `run file: a score must be finite, got ${x}`);
  return String(x);
}

/** A run's lines: each query's hits in trecOrder, ranks from 1, `limit` hits at most per query. */
export function formatRun(queries: readonly RunQuery[], tag: string, limit = Infinity): string {
  if (!TAG.test(tag)) throw cogrError('INVALID_ARGUMENT', `run tag: one word without white space, got ${JSON.stringify(tag)}`);
  const out: string[] = [];
  for (const q of queries) {
    if (!ID.test(q.queryId))
      throw cogrError('INVALID_ARGUMENT', `run file: query id ${JSON.stringify(q.queryId)} holds white space or is empty`);
    const seen = new Set<string>();
    const ordered = trecOrder(q.hits);
    let rank = 0;
    for (const h of ordered) {
      if (rank >= limit) break;
      if (!ID.test(h.id))
        throw cogrError(
          'INVALID_ARGUMENT',
          `run file: document id ${JSON.stringify(h.id)} of query ${q.queryId} holds white space or is empty`,
        );
      if (seen.has(h.id)) throw cogrError('INVALID_ARGUMENT', `run file: document ${h.id} appears twice for query ${q.queryId}`);
      seen.add(h.id);
      out.push(`${q.queryId} Q0 ${h.id} ${++rank} ${scoreText(h.score)} ${tag}`);
    }
  }
  return out.length > 0 ? out.join('\n') + '\n' : '';
}

/** Write a run file atomically (a temporary file renamed over the target). */
export async function writeRunFile(path: string, queries: readonly RunQuery[], tag: string, limit = Infinity): Promise<number> {
  const text = formatRun(queries, tag, limit);
  await writeFileAtomic(path, [Buffer.from(text, 'utf8')]);
  return text === '' ? 0 : text.split('\n').length - 1;
}

export interface ReadRunOptions {
  /** Known query ids: another is refused. */
  queries?: ReadonlySet<string>;
  /** Known document ids: another is refused. */
  items?: ReadonlySet<string>;
}

/**
 * Parse a run file's text: per query (in first-seen order) its hits in trecOrder. Bad
 * lines are refused as DATA_FORMAT naming `file:line`.
 */
export function parseRun(text: string, file: string, opts: ReadRunOptions = {}): RunQuery[] {
  const byQuery = new Map<string, { hits: ScoredId[]; ranks: Map<number, number>; docs: Map<string, number> }>();
  const lines = text.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const bad = (n: number, msg: string) => cogrError('DATA_FORMAT', `${file}:${n}: ${msg}`, { file, line: n });
  lines.forEach((raw, i) => {
    const n = i + 1;
    const line = raw.replace(/\r$/, '');
    if (line.trim() === '') throw bad(n, 'empty line (expected "qid Q0 docid rank score tag")');
    const f = line.trim().split(/\s+/);
    if (f.length !== 6) throw bad(n, `expected 6 fields "qid Q0 docid rank score tag", got ${f.length}`);
    const [qid, , doc, rankText, scoreRaw] = f as [string, string, string, string, string, string];
    if (!/^[0-9]+$/.test(rankText) || Number(rankText) < 1)
      throw bad(n, `rank must be a positive integer, got ${JSON.stringify(rankText)}`);
    const score = Number(scoreRaw);
    if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(scoreRaw) || !Number.isFinite(score))
      throw bad(n, `score must be a finite number, got ${JSON.stringify(scoreRaw)}`);
    if (opts.queries && !opts.queries.has(qid)) throw bad(n, `unknown query id ${JSON.stringify(qid)}`);
    if (opts.items && !opts.items.has(doc)) throw bad(n, `unknown document id ${JSON.stringify(doc)} (query ${qid})`);
    let q = byQuery.get(qid);
    if (!q) byQuery.set(qid, (q = { hits: [], ranks: new Map(), docs: new Map() }));
    const rank = Number(rankText);
    const prevRank = q.ranks.get(rank);
    if (prevRank !== undefined) throw bad(n, `query ${qid} has rank ${rank} twice (first on line ${prevRank})`);
    const prevDoc = q.docs.get(doc);
    if (prevDoc !== undefined) throw bad(n, `query ${qid} lists document ${doc} twice (first on line ${prevDoc})`);
    q.ranks.set(rank, n);
    q.docs.set(doc, n);
    q.hits.push({ id: doc, score });
  });
  return [...byQuery].map(([queryId, q]) => ({ queryId, hits: trecOrder(q.hits) }));
}

/** Read and parse a run file (DATA_MISSING when it cannot be read). */
export function readRunFile(path: string, opts: ReadRunOptions = {}): RunQuery[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw cogrError('DATA_MISSING', `run file ${path}: ${(e as Error).message}`, undefined, e);
  }
  return parseRun(text, path, opts);
}

/**
 * TREC qrels lines `qid 0 docid grade` of judgements (queries and, inside each, documents
 * in byte order). A grade must be an integer, as trec_eval reads it.
 */
export function formatQrels(qrels: ReadonlyMap<string, ReadonlyMap<string, number>>): string {
  const out: string[] = [];
  const byBytes = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  for (const qid of [...qrels.keys()].sort(byBytes)) {
    if (!ID.test(qid)) throw cogrError('DATA_FORMAT', `qrels: query id ${JSON.stringify(qid)} holds white space or is empty`);
    const docs = qrels.get(qid)!;
    for (const doc of [...docs.keys()].sort(byBytes)) {
      const g = docs.get(doc)!;
      if (!ID.test(doc))
        throw cogrError('DATA_FORMAT', `qrels: document id ${JSON.stringify(doc)} of query ${qid} holds white space or is empty`);
      if (!Number.isInteger(g))
        throw cogrError('DATA_FORMAT', `qrels: query ${qid} document ${doc} has grade ${g}; TREC qrels need integer grades`);
      out.push(`${qid} 0 ${doc} ${g}`);
    }
  }
  return out.length > 0 ? out.join('\n') + '\n' : '';
}
