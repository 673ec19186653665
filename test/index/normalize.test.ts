import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KEYWORD_MAX_CHARS, KEYWORD_MAX_WORDS, normalizeKeyword, normalizeKeywordSet, normalizeSelf } from '../../index/text/normalize.ts';

describe('keyword normalisation', () => {
  it('applies NFKC, lower case, collapsed white space and edge punctuation trimming', () => {
    expect(normalizeKeyword('  (Cancer),  ')).toBe('cancer');
    expect(normalizeKeyword('Co-Evolution\tRetrieval\n')).toBe('co-evolution retrieval');
    expect(normalizeKeyword('ﬁne Ｔｕｎｉｎｇ')).toBe('fine tuning');
    expect(normalizeKeyword('"--"')).toBeNull();
  });
  it('treats control characters as white space and repairs lone surrogates', () => {
    expect(normalizeKeyword('a\u0000b')).toBe('a b');
    expect(normalizeSelf('\ud800x Y')).toBe('x y');
  });
  it('drops Unicode format characters (category Cf): bidi controls, zero-width characters, soft hyphens', () => {
    expect(normalizeKeyword('re\u202Equiem')).toBe('requiem');
    expect(normalizeKeyword('\u200Bbreast\u200C can\u200Dcer\u2060')).toBe('breast cancer');
    expect(normalizeKeyword('\uFEFFstat\u00ADins\u2066')).toBe('statins');
    expect(normalizeSelf('\u202ERed Shoes\u202C')).toBe('red shoes');
    expect(normalizeKeyword('\u200B\u202E')).toBeNull();
    // Dropped before NFKC, so a mark kept apart from its letter by a joiner still composes.
    expect(normalizeKeyword('cafe\u200D\u0301')).toBe('café'.normalize('NFKC'));
    expect(normalizeKeywordSet(['requiem', 're\u200Bquiem', 'requ\u202Eiem']).keywords).toEqual(['requiem']);
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.constantFrom('a', 'e', ' ', '-', '\u0301', '\u200B', '\u200D', '\u202E', '\uFEFF', '\u00AD', '\u{E0041}'),
          maxLength: 40,
        }),
        (s) => {
          const a = normalizeSelf(s);
          expect(a).not.toMatch(/\p{Cf}/u);
          expect(normalizeSelf(a)).toBe(a);
        },
      ),
      { numRuns: 300 },
    );
  });
  it('enforces the word and length limits on keywords only', () => {
    const long = Array.from({ length: KEYWORD_MAX_WORDS + 1 }, (_, i) => `w${i}`).join(' ');
    expect(normalizeKeyword(long)).toBeNull();
    expect(normalizeSelf(long)).toBe(long);
    expect(normalizeKeyword('x'.repeat(KEYWORD_MAX_CHARS + 1))).toBeNull();
    expect(normalizeKeywordSet(['A', 'a', '', long, 'b'])).toEqual({ keywords: ['a', 'b'], rejected: 2 });
  });
  it('takes already normalised ASCII through a fast path with the same results (limits included)', () => {
    // A trailing zero-width space is dropped by step 1, so it forces the full path on the same text.
    const text = fc.string({ unit: fc.constantFrom('a', 'z', '0', '9', ' ', ' ', 'A', '-', '\t'), maxLength: 120 });
    fc.assert(
      fc.property(
        fc.oneof(
          text,
          fc.array(fc.constantFrom('ab', 'c1', '9'), { maxLength: 10 }).map((w) => w.join(' ')),
        ),
        (s) => {
          expect(normalizeKeyword(s)).toBe(normalizeKeyword(s + '\u200B'));
          expect(normalizeSelf(s)).toBe(normalizeSelf(s + '\u200B'));
        },
      ),
      { numRuns: 500 },
    );
    expect(normalizeKeyword('a b c d e f g h')).toBe('a b c d e f g h');
    expect(normalizeKeyword('a b c d e f g h i')).toBeNull();
    expect(normalizeKeyword('x'.repeat(KEYWORD_MAX_CHARS))).toBe('x'.repeat(KEYWORD_MAX_CHARS));
  });
  it('is idempotent', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (s) => {
        const a = normalizeSelf(s);
        expect(normalizeSelf(a)).toBe(a);
        const k = normalizeKeyword(s);
        if (k !== null) expect(normalizeKeyword(k)).toBe(k);
      }),
      { numRuns: 300 },
    );
  });
});
