import { describe, expect, it } from 'vitest';
import { adoptionSummary, pairedLines, servedSetSummary } from '../../src/commands/evolve.ts';
import { adoptedOnTie, adoptionTest, type DevMetrics, type StepRecord } from '../../src/run/state.ts';

const step = (name: string, phase: StepRecord['phase'], adopted: boolean, gain?: number, se?: number): StepRecord =>
  ({
    step: name,
    phase,
    adopted,
    dev: { queries: 52 },
    ...(gain !== undefined ? { devGain: { gain, se: se ?? 0 } } : {}),
  }) as unknown as StepRecord;

describe('the demo says which half-rounds were adopted, or why none was', () => {
  it('names the adopted ones', () => {
    expect(
      adoptionSummary([step('sft', 'sft', true), step('r1-query', 'query', false, -0.01), step('r1-item', 'item', true, 0.02, 0.005)]),
    ).toMatch(/^adopted: r1-item /);
  });
  it('names the half-rounds adopted on a tie (no scored query changed) apart', () => {
    expect(
      adoptionSummary([
        step('sft', 'sft', true),
        step('r1-query', 'query', true, 0.004, 0.001),
        step('r1-item', 'item', true, 0, 0),
        step('r2-query', 'query', false, -0.01, 0.004),
        step('r2-item', 'item', true, 0, 0),
      ]),
    ).toBe(
      'adopted: r1-query, r1-item, r2-item; r1-item, r2-item on a tie: no scored query changed (a half-round is adopted when its mean gain over the scored queries is ≥ 0 and ≥ z standard errors)',
    );
    expect(adoptionSummary([step('sft', 'sft', true), step('r1-item', 'item', true, 0, 0)])).toMatch(
      /^adopted: r1-item, every one on a tie: no scored query changed \(/,
    );
  });
  it('a tie is what the adoption test adopts when no paired query changed, and only that', () => {
    const dev = (perQuery: number[]): DevMetrics => ({
      f1: 0,
      precision: 0,
      recall: 0,
      meanMatched: 0,
      meanKeywords: 0,
      queries: perQuery.length,
      perQuery,
    });
    const same = adoptionTest(dev([0.2, 0.5, 0]), dev([0.2, 0.5, 0]), 1);
    expect(same).toMatchObject({ adopted: true, gain: 0, se: 0 });
    expect(adoptedOnTie({ adopted: same.adopted, devGain: { gain: same.gain, se: same.se } })).toBe(true);
    // Gains that cancel have a standard error: not adopted (0 < 1 standard error), so no tie either.
    const cancel = adoptionTest(dev([0.3, 0.4]), dev([0.2, 0.5]), 1);
    expect(cancel.adopted).toBe(false);
    expect(adoptedOnTie({ adopted: cancel.adopted, devGain: { gain: cancel.gain, se: cancel.se } })).toBe(false);
    // A real gain, SFT (no test) and a step without dev queries are no ties.
    expect(adoptedOnTie({ adopted: true, devGain: { gain: 0.01, se: 0.002 } })).toBe(false);
    expect(adoptedOnTie({ adopted: true })).toBe(false);
  });
  it('none adopted: the largest gain, its standard error, the queries it was scored on and the reason', () => {
    const s = adoptionSummary([
      step('sft', 'sft', true),
      step('r1-query', 'query', false, -0.0004, 0.001),
      step('r1-item', 'item', false, 0.0062, 0.0071),
    ]);
    expect(s).toBe(
      "no half-round was adopted: the largest gain was r1-item's +0.0062 F1 (standard error 0.0071): a rise within the noise of 52 dev queries, so the result is the SFT step",
    );
    // A test that also scored the core training queries (pooled, crossfit, leaveout) says so.
    const leaveOut = { ...step('r1-item', 'item', false), devGain: { gain: 0.0035, se: 0.0051, queries: 258 } } as StepRecord;
    expect(adoptionSummary([step('sft', 'sft', true), leaveOut])).toBe(
      "no half-round was adopted: the largest gain was r1-item's +0.0035 F1 (standard error 0.0051): a rise within the noise of 258 dev and training queries, so the result is the SFT step",
    );
    expect(adoptionSummary([step('sft', 'sft', true), step('r1-query', 'query', false, -0.01, 0.002)])).toMatch(
      /every half-round lowered F1 on them/,
    );
    expect(adoptionSummary([step('sft', 'sft', true)])).toBeNull();
  });
});

describe("the demo says what the final refit's set guard served, and on what figures", () => {
  const refit = (served?: object): StepRecord =>
    ({ step: 'refit', phase: 'refit', adopted: true, refit: { served } }) as unknown as StepRecord;
  const keywords = { f1: 0.15, precision: 0.2, recall: 0.2 };
  it('the keyword plans kept: the gain the model would have had, and the rule', () => {
    expect(
      servedSetSummary([
        step('sft', 'sft', true),
        refit({ set: 'keywords', guard: { gain: -0.0056, se: 0.0047, queries: 258, z: 1 }, keywords }),
      ]),
    ).toBe(
      "set guard: the keyword plans are served; the model's own sets would give -0.0056 ± 0.0047 F1 over the keyword plans on 258 training queries, cross-fitted (they must beat them by 1 standard error)",
    );
  });
  it("the model's sets chosen: their α and gain", () => {
    expect(
      servedSetSummary([refit({ set: 'model', alpha: 0.707, guard: { gain: 0.0855, se: 0.0191, queries: 28, z: 2 }, keywords })]),
    ).toBe(
      "set guard: the relevance model's own sets are served (α 0.707): +0.0855 ± 0.0191 F1 over the keyword plans on 28 training queries, cross-fitted",
    );
    expect(servedSetSummary([refit({ set: 'model', alpha: 0.5, keywords })])).toBe(
      "the relevance model's own sets are served (--served-set model, α 0.5)",
    );
  });
  it('nothing to say without a refit or with --served-set keywords', () => {
    expect(servedSetSummary([step('sft', 'sft', true)])).toBeNull();
    expect(servedSetSummary([step('sft', 'sft', true), refit()])).toBeNull();
  });
});

describe('the result against BM25, BM25 + RM3 and SFT, paired per held-out query', () => {
  const paired = (gain: number, se: number, ndcg: number) => ({
    queries: 65,
    f1: { gain, se },
    ndcg10: { gain: ndcg, se: 0.0208 },
    f1_queries: { above: 21, level: 18, below: 26 },
  });
  it('says the mean differences with their standard errors, and the queries above, level and below BM25', () => {
    expect(
      pairedLines({ bm25: paired(0.0154, 0.0128, -0.0021), rm3: paired(0.0286, 0.0131, 0.0263), sft: paired(0.0006, 0.0042, -0.005) }),
    ).toEqual([
      "final − BM25 over the 65 held-out queries, paired per query (mean ± standard error): F1 +0.0154 ± 0.0128, nDCG@10 -0.0021 ± 0.0208; F1 above BM25's on 21, level on 18, below on 26: within two standard errors of BM25 (more judged queries would tell them apart)",
      'final − BM25 + RM3: F1 +0.0286 ± 0.0131, nDCG@10 +0.0263 ± 0.0208; final − SFT: F1 +0.0006 ± 0.0042, nDCG@10 -0.0050 ± 0.0208',
    ]);
  });
  it('says when the F1 difference is beyond two standard errors, either way', () => {
    expect(pairedLines({ bm25: paired(0.037, 0.009, 0.04), rm3: null, sft: null })[0]).toMatch(
      /: above BM25 by more than two standard errors$/,
    );
    expect(pairedLines({ bm25: paired(-0.05, 0.02, 0), rm3: null, sft: null })[0]).toMatch(
      /: below BM25 by more than two standard errors$/,
    );
  });
  it('leaves out what was not measured', () => {
    expect(pairedLines({ bm25: paired(0.01, 0.01, 0), rm3: null, sft: null })).toHaveLength(1);
    expect(pairedLines({ bm25: null, rm3: null, sft: null })).toEqual([]);
  });
});
