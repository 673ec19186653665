import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkBm25, readExpectedQuality } from '../../src/baseline/expected.ts';

describe('expected quality kept as data', () => {
  const expected = readExpectedQuality();

  it('lists every shipped dataset', () => {
    expect(Object.keys(expected.bm25).sort()).toEqual(['cisi', 'med', 'nfcorpus']);
  });

  it('flags a metric off by more than the tolerance, and only that one', () => {
    const med = expected.bm25.med;
    const rows = checkBm25('med', { ...med, f1: med.f1 - 2 * expected.tolerance, recall: med.recall + expected.tolerance / 2 }, expected);
    expect(rows.filter((r) => !r.ok).map((r) => r.metric)).toEqual(['f1']);
    expect(() => checkBm25('wands', med, expected)).toThrow(/no expected BM25 figures for dataset "wands"/);
  });

  it('cogr baseline bm25 --check passes on MED as shipped', () => {
    const r = spawnSync(
      process.execPath,
      [join(__dirname, '../../bin/cogr.mjs'), 'baseline', 'bm25', '--dataset', 'med', '--check', '--json'],
      { encoding: 'utf8' },
    );
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { ok: boolean; rows: { ok: boolean }[] };
    expect(out.ok).toBe(true);
    expect(out.rows).toHaveLength(4);
  });
});
