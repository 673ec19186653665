/**
 * What data a run was made on: a SHA-256 digest (and a count) of each part of the
 * loaded corpus — items (id, title, text, fields), queries (id, text), judgements (query,
 * item, grade, the judged-not-relevant included) — and of the split computed from them.
 * Stored with the run state at its first write (state.ts `data`); a resume compares the
 * data it loaded with it and refuses other data, naming the parts that changed. Digests
 * are over the parsed corpus, so the same data in another spelling (CRLF, a BOM, key
 * order, a moved folder) is the same data.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import type { Corpus } from '../../index/core/types.ts';
import type { RunSplit } from './records.ts';

const Part = z.object({ count: z.number().int().nonnegative(), sha256: z.string().regex(/^[0-9a-f]{64}$/) });
export const DataFingerprintSchema = z
  .object({
    version: z.literal(1),
    items: Part,
    queries: Part,
    judgements: Part,
    split: Part,
  })
  .strict();
export type DataFingerprint = z.infer<typeof DataFingerprintSchema>;
export const FINGERPRINT_PARTS = ['items', 'queries', 'judgements', 'split'] as const;

const byId = <T extends { id: string }>(xs: readonly T[]): T[] => [...xs].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** One digest over records, each written as one JSON line (unambiguous: every string is quoted and escaped). */
function digest(records: Iterable<unknown>): { count: number; sha256: string } {
  const h = createHash('sha256');
  let count = 0;
  for (const r of records) {
    h.update(JSON.stringify(r));
    h.update('\n');
    count++;
  }
  return { count, sha256: h.digest('hex') };
}

export function dataFingerprint(corpus: Corpus, split: RunSplit): DataFingerprint {
  function* items() {
    for (const it of byId(corpus.items)) {
      const fields = it.fields ? Object.entries(it.fields).sort(([a], [b]) => cmp(a, b)) : [];
      yield [it.id, it.title, it.text, fields];
    }
  }
  function* queries() {
    for (const q of byId(corpus.queries)) yield [q.id, q.text];
  }
  function* judgements() {
    for (const q of [...corpus.qrels.keys()].sort(cmp)) {
      const grades = corpus.qrels.get(q)!;
      for (const i of [...grades.keys()].sort(cmp)) yield [q, i, grades.get(i)];
    }
  }
  const s = digest([split.train, split.dev, split.eval]);
  return {
    version: 1,
    items: digest(items()),
    queries: digest(queries()),
    judgements: digest(judgements()),
    split: { count: split.train.length + split.eval.length, sha256: s.sha256 },
  };
}

/** The parts of two fingerprints that differ, each with its counts ("judgements (40 → 40, other contents)"). */
export function fingerprintChanges(stored: DataFingerprint, now: DataFingerprint): string[] {
  const out: string[] = [];
  for (const k of FINGERPRINT_PARTS) {
    const a = stored[k];
    const b = now[k];
    if (a.sha256 === b.sha256) continue;
    out.push(`${k} (${a.count} → ${b.count}${a.count === b.count ? ', other contents' : ''})`);
  }
  return out;
}

/**
 * Refuse a stored run's resume on data other than its own (INVALID_ARGUMENT naming what
 * changed: items / queries / judgements / split).
 */
export function checkRunData(
  dbPath: string,
  dataset: string,
  stored: DataFingerprint,
  now: DataFingerprint,
  next = 'resuming would mix results on two datasets: start over with --fresh, use another --db, or restore the data',
): void {
  const changes = fingerprintChanges(stored, now);
  if (changes.length === 0) return;
  throw cogrError(
    'INVALID_ARGUMENT',
    `the database ${dbPath} holds a run made on other data than dataset ${dataset} holds now: ${changes.join('; ')} changed since the run began; ${next}`,
    { path: dbPath, changed: changes },
  );
}

/** A stored fingerprint, validated (DB_CORRUPT when it does not validate). */
export function parseFingerprint(raw: unknown, where: string): DataFingerprint {
  const r = DataFingerprintSchema.safeParse(raw);
  if (!r.success) throw schemaError('DB_CORRUPT', r.error, { what: `the stored data fingerprint of ${where} does not validate` });
  return r.data;
}
