/**
 * The view builder (index/view/viewBuild.ts: flat typed arrays, interned keys and surfaces,
 * counting passes) equals the previous builder (viewBuildReference.ts) field for field:
 * random corpora under both analyzers with Unicode keywords (NFKC forms, format
 * characters, lone surrogates, case, edge punctuation, over-limit keywords, duplicates
 * within an entity, self keywords equal to a keyword), ids in any order, shared and
 * unshared arrays; and a larger corpus shaped like the benchmark's synthetic one.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { IndexEntry } from '../../index/core/types.ts';
import { buildViewData, type ViewData } from '../../index/view/viewBuild.ts';
import { StringTable, encodeStrings } from '../../index/view/buffers.ts';
import { createRng, randInt } from '../../index/core/random.ts';
import { buildViewDataReference } from './viewBuildReference.ts';

/** Every field of a ViewData as plain values (typed arrays by type, sharedness and contents). */
function plain(d: ViewData): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) {
    out[k] = ArrayBuffer.isView(v)
      ? { type: v.constructor.name, shared: v.buffer instanceof SharedArrayBuffer, values: Array.from(v as Int32Array) }
      : v;
  }
  return out;
}

function expectSame(entries: readonly IndexEntry[], opts: { shared?: boolean; analyzer?: 'english' | 'none' }) {
  const want = buildViewDataReference('item', 3, entries, opts);
  const got = buildViewData('item', 3, entries, opts);
  expect(plain(got)).toEqual(plain(want));
}

// Words: inflections that share a stem (surfaces differ, keys agree), NFKC and case
// variants, format characters, combining marks, non-BMP characters, lone surrogates,
// edge punctuation, control characters and digits.
const WORDS = [
  'shoe',
  'shoes',
  'Shoes',
  'running',
  'run',
  'runs',
  'ﬁne',
  'fine',
  'Ｔｕｎｉｎｇ',
  'tuning',
  'café',
  'cafe\u0301',
  'straße',
  'STRASSE',
  're\u200Bquiem',
  'requiem',
  '\u202Eabc',
  '(cancer),',
  'co-op',
  'İstanbul',
  'σοφός',
  'ΣΟΦΟΣ',
  '😀',
  '\uD800x',
  'a\tb',
  'x\u0000y',
  '--',
  '42',
  'of',
  'the',
];
const word = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...WORDS) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 0, maxLength: 6 }) },
);
const phrase = fc.oneof(
  { weight: 8, arbitrary: fc.array(word, { minLength: 1, maxLength: 3 }).map((w) => w.join(' ')) },
  // over the limits (9 words; over 100 characters), or empty
  { weight: 1, arbitrary: fc.constantFrom('a b c d e f g h i', 'x'.repeat(101), '', '   ') },
);
const entry = fc.record({ self: fc.oneof(phrase, fc.constant('')), keywords: fc.array(phrase, { maxLength: 8 }) });
const id = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 4 }), fc.constantFrom('a', 'b', 'é', '\u0000', 'z9'));
const corpus = fc.uniqueArray(fc.record({ id, e: entry }), { selector: (x) => x.id, maxLength: 60 }).map((xs) =>
  xs.map(({ id, e }): IndexEntry => {
    // Sometimes the self keyword repeats one of the keywords.
    return e.keywords.length > 0 && id.length % 3 === 0 ? { id, self: e.keywords[0], keywords: e.keywords } : { id, ...e };
  }),
);

/** A corpus like the benchmark's synthetic one (skewed phrases over a word list, 4-word titles), ids in a shuffled order. */
function syntheticLike(n: number, seed: number): IndexEntry[] {
  const rng = createRng(seed);
  const skew = (m: number) => Math.floor(m * rng() ** 3);
  const words = Array.from({ length: 3_000 }, (_, i) => (i % 7 === 0 ? `w${i.toString(36)}s` : `w${i.toString(36)}`));
  const phrases = Array.from({ length: 4_000 }, () =>
    Array.from({ length: 1 + randInt(rng, 3) }, () => words[skew(words.length)]).join(' '),
  );
  const out: IndexEntry[] = [];
  for (let i = 0; i < n; i++) {
    const kws = Array.from({ length: 5 + randInt(rng, 11) }, () => phrases[skew(phrases.length)]);
    out.push({ id: `i${(i * 7919) % n}`, self: Array.from({ length: 4 }, () => words[skew(words.length)]).join(' '), keywords: kws });
  }
  return out;
}

describe('view builder', () => {
  it('equals the previous builder on random corpora (both analyzers, Unicode, shared or not)', () => {
    fc.assert(
      fc.property(corpus, fc.constantFrom('english' as const, 'none' as const), fc.boolean(), (entries, analyzer, shared) => {
        expectSame(entries, { analyzer, shared });
      }),
      { numRuns: 400 },
    );
  });

  it('equals the previous builder on a larger synthetic-like corpus (many entities per key, ids out of order)', () => {
    const entries = syntheticLike(20_000, 7);
    expectSame(entries, { analyzer: 'english' });
    expectSame(entries, { analyzer: 'none', shared: true });
  });

  it('refuses duplicate ids as before', () => {
    const entries = [
      { id: 'b', self: '', keywords: [] },
      { id: 'a', self: 'x', keywords: ['y'] },
      { id: 'b', self: 'z', keywords: [] },
    ];
    expect(() => buildViewData('query', 0, entries)).toThrow('duplicate entity id "b" in query index');
    expect(() => buildViewDataReference('query', 0, entries)).toThrow('duplicate entity id "b" in query index');
  });

  it('string tables round-trip ASCII and non-ASCII strings (one-pass fast path and per-string path)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: fc.constantFrom('a', 'Z', ' ', '0', 'é', '😀', '\u0000'), maxLength: 5 })),
        fc.boolean(),
        (list, shared) => {
          const { blob, off } = encodeStrings(list, shared);
          const bytes = Buffer.concat(list.map((s) => Buffer.from(s, 'utf8')));
          expect(Buffer.from(blob).equals(bytes)).toBe(true);
          expect(new StringTable(blob, off, list.length).all()).toEqual(list);
        },
      ),
      { numRuns: 300 },
    );
  });
});
