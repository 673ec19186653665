/**
 * Generation files past 2^31 bytes (ten million entities make a 4.3 GB view file): the
 * section table's offsets stay exact and 8-aligned. The big section is an ArrayBuffer
 * the test never touches (the system hands out its zero pages lazily), so no gigabytes
 * are written or read here; the bench's 10M run writes and reads such a file for real.
 */
import { describe, expect, it } from 'vitest';
import { encodeViewFile, pad8 } from '../../index/store/published.ts';
import { buildViewData } from '../../index/view/viewBuild.ts';

describe('view file layout', () => {
  it('pads exactly past 2^31 and 2^32 bytes', () => {
    expect(pad8(0)).toBe(0);
    expect(pad8(1)).toBe(8);
    expect(pad8(2 ** 31 - 1)).toBe(2 ** 31);
    expect(pad8(2 ** 32 + 3)).toBe(2 ** 32 + 8);
  });

  it('places sections after a 2.2 GB one at exact, aligned, increasing offsets', () => {
    const entries = [
      { id: 'a', self: 'x', keywords: ['red shoe'] },
      { id: 'b', self: 'y', keywords: ['blue hat', 'red shoe'] },
    ];
    const data = buildViewData('item', 0, entries);
    const big = 2.2e9 + 3;
    const huge = { ...data, surfBlob: new Uint8Array(big) };
    const parts = encodeViewFile(huge, entries);
    const head = Buffer.from(parts[0]);
    const header = JSON.parse(head.subarray(16, 16 + head.readUInt32LE(12)).toString('utf8')) as {
      sections: { name: string; offset: number; length: number }[];
    };
    const secs = header.sections;
    expect(secs[0]).toMatchObject({ name: 'surfBlob', offset: 0, length: big });
    expect(secs[1].offset).toBe(pad8(big));
    let at = 0;
    for (let i = 0; i < secs.length; i++) {
      expect(secs[i].offset).toBe(at);
      expect(secs[i].offset % 8).toBe(0);
      // The parts after the header are each section then its padding.
      at = pad8(at + secs[i].length * (secs[i].name.endsWith('Blob') ? 1 : 4));
    }
    const total = parts.reduce((s, p) => s + p.byteLength, 0);
    expect(total).toBe(head.byteLength + at);
  });
});
