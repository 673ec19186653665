import { describe, expect, it } from 'vitest';
import { adoptionSummary } from '../../src/commands/evolve.ts';
import type { StepRecord } from '../../src/run/state.ts';

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
  it('none adopted: the largest dev gain, its standard error and the reason', () => {
    const s = adoptionSummary([
      step('sft', 'sft', true),
      step('r1-query', 'query', false, -0.0004, 0.001),
      step('r1-item', 'item', false, 0.0062, 0.0071),
    ]);
    expect(s).toBe(
      "no half-round was adopted: the largest dev gain was r1-item's +0.0062 F1 (standard error 0.0071): a rise within the noise of 52 dev queries, so the result is the SFT step",
    );
    expect(adoptionSummary([step('sft', 'sft', true), step('r1-query', 'query', false, -0.01, 0.002)])).toMatch(
      /every half-round lowered dev F1/,
    );
    expect(adoptionSummary([step('sft', 'sft', true)])).toBeNull();
  });
});
