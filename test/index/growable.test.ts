import { describe, expect, it } from 'vitest';
import { GrowableF64, GrowableI32 } from '../../index/core/growable.ts';

describe('growable typed arrays', () => {
  it('keeps every value in order across doublings, one by one and in runs', () => {
    const f = new GrowableF64(2);
    const i = new GrowableI32(3);
    const want: number[] = [];
    for (let k = 0; k < 37; k++) {
      f.push(k + 0.5);
      want.push(k + 0.5);
    }
    // A run longer than the capacity left and than the doubled capacity.
    const run = Int32Array.from({ length: 50 }, (_, k) => k * 3 - 7);
    i.pushAll(run.subarray(0, 2));
    i.pushAll(run.subarray(2));
    i.push(99);
    expect(f.length).toBe(37);
    expect([...f.toArray()]).toEqual(want);
    expect(i.length).toBe(51);
    expect([...i.view()]).toEqual([...run, 99]);
    expect(i.view()).toBeInstanceOf(Int32Array);
    expect(f.toArray()).toBeInstanceOf(Float64Array);
  });

  it('adds in place and copies only the first length values', () => {
    const f = new GrowableF64(8);
    f.pushAll([1, 2, 3]);
    f.addAt(1, 0.25);
    const copy = f.toArray();
    f.addAt(0, 10);
    expect([...copy]).toEqual([1, 2.25, 3]);
    expect([...f.view()]).toEqual([11, 2.25, 3]);
  });
});
