/**
 * The pruned top k (index/view/topk.ts, behind KeywordView.search) equals the exhaustive
 * ranking: same entities, same order, bit-identical scores, ties broken by ordinal, under
 * both analyzers (keys, not surfaces, are matched; analysed words are scored). Corpora
 * are drawn from a tiny vocabulary so that scores tie often and word lists are long
 * enough to span several blocks of the block-max bounds.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IndexEntry } from '../../index/core/types.ts';
import { BLOCK, MIN_POSTINGS, buildTopKIndex, rankTopK, topKIndex } from '../../index/view/topk.ts';
import { DEFAULT_BM25, KeywordView, type Bm25Params, type Probe } from '../../index/view/view.ts';
import type { ViewData } from '../../index/view/viewBuild.ts';

// Inflected forms ('shoes', 'running', 'runs') share a key with 'shoe' and 'run' under the
// english analyzer, so keys and surfaces differ there.
const WORDS = ['red', 'shoe', 'shoes', 'wool', 'hat', 'blue', 'x', 'y', 'z', 'run', 'running', 'runs', 'co-op', 'q', 'r'];
// Skewed word draws (a few frequent words, a tail of rare ones) and skewed bag sizes, so
// that term frequencies, document lengths and hence block bounds differ along a list.
const word = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('red', 'shoe', 'shoes') },
  { weight: 3, arbitrary: fc.constantFrom('wool', 'hat', 'blue', 'x', 'run') },
  { weight: 1, arbitrary: fc.constantFrom(...WORDS) },
);
const phrase = fc.array(word, { minLength: 1, maxLength: 3 }).map((w) => w.join(' '));
const entry = fc.record({
  self: fc.oneof(phrase, fc.constant('')),
  keywords: fc.oneof(
    { weight: 3, arbitrary: fc.array(phrase, { maxLength: 2 }) },
    { weight: 1, arbitrary: fc.array(phrase, { minLength: 4, maxLength: 12 }) },
  ),
});
const corpus = fc
  .array(entry, { minLength: 0, maxLength: 400, size: 'max' })
  .map((es) => es.map((e, i): IndexEntry => ({ id: `e${String(i).padStart(4, '0')}`, ...e })));
const probe: fc.Arbitrary<Probe> = fc.record({ self: fc.option(phrase, { nil: undefined }), keywords: fc.array(phrase, { maxLength: 5 }) });
const params: fc.Arbitrary<Bm25Params> = fc.oneof(
  fc.constant({ k1: 1.2, b: 0.75 }),
  fc.constant({ k1: 0, b: 0 }),
  fc.record({ k1: fc.double({ min: 0, max: 3, noNaN: true }), b: fc.double({ min: 0, max: 1, noNaN: true }) }),
);
const analyzer = fc.constantFrom('english' as const, 'none' as const);

/** rankTopK itself (also where search() would score a small matched set whole) against the exhaustive ranking. */
function expectPrunedEqual(view: KeywordView, pr: Probe, k: number, p: Bm25Params, index = topKIndex(view.data)) {
  const want = view.searchExhaustive(pr, { k, params: p });
  const { keywords, words } = view.probeOrdinals(pr);
  const got = rankTopK(view.data, keywords, words, k, p, { index, minPostings: 0 });
  expect(got).not.toBeNull();
  expect(got!.matched).toBe(want.matched);
  expect(got!.ordinals).toEqual(want.items.map((x) => x.ordinal));
  expect(got!.scores).toEqual(want.items.map((x) => x.score));
}

describe('pruned top k', () => {
  it('equals the exhaustive ranking (items, order, scores, ties by ordinal; both analyzers)', () => {
    fc.assert(
      fc.property(
        corpus,
        fc.array(probe, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 25 }),
        params,
        analyzer,
        (entries, probes, k, p, an) => {
          const view = KeywordView.build('item', 0, entries, { analyzer: an });
          for (const pr of probes) {
            const want = view.searchExhaustive(pr, { k, params: p });
            expect(view.search(pr, { k, params: p })).toEqual(want);
            const all = view.searchExhaustive(pr, { all: true, params: p });
            expect(want.items).toEqual(all.items.slice(0, k));
            expectPrunedEqual(view, pr, k, p);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('equals the exhaustive ranking with small blocks (block-max skips exercised)', () => {
    fc.assert(
      fc.property(
        corpus,
        fc.array(probe, { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom(1, 2, 4, 8),
        params,
        analyzer,
        (entries, probes, k, block, p, an) => {
          const view = KeywordView.build('item', 0, entries, { analyzer: an });
          const ix = buildTopKIndex(view.data, block);
          for (const pr of probes) expectPrunedEqual(view, pr, k, p, ix);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('spans several blocks on a corpus with long word lists; search() prunes there and explain() gives the same scores', () => {
    const entries: IndexEntry[] = [];
    const n = WORDS.length;
    for (let i = 0; i < 20 * BLOCK; i++)
      entries.push({
        id: `i${String(i).padStart(5, '0')}`,
        self: `t${i % 7}`,
        keywords: [WORDS[i % n], WORDS[(i * 7 + 3) % n], `${WORDS[i % 5]} ${WORDS[(i * 7) % n]}`, `${WORDS[(i * 3) % 11]} red`],
      });
    const view = KeywordView.build('item', 0, entries);
    const ix = topKIndex(view.data);
    expect(ix.wpOff[view.wordOrdinal('red') + 1] - ix.wpOff[view.wordOrdinal('red')]).toBeGreaterThan(4 * BLOCK);
    let pruned = 0; // probes with enough postings that search() takes the pruned path itself
    for (const keywords of [['red'], ['x red', 'wool', 'q'], ['blue', 'shoes x', 'z red', 'hat'], ['running', 'red shoe']]) {
      for (const k of [1, 10, 100]) {
        const pr = { self: 't3', keywords };
        const want = view.searchExhaustive(pr, { k });
        expect(want.matched).toBeGreaterThan(0);
        const { keywords: kws } = view.probeOrdinals(pr);
        if (kws.reduce((s, kw) => s + view.keywordDf(kw), 0) >= MIN_POSTINGS) pruned++;
        const got = view.search(pr, { k });
        expect(got).toEqual(want);
        expectPrunedEqual(view, pr, k, DEFAULT_BM25);
        for (const item of got.items.slice(0, 5)) {
          const ex = view.explain(pr, item.id)!;
          expect(ex.matched).toBe(true);
          expect(ex.score).toBe(item.score);
        }
      }
    }
    expect(pruned).toBe(9);
  });

  it('finds the best entity behind skipped blocks (blocks of 2, k = 1)', () => {
    const pad = (n: number) => Array.from({ length: n }, (_, i) => `f${i}`);
    const rows: [string, string[]][] = [
      ['e00', ['a', 'b', ...pad(10)]],
      ['e01', ['a', 'b', ...pad(13)]],
      ['e02', ['a', 'b', ...pad(13)]],
      ['e03', ['a', ...pad(14)]],
      ['e04', ['p7']],
      ['e05', ['a', 'a p8', 'a p9']],
      ['e06', ['p7']],
      ['e07', ['p7']],
      ['e08', ['p7']],
      ['e09', ['p7']],
      ['e10', ['b', ...pad(14)]],
      ['e11', ['b', 'b p8', 'b p9']],
    ];
    const view = KeywordView.build(
      'item',
      0,
      rows.map(([id, keywords]) => ({ id, self: '', keywords })),
      { analyzer: 'none' },
    );
    const pr = { keywords: ['a', 'b'] };
    const want = view.searchExhaustive(pr, { k: 1 });
    expect(want.items[0].id).toBe('e05');
    expectPrunedEqual(view, pr, 1, DEFAULT_BM25, buildTopKIndex(view.data, 2));
  });

  it('works on a SharedArrayBuffer-backed view received as a copy of its ViewData (as a worker does)', () => {
    const entries: IndexEntry[] = [];
    for (let i = 0; i < 3000; i++)
      entries.push({
        id: `s${String(i).padStart(5, '0')}`,
        self: `shoes ${WORDS[i % WORDS.length]}`,
        keywords: [WORDS[(i * 5) % WORDS.length], `${WORDS[i % 4]} ${WORDS[(i * 3) % WORDS.length]}`],
      });
    const built = KeywordView.build('item', 0, entries, { shared: true });
    expect(built.data.post.buffer).toBeInstanceOf(SharedArrayBuffer);
    const received: ViewData = structuredClone(built.data);
    expect(received.post.buffer).toBeInstanceOf(SharedArrayBuffer);
    const view = new KeywordView(received);
    const pr = { self: 'red shoe', keywords: ['running', 'wool hat', 'blue'] };
    for (const k of [1, 10, 50]) {
      const want = built.searchExhaustive(pr, { k });
      expect(view.search(pr, { k })).toEqual(want);
      expect(built.search(pr, { k })).toEqual(want);
    }
    // One top-k index per ViewData object (per thread), never written into the shared view.
    expect(topKIndex(received)).not.toBe(topKIndex(built.data));
    expect(topKIndex(received).wpEnt.buffer).not.toBeInstanceOf(SharedArrayBuffer);
  });

  it('falls back to the exhaustive ranking for parameters without a bound', () => {
    const view = KeywordView.build('item', 0, [
      { id: 'a', self: 'red hat', keywords: ['red', 'hat'] },
      { id: 'b', self: 'blue hat', keywords: ['hat', 'blue', 'wool hat'] },
    ]);
    const p = { k1: 1.2, b: 1.5 };
    expect(
      rankTopK(view.data, view.probeKeywordOrdinals({ keywords: ['hat'] }), view.probeWordOrdinals({ keywords: ['hat'] }), 1, p, {
        minPostings: 0,
      }),
    ).toBeNull();
    expect(view.search({ keywords: ['hat'] }, { k: 1, params: p })).toEqual(
      view.searchExhaustive({ keywords: ['hat'] }, { k: 1, params: p }),
    );
  });

  it('refuses a block size that is not a power of two', () => {
    const view = KeywordView.build('item', 0, [{ id: 'a', self: 'x', keywords: [] }]);
    expect(() => buildTopKIndex(view.data, 3)).toThrow(/power of two/);
  });
});
