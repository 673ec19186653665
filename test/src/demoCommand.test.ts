import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const home = mkdtempSync(join(tmpdir(), 'cogr-demo-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

function demo(extra: string[] = []) {
  return spawnSync(
    process.execPath,
    [
      join(__dirname, '../../bin/cogr.mjs'),
      'demo',
      '--dataset',
      'med',
      '--rounds',
      '1',
      '--query-epochs',
      '1',
      '--sft-epochs',
      '1',
      '--quiet',
      '--json',
      ...extra,
    ],
    { encoding: 'utf8', env: { ...process.env, COGR_HOME: home } },
  );
}

let firstSteps: unknown = null;

describe('cogr demo (the main job, small settings)', () => {
  it('runs SFT and a round, prints one JSON object with the steps and the BM25 row, writes the charts', () => {
    const r = demo();
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      steps: { step: string; metrics: { f1: number } }[];
      baseline: { f1: number; cutoff: number };
      split: { train: number; eval: number };
      report: string;
      db: string;
    };
    expect(out.steps.map((s) => s.step)).toEqual(['sft', 'r1-query', 'r1-item', 'refit']);
    firstSteps = out.steps;
    expect(out.split).toEqual({ train: 24, eval: 6 });
    expect(out.baseline.f1).toBeGreaterThan(0.2);
    expect(out.db).toBe(join(home, 'db'));
    expect(existsSync(out.report)).toBe(true);
    const html = readFileSync(out.report, 'utf8');
    for (const chart of ['bubbles', 'ngram', 'vocab', 'alignment', 'f1']) expect(html).toContain(`data-chart="${chart}"`);
  });

  it('resumes a finished run instantly with the same results, and refuses other options without --fresh', () => {
    const again = demo();
    expect(again.status).toBe(0);
    expect(again.stderr).not.toContain('step sft: start');
    expect((JSON.parse(again.stdout) as { steps: unknown }).steps).toEqual(firstSteps);
    // The same dataset spelled as its folder is the same run (resumed, not refused).
    const byPath = demo(['--dataset', join(__dirname, '../../data/med')]);
    expect(byPath.status, byPath.stderr).toBe(0);
    expect(byPath.stderr).not.toContain('step sft: start');
    expect(JSON.parse(byPath.stdout)).toMatchObject({ dataset: 'med', steps: firstSteps });
    const other = spawnSync(process.execPath, [join(__dirname, '../../bin/cogr.mjs'), 'demo', '--dataset', 'cisi', '--quiet'], {
      encoding: 'utf8',
      env: { ...process.env, COGR_HOME: home },
    });
    expect(other.status).not.toBe(0);
    expect(other.stderr).toMatch(/error\[INVALID_ARGUMENT\].*dataset: stored "med", asked "cisi".*--fresh/);
  });
});
