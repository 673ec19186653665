import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { advantagesForGroups, groupAdvantages, isDegenerate } from '../../rewards/grpo.ts';

describe('groupAdvantages', () => {
  it('hand computed: rewards 0, 1 → −1, +1 (population std 0.5)', () => {
    const a = groupAdvantages([0, 1], 0);
    expect(a[0]).toBeCloseTo(-1, 15);
    expect(a[1]).toBeCloseTo(1, 15);
  });

  it('hand computed with ε: [1, 2, 3] → (r − 2) / (√(2/3) + 1e-6)', () => {
    const s = Math.sqrt(2 / 3) + 1e-6;
    const a = groupAdvantages([1, 2, 3]);
    expect(a).toHaveLength(3);
    expect(a[0]).toBeCloseTo(-1 / s, 12);
    expect(a[1]).toBe(0);
    expect(a[2]).toBeCloseTo(1 / s, 12);
  });

  it('advantages sum to 0 and are invariant to shifting and scaling the rewards', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 2, maxLength: 16 }),
        fc.double({ min: -5, max: 5, noNaN: true }),
        fc.double({ min: 0.5, max: 4, noNaN: true }),
        (r, shift, scale) => {
          fc.pre(!isDegenerate(r, 1e-3));
          const a = groupAdvantages(r, 0);
          expect(Math.abs(a.reduce((x, y) => x + y, 0))).toBeLessThan(1e-9);
          const b = groupAdvantages(
            r.map((x) => x * scale + shift),
            0,
          );
          for (let i = 0; i < a.length; i++) expect(b[i]).toBeCloseTo(a[i], 6);
        },
      ),
    );
  });

  it('rejects non-finite rewards', () => {
    expect(() => groupAdvantages([0, Number.NaN])).toThrow(/finite/);
  });
});

describe('advantagesForGroups', () => {
  const groups = [
    [0.5, 0.5, 0.5],
    [0, 1, 0, 1],
    [-1, -1],
    [0.2, 0.4],
  ];
  it('reports degenerate (all-equal) groups and gives them zero advantages', () => {
    const r = advantagesForGroups(groups);
    expect(r.degenerate).toBe(2);
    expect(r.degenerateGroups).toEqual([0, 2]);
    expect(r.kept).toEqual([1, 3]);
    expect(r.advantages[0]).toEqual([0, 0, 0]);
    expect(r.advantages[1]![1]).toBeCloseTo(1, 5);
  });
  it('drops degenerate groups on request (dynamic sampling)', () => {
    const r = advantagesForGroups(groups, { dropDegenerate: true });
    expect(r.advantages[0]).toBeNull();
    expect(r.advantages[2]).toBeNull();
    expect(r.advantages[3]).toHaveLength(2);
  });
});
