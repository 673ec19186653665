import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fewQueriesCollection, knownItemCollection, writeBeir } from '../../bench/checkCollections.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { isCogrError } from '../../index/core/errors.ts';
import type { Corpus } from '../../index/core/types.ts';

const body = (i: number) => Array.from({ length: 24 }, (_, k) => `w${(i * 7 + k) % 50}`).join(' ');
const corpus: Corpus = {
  name: 'tiny',
  items: [
    { id: 'a', title: 'the first long title here', text: body(1) },
    { id: 'b', title: 'short title', text: body(2) },
    { id: 'c', title: 'another title of four words', text: body(3) },
    { id: 'd', title: 'a title over a short text', text: 'too short' },
    { id: 'e', title: 'yet one more usable title', text: body(5) },
  ],
  queries: [
    { id: 'q1', text: 'one' },
    { id: 'q2', text: 'two' },
    { id: 'q3', text: 'three (unjudged)' },
    { id: 'q4', text: 'four' },
  ],
  qrels: new Map([
    ['q1', new Map([['a', 1]])],
    [
      'q2',
      new Map([
        ['b', 2],
        ['c', 0],
      ]),
    ],
    ['q4', new Map([['e', 1]])],
  ]),
  relevant: new Map([
    ['q1', new Set(['a'])],
    ['q2', new Set(['b'])],
    ['q4', new Set(['e'])],
  ]),
};

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('check collections (bench/checkCollections.ts)', () => {
  it('known-item: titles of 4+ words over texts of 20+ words become queries, one relevant item each; no item keeps its title', () => {
    const c = knownItemCollection(corpus, { queries: 3, seed: 5 });
    // Eligible: a, c, e (b's title is short, d's text is short).
    expect(c.queries.map((q) => q.id).sort()).toEqual(['q-a', 'q-c', 'q-e']);
    for (const q of c.queries) {
      const target = q.id.slice(2);
      expect(q.text).toBe(corpus.items.find((i) => i.id === target)!.title);
      expect([...c.relevant.get(q.id)!]).toEqual([target]);
      expect([...c.qrels.get(q.id)!]).toEqual([[target, 1]]);
    }
    expect(c.items.map((i) => i.title)).toEqual(['', '', '', '', '']);
    expect(c.items.map((i) => i.text)).toEqual(corpus.items.map((i) => i.text));
    // The same seed draws the same queries; asking for more than are eligible names the limit.
    expect(knownItemCollection(corpus, { queries: 2, seed: 5 }).queries).toEqual(
      knownItemCollection(corpus, { queries: 2, seed: 5 }).queries,
    );
    let err: unknown;
    try {
      knownItemCollection(corpus, { queries: 4, seed: 5 });
    } catch (e) {
      err = e;
    }
    expect(isCogrError(err, 'INVALID_ARGUMENT')).toBe(true);
    expect((err as Error).message).toContain('3 items with a title of 4+ words');
  });

  it('few-queries: a seeded sample of the judged queries with their judgements, grades kept', () => {
    const c = fewQueriesCollection(corpus, { queries: 2, seed: 1 });
    expect(c.queries).toHaveLength(2);
    for (const q of c.queries) {
      expect(['q1', 'q2', 'q4']).toContain(q.id);
      expect(c.qrels.get(q.id)).toEqual(corpus.qrels.get(q.id));
      expect(c.relevant.get(q.id)).toEqual(corpus.relevant.get(q.id));
    }
    expect(c.items).toBe(corpus.items);
    expect(() => fewQueriesCollection(corpus, { queries: 4, seed: 1 })).toThrow(/3 judged queries/);
  });

  it('few-queries with ids: those judged queries in that order; an unjudged, unknown or repeated id is named', () => {
    const c = fewQueriesCollection(corpus, { queries: 2, seed: 1, ids: ['q4', 'q1'] });
    expect(c.queries.map((q) => q.id)).toEqual(['q4', 'q1']);
    expect(c.relevant.get('q4')).toEqual(corpus.relevant.get('q4'));
    expect(c.qrels.get('q1')).toEqual(corpus.qrels.get('q1'));
    expect(() => fewQueriesCollection(corpus, { queries: 1, seed: 1, ids: ['q1', 'q3'] })).toThrow(/entry 2 \(q3\) is not a judged query/);
    expect(() => fewQueriesCollection(corpus, { queries: 1, seed: 1, ids: ['nope'] })).toThrow(/entry 1 \(nope\)/);
    expect(() => fewQueriesCollection(corpus, { queries: 2, seed: 1, ids: ['q1', 'q1'] })).toThrow(/entry 2 \(q1\) is listed twice/);
  });

  it('a written folder loads back as a BEIR dataset with the same queries and judgements', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cogr-check-'));
    dirs.push(dir);
    const c = knownItemCollection(corpus, { queries: 3, seed: 2 });
    writeBeir(c, join(dir, 'ki'));
    const back = (await loadDataset(join(dir, 'ki'))).corpus;
    expect(back.items.map((i) => [i.id, i.text]).sort()).toEqual(c.items.map((i) => [i.id, i.text]).sort());
    expect(back.queries.map((q) => [q.id, q.text]).sort()).toEqual(c.queries.map((q) => [q.id, q.text]).sort());
    for (const q of c.queries) expect(back.relevant.get(q.id)).toEqual(c.relevant.get(q.id));
    const few = fewQueriesCollection(corpus, { queries: 3, seed: 2 });
    writeBeir(few, join(dir, 'few'));
    const back2 = (await loadDataset(join(dir, 'few'))).corpus;
    // The grade-2 judgement comes back as graded; the grade-0 row is written and read as no judgement of relevance.
    expect(back2.qrels.get('q2')?.get('b')).toBe(2);
    expect(back2.relevant.get('q2')).toEqual(new Set(['b']));
  });
});
