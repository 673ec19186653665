/**
 * String tables (UTF-8 blob + offsets): every string round-trips, through the one-encode
 * ASCII path and the chunked path (non-ASCII text, lone surrogates, chunk edges).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeStrings, StringTable } from '../../index/view/buffers.ts';

/** What a string reads back as: lone surrogates become U+FFFD, as UTF-8 has no other way. */
const wellFormed = (s: string) => Buffer.from(s, 'utf8').toString('utf8');

describe('encodeStrings', () => {
  it('round-trips any strings (shared or not), byte offsets equal to UTF-8 lengths', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('\uD800', '\uDC00', 'é', '')), { maxLength: 40_000 }),
        fc.boolean(),
        (list, shared) => {
          const { blob, off } = encodeStrings(list, shared);
          expect(off[0]).toBe(0);
          for (let i = 0; i < list.length; i++) expect(off[i + 1] - off[i]).toBe(Buffer.byteLength(list[i], 'utf8'));
          expect(new StringTable(blob, off, list.length).all()).toEqual(list.map(wellFormed));
        },
      ),
      { numRuns: 40 },
    );
  });

  it('encodes a lone high surrogate followed by a lone low one as two strings, across a chunk edge too', () => {
    const list: string[] = [];
    for (let i = 0; i < 40_000; i++) list.push(i % 2 === 0 ? `a\uD800` : `\uDC00b`);
    const { blob, off } = encodeStrings(list, false);
    expect(new StringTable(blob, off, list.length).all()).toEqual(list.map(wellFormed));
  });
});
