import { describe, expect, it } from 'vitest';
import { fBetaFromCounts, macroAverage, setCounts, setScores } from '../../rewards/setMetrics.ts';
import { evaluateRun, rankedMetrics, setF1Curve, type Judgements } from '../../src/metrics.ts';

const close = (a: number, b: number): void => expect(a).toBeCloseTo(b, 12);

describe('whole-set metrics (rewards/setMetrics.ts)', () => {
  it('P, R, F1 and F-beta of a set with a duplicate, by hand', () => {
    // retrieved {a, b, x} (b twice), relevant {a, c}: tp = 1, nRet = 3, nRel = 2
    expect(setCounts(['a', 'b', 'b', 'x'], new Set(['a', 'c']))).toEqual({ nRet: 3, nRel: 2, tp: 1 });
    const s = setScores(['a', 'b', 'b', 'x'], new Set(['a', 'c']), 2);
    close(s.precision, 1 / 3);
    close(s.recall, 1 / 2);
    close(s.f1, 2 / 5); // 2·1 / (3 + 2)
    close(s.fBeta, 5 / 11); // (1 + 4)·1 / (4·2 + 3)
    close(fBetaFromCounts(3, 2, 1, 0.5), 1.25 / 3.5); // (1 + .25)·1 / (.25·2 + 3)
    close(fBetaFromCounts(3, 2, 1, 1), s.f1);
  });
  it('everything is 0 when nothing relevant is retrieved, including empty sets', () => {
    expect(setScores([], new Set(['a']))).toEqual({ precision: 0, recall: 0, f1: 0, fBeta: 0 });
    expect(setScores(['x'], new Set())).toEqual({ precision: 0, recall: 0, f1: 0, fBeta: 0 });
  });
  it('macro average is the plain mean over queries', () => {
    const m = macroAverage([
      { precision: 1, recall: 0.5, f1: 2 / 3, fBeta: 0.6 },
      { precision: 0, recall: 0, f1: 0, fBeta: 0 },
    ]);
    close(m.precision, 0.5);
    close(m.recall, 0.25);
    close(m.f1, 1 / 3);
    close(m.fBeta, 0.3);
    expect(macroAverage([])).toEqual({ precision: 0, recall: 0, f1: 0, fBeta: 0 });
  });
});

describe('ranked metrics', () => {
  // ranking a x b y c; relevant a(2) b(1) c(1) d(2)
  const rel = new Set(['a', 'b', 'c', 'd']);
  const grades = new Map([
    ['a', 2],
    ['b', 1],
    ['c', 1],
    ['d', 2],
  ]);
  const m = rankedMetrics(['a', 'x', 'b', 'y', 'c'], rel, grades, [1, 3, 10]);

  it('at k = 1', () => {
    expect(m['mrr@1']).toBe(1);
    expect(m['p@1']).toBe(1);
    close(m['r@1'], 0.25);
    close(m['f1@1'], 2 / 5);
    expect(m['hit@1']).toBe(1);
    close(m['ndcg@1'], 1); // 2/1 over ideal 2/1
    close(m['ndcgBinary@1'], 1);
  });
  it('at k = 3: linear gain, log2(i + 1) discount', () => {
    close(m['p@3'], 2 / 3);
    close(m['r@3'], 1 / 2);
    close(m['f1@3'], 4 / 7); // 2·2 / (3 + 4)
    // DCG = 2/log2(2) + 1/log2(4); IDCG = 2/log2(2) + 2/log2(3) + 1/log2(4)
    close(m['ndcg@3'], (2 + 1 / 2) / (2 + 2 / Math.log2(3) + 1 / 2));
    close(m['ndcgBinary@3'], (1 + 1 / 2) / (1 + 1 / Math.log2(3) + 1 / 2));
  });
  it('at k = 10 beyond the end of the ranking: P divides by k', () => {
    close(m['p@10'], 3 / 10);
    close(m['r@10'], 3 / 4);
    close(m['f1@10'], 6 / 14);
    const dcg = 2 + 1 / 2 + 1 / Math.log2(6);
    const idcg = 2 + 2 / Math.log2(3) + 1 / 2 + 1 / Math.log2(5);
    close(m['ndcg@10'], dcg / idcg);
  });
  it('average precision cut at k, by hand (trec_eval map_cut: divided by all relevant)', () => {
    // relevant at ranks 1, 3, 5 of a x b y c; |R| = 4 (d is never ranked)
    close(m['ap@1'], 1 / 4);
    close(m['ap@3'], (1 + 2 / 3) / 4);
    close(m['ap@10'], (1 + 2 / 3 + 3 / 5) / 4);
  });
  it('MRR and Hit follow the first relevant rank; duplicates count once', () => {
    const r = rankedMetrics(['x', 'x', 'y', 'a'], new Set(['a']), undefined, [1, 3, 10]);
    expect(r['mrr@1']).toBe(0);
    expect(r['hit@1']).toBe(0);
    close(r['mrr@3'], 1 / 3);
    expect(r['hit@3']).toBe(1);
    close(r['ndcg@3'], 1 / Math.log2(4));
  });
  it('no relevant items gives zeros', () => {
    const r = rankedMetrics(['a'], new Set(), undefined, [1]);
    expect(Object.values(r)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  });
});

describe('setF1Curve', () => {
  it('F1 of the top-k set for each k; the set stops growing after the ranking ends', () => {
    const c = setF1Curve(['a', 'x', 'b'], new Set(['a', 'b', 'c']), 5);
    expect(c[0]).toBe(0);
    close(c[1], 2 / 4);
    close(c[2], 2 / 5);
    close(c[3], 4 / 6);
    close(c[4], 4 / 6);
    close(c[5], 4 / 6);
  });
});

describe('evaluateRun', () => {
  const j: Judgements = {
    qrels: new Map([
      ['q1', new Map([['a', 1]])],
      [
        'q2',
        new Map([
          ['b', 2],
          ['c', 1],
        ]),
      ],
    ]),
    relevant: new Map([
      ['q1', new Set(['a'])],
      ['q2', new Set(['b', 'c'])],
    ]),
  };
  it('macro means of ranked and whole-set metrics', () => {
    const ev = evaluateRun(
      [
        { queryId: 'q1', ranked: ['a', 'b'], matched: ['a'] },
        { queryId: 'q2', ranked: ['a', 'c', 'b'], matched: ['a', 'c'] },
      ],
      j,
      { cutoffs: [1, 3] },
    );
    expect(ev.queries).toBe(2);
    close(ev.ranked['mrr@3'], (1 + 1 / 2) / 2);
    close(ev.ranked['p@1'], 1 / 2);
    close(ev.ranked['hit@1'], 1 / 2);
    // q2 graded: DCG@3 = 1/log2(3) + 2/log2(4), IDCG@3 = 2 + 1/log2(3)
    close(ev.ranked['ndcg@3'], (1 + (1 / Math.log2(3) + 1) / (2 + 1 / Math.log2(3))) / 2);
    // set: q1 P=1 R=1 F1=1; q2 {a,c}: P=1/2 R=1/2 F1=1/2
    close(ev.set!.precision, 3 / 4);
    close(ev.set!.recall, 3 / 4);
    close(ev.set!.f1, 3 / 4);
    expect(ev.perQuery.map((p) => p.queryId)).toEqual(['q1', 'q2']);
  });
  it('no whole-set scores unless every entry has a matched set', () => {
    const ev = evaluateRun([{ queryId: 'q1', ranked: ['a'] }], j, { cutoffs: [1] });
    expect(ev.set).toBeUndefined();
    expect(ev.ranked['mrr@1']).toBe(1);
  });
  it('F-beta uses the beta option', () => {
    const ev = evaluateRun([{ queryId: 'q2', ranked: [], matched: ['b', 'x', 'y'] }], j, { cutoffs: [1], beta: 2 });
    close(ev.set!.fBeta, (5 * 1) / (4 * 2 + 3));
  });
});
