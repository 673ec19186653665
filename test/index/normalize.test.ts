import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KEYWORD_MAX_CHARS, KEYWORD_MAX_WORDS, normalizeKeyword, normalizeKeywordSet, normalizeSelf } from '../../index/normalize.ts';

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
  it('enforces the word and length limits on keywords only', () => {
    const long = Array.from({ length: KEYWORD_MAX_WORDS + 1 }, (_, i) => `w${i}`).join(' ');
    expect(normalizeKeyword(long)).toBeNull();
    expect(normalizeSelf(long)).toBe(long);
    expect(normalizeKeyword('x'.repeat(KEYWORD_MAX_CHARS + 1))).toBeNull();
    expect(normalizeKeywordSet(['A', 'a', '', long, 'b'])).toEqual({ keywords: ['a', 'b'], rejected: 2 });
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
