import { describe, expect, it } from 'vitest';
import { analyzeDrift, entropyBits, gini, jaccard, median, type DriftInput, type GenerationSnapshot } from '../../src/drift/analyze.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { diffSnapshots } from './_oracles.ts';
import { renderDriftHtml } from '../../src/drift/report.ts';
import { formatDriftSummary } from '../../src/drift/summary.ts';

const e = (id: string, keywords: string[], self = id) => ({ id, self, keywords });

// Hand-computed fixture (see the expectations below for the arithmetic).
const item0: GenerationSnapshot = {
  generation: 0,
  entries: [e('a', ['x', 'y z']), e('b', ['x', 'p q r']), e('c', [], 'x')],
};
const item1: GenerationSnapshot = {
  generation: 1,
  entries: [e('a', ['y z', 'X']), e('b', ['x', 'new']), e('d', ['new'])],
};
const query0: GenerationSnapshot = { generation: 0, entries: [e('q1', ['x', 'foo']), e('q2', ['foo'], 'p q r')] };
const query1: GenerationSnapshot = { generation: 1, entries: [e('q1', ['new', 'y z']), e('q2', ['new'])] };
const input: DriftInput = {
  sides: { item: [item1, item0], query: [query0, query1] },
  f1ByRound: [
    { round: 1, side: 'query', f1: 0.4 },
    { round: 1, side: 'item', f1: 0.45 },
    { round: 0, side: 'query', f1: 0.2 },
  ],
};

function expectCode(fn: () => unknown, code: string, re?: RegExp): void {
  try {
    fn();
  } catch (err) {
    expect(isCogrError(err)).toBe(true);
    expect((err as { code: string }).code).toBe(code);
    if (re) expect((err as Error).message).toMatch(re);
    return;
  }
  throw new Error(`expected CogrError ${code}`);
}

describe('elementary metrics', () => {
  it('median of odd, even and empty lists', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBe(0);
  });
  it('entropy in bits', () => {
    expect(entropyBits([2, 1, 1])).toBeCloseTo(1.5, 12); // p = .5 .25 .25
    expect(entropyBits([5, 5, 5, 5])).toBeCloseTo(2, 12);
    expect(entropyBits([7])).toBe(0);
    expect(entropyBits([])).toBe(0);
  });
  it('Gini of counts', () => {
    // Σ|ci−cj| over ordered pairs of (1,1,2) = 4; 4 / (2·3²·4/3) = 1/6.
    expect(gini([1, 2, 1])).toBeCloseTo(1 / 6, 12);
    // (0,0,0,4): 24 / (2·16·1) = 0.75.
    expect(gini([0, 4, 0, 0])).toBeCloseTo(0.75, 12);
    expect(gini([3, 3, 3])).toBe(0);
    expect(gini([9])).toBe(0);
    expect(gini([])).toBe(0);
  });
  it('Jaccard with the empty convention', () => {
    expect(jaccard(new Set(['a', 'b']), new Set(['b', 'c']))).toBeCloseTo(1 / 3, 12);
    expect(jaccard(new Set(), new Set())).toBe(1);
    expect(jaccard(new Set(['a']), new Set())).toBe(0);
  });
});

describe('analyzeDrift on a hand-computed case', () => {
  const r = analyzeDrift(input);

  it('per-generation metrics of the item side', () => {
    const [g0, g1] = r.sides.item.generations;
    expect(r.sides.item.generations.map((g) => g.generation)).toEqual([0, 1]);
    // gen 0: counts x:2, "y z":1, "p q r":1; sizes 2, 2, 0; the self keyword 'x' of c is ignored.
    expect(g0.entities).toBe(3);
    expect(g0.distinctKeywords).toBe(3);
    expect(g0.occurrences).toBe(4);
    expect(g0.keywordsPerEntity.mean).toBeCloseTo(4 / 3, 12);
    expect(g0.keywordsPerEntity.median).toBe(2);
    expect(g0.lengthCounts).toEqual({ one: 1, two: 1, threePlus: 1 });
    expect(g0.lengthShares.one).toBeCloseTo(1 / 3, 12);
    expect(g0.lengthShares.threePlus).toBeCloseTo(1 / 3, 12);
    expect(g0.entropyBits).toBeCloseTo(1.5, 12);
    expect(g0.gini).toBeCloseTo(1 / 6, 12);
    expect(g0.churn).toBeNull();
    // gen 1: 'X' normalises to 'x'; counts x:2, "y z":1, new:2.
    expect(g1.distinctKeywords).toBe(3);
    expect(g1.lengthCounts).toEqual({ one: 2, two: 1, threePlus: 0 });
    // churn 0→1: a unchanged (J = 1), b {x, p q r}→{x, new} (J = 1/3), d added, c removed.
    expect(g1.churn).toEqual({
      previous: 0,
      compared: 2,
      added: 1,
      removed: 1,
      meanJaccard: expect.closeTo(2 / 3, 12),
      medianJaccard: expect.closeTo(2 / 3, 12),
      churn: expect.closeTo(1 / 3, 12),
    });
  });

  it('alignment pairs query generation r with item generation r', () => {
    expect(r.alignment.map((a) => a.round)).toEqual([0, 1]);
    const a0 = r.alignment[0];
    // V_q = {x:1, foo:2}, V_i = {x:2, y z:1, p q r:1}: the query self keyword 'p q r' is ignored.
    expect(a0.queryCoverage).toBeCloseTo(1 / 3, 12);
    expect(a0.itemCoverage).toBeCloseTo(2 / 4, 12);
    expect(a0.shared).toBe(1);
    expect(a0.jaccard).toBeCloseTo(1 / 4, 12);
    const a1 = r.alignment[1];
    // V_q = {new:2, y z:1} ⊂ V_i = {x:2, y z:1, new:2}.
    expect(a1.queryCoverage).toBe(1);
    expect(a1.itemCoverage).toBeCloseTo(3 / 5, 12);
    expect(a1.jaccard).toBeCloseTo(2 / 3, 12);
  });

  it('diff from the first to the last generation', () => {
    expect(r.sides.item.diff).toEqual({
      from: 0,
      to: 1,
      added: [{ keyword: 'new', key: 'new', forms: ['new'], entities: 2 }],
      dropped: [{ keyword: 'p q r', key: 'p q r', forms: ['p q r'], entities: 1 }],
      addedTotal: 1,
      droppedTotal: 1,
      kept: 2,
    });
    expect(r.sides.query.diff?.added).toEqual([
      { keyword: 'new', key: 'new', forms: ['new'], entities: 2 },
      { keyword: 'y z', key: 'y z', forms: ['y z'], entities: 1 },
    ]);
    expect(r.sides.query.diff?.dropped).toEqual([
      { keyword: 'foo', key: 'foo', forms: ['foo'], entities: 2 },
      { keyword: 'x', key: 'x', forms: ['x'], entities: 1 },
    ]);
  });

  it('F1 points sorted by round then side', () => {
    expect(r.f1).toEqual([
      { round: 0, side: 'query', f1: 0.2 },
      { round: 1, side: 'item', f1: 0.45 },
      { round: 1, side: 'query', f1: 0.4 },
    ]);
  });

  it('is plain JSON', () => {
    expect(JSON.parse(JSON.stringify(r))).toEqual(r);
  });
});

describe('keywords grouped by match key', () => {
  it('counts surface forms of one key as one keyword and lists the forms, most used first', () => {
    const from: GenerationSnapshot = { generation: 0, analyzer: 'english', entries: [e('a', ['heart'])] };
    const to: GenerationSnapshot = {
      generation: 1,
      analyzer: 'english',
      entries: [e('a', ['heart', 'statins', 'Statin']), e('b', ['statin']), e('c', ['statins'])],
    };
    const d = diffSnapshots(from, to);
    expect(d.added).toEqual([{ keyword: 'statins', key: 'statin', forms: ['statins', 'statin'], entities: 3 }]);
    expect(d.kept).toBe(1);
    // Without an analyzer the two forms are two keywords.
    expect(diffSnapshots({ ...from, analyzer: 'none' }, { ...to, analyzer: 'none' }).addedTotal).toBe(2);
  });
});

describe('diff ordering and caps', () => {
  it('orders by use, ties by keyword, caps lists and keeps totals', () => {
    const from: GenerationSnapshot = { generation: 2, entries: [e('a', ['old1', 'old2', 'keep'])] };
    const to: GenerationSnapshot = {
      generation: 5,
      entries: [e('a', ['keep', 'b', 'a', 'c']), e('b', ['c', 'a']), e('c', ['c'])],
    };
    const d = diffSnapshots(from, to, 2);
    // c:3, a:2, b:1 → capped to the first two.
    expect(d.added).toEqual([
      { keyword: 'c', key: 'c', forms: ['c'], entities: 3 },
      { keyword: 'a', key: 'a', forms: ['a'], entities: 2 },
    ]);
    expect(d.addedTotal).toBe(3);
    expect(d.dropped).toEqual([
      { keyword: 'old1', key: 'old1', forms: ['old1'], entities: 1 },
      { keyword: 'old2', key: 'old2', forms: ['old2'], entities: 1 },
    ]);
    expect(d.droppedTotal).toBe(2);
    expect(d.kept).toBe(1);
    expect([d.from, d.to]).toEqual([2, 5]);
  });
});

describe('ranges and validation', () => {
  const gens = (n: number): GenerationSnapshot[] =>
    Array.from({ length: n }, (_, g) => ({ generation: g, entries: [e('a', [`k${g}`, 'shared'])] }));

  it('restricts to [from, to] and diffs the ends of the range', () => {
    const r = analyzeDrift({ sides: { item: gens(5), query: gens(3) } }, { from: 1, to: 3 });
    expect(r.sides.item.generations.map((g) => g.generation)).toEqual([1, 2, 3]);
    expect(r.sides.query.generations.map((g) => g.generation)).toEqual([1, 2]);
    expect(r.sides.item.diff).toMatchObject({ from: 1, to: 3, added: [{ keyword: 'k3', key: 'k3', forms: ['k3'], entities: 1 }] });
    expect(r.alignment.map((a) => a.round)).toEqual([1, 2]);
    expect(r.range).toEqual({ from: 1, to: 3 });
  });

  it('to = null means the latest; a side without generations has a null diff', () => {
    const r = analyzeDrift({ sides: { item: gens(4), query: [] } }, { from: 2 });
    expect(r.sides.item.generations.map((g) => g.generation)).toEqual([2, 3]);
    expect(r.sides.query).toEqual({ generations: [], diff: null });
    expect(r.alignment).toEqual([]);
  });

  it('fails clearly on empty ranges and bad options', () => {
    expectCode(() => analyzeDrift({ sides: { item: gens(2), query: [] } }, { from: 5 }), 'NOT_FOUND', /no generation/);
    expectCode(() => analyzeDrift({ sides: { item: gens(2), query: [] } }, { from: 3, to: 1 }), 'INVALID_ARGUMENT', /to/);
    expectCode(() => analyzeDrift({ sides: { item: gens(2), query: [] } }, { from: -1 }), 'INVALID_ARGUMENT', /from/);
    expectCode(() => analyzeDrift({ sides: { item: gens(2), query: [] } }, { limit: 0 }), 'INVALID_ARGUMENT', /limit/);
    expectCode(
      () => analyzeDrift({ sides: { item: gens(2), query: [] }, f1ByRound: [{ round: 1, side: 'item', f1: 2 }] }),
      'INVALID_ARGUMENT',
      /f1ByRound: \[0\]\.f1/,
    );
    expectCode(() => analyzeDrift({ sides: { item: [{ generation: 0, entries: [e('a', []), e('a', [])] }], query: [] } }), 'DUPLICATE_ID');
    expectCode(() => analyzeDrift({ sides: { item: [...gens(2), ...gens(1)], query: [] } }), 'INVALID_ARGUMENT', /twice/);
  });
});

describe('the final refit in the F1 figures', () => {
  const withRefit: DriftInput = { ...input, f1ByRound: [...input.f1ByRound!, { round: 2, side: 'refit', f1: 0.5 }] };

  it('is a point of its own, after the rounds, in the report, its chart and its tables', () => {
    const r = analyzeDrift(withRefit);
    expect(r.f1).toEqual([
      { round: 0, side: 'query', f1: 0.2 },
      { round: 1, side: 'item', f1: 0.45 },
      { round: 1, side: 'query', f1: 0.4 },
      { round: 2, side: 'refit', f1: 0.5 },
    ]);
    const html = renderDriftHtml(r);
    expect(html).toContain('data-series="final refit (served)"');
    expect(html).toContain('final refit (served), round 2: 0.50');
    expect(html).toContain('<th>F1 (final refit)</th>');
    const summary = formatDriftSummary(r);
    expect(summary).toContain('F1 refit');
    expect(summary).toMatch(/\n2 +.*0\.500\n/);
  });

  it('adds no column to a run without one', () => {
    const r = analyzeDrift(input);
    expect(renderDriftHtml(r)).not.toContain('final refit');
    expect(formatDriftSummary(r)).not.toContain('F1 refit');
  });
});
