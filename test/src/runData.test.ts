/**
 * A run knows its data: real `cogr` child processes (dist/) on a registered JSONL
 * dataset whose files change under a stored run — a resume on other items, queries,
 * judgements or split is refused naming what changed, `datasets add` never re-points a
 * name silently, and a run stored before fingerprints is accepted and gets one.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { readPublishedRun } from '../../src/run/published.ts';
import { RUN_SUBLEVEL, RunState } from '../../src/run/state.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const CLI = join(__dirname, '../../bin/cogr.mjs');
const dir = mkdtempSync(join(tmpdir(), 'cogr-rundata-'));
const home = join(dir, 'home');
const db = join(home, 'db');
const ds = writeSynthDataset(join(dir, 'ds'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cogr = (...args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, COGR_HOME: home } });
const demo = (rounds: number, ...extra: string[]) =>
  cogr(
    'demo',
    '--dataset',
    'mine',
    '--rounds',
    String(rounds),
    '--group-size',
    '4',
    '--query-epochs',
    '1',
    '--item-epochs',
    '1',
    '--sft-epochs',
    '1',
    '--workers',
    '1',
    '--quiet',
    '--json',
    ...extra,
  );
const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const write = (file: string, rows: unknown[]) => writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
const publishedSteps = async () => (await readPublishedRun(db))!.steps.map((s) => s.step);

/** A copy of the dataset with one change. */
function variant(name: string, change: (d: string) => void): string {
  const d = join(dir, name);
  cpSync(ds, d, { recursive: true });
  change(d);
  return d;
}

beforeAll(() => {
  expect(cogr('datasets', 'add', 'mine', ds).status).toBe(0);
  const r = demo(1);
  expect(r.status, r.stderr).toBe(0);
}, 120_000);

describe('datasets add over a registered name', () => {
  it('is refused unless --replace; the same folder again is accepted', () => {
    const other = variant('other', () => {});
    const r = cogr('datasets', 'add', 'mine', other);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(
        `^error\\[INVALID_ARGUMENT\\]: name: "mine" is registered already \\(-> ${ds}\\); \`cogr datasets add --replace\` points it at ${other}`,
      ),
    );
    expect(
      (JSON.parse(cogr('datasets', '--json').stdout) as { datasets: { name: string; path: string }[] }).datasets.find(
        (d) => d.name === 'mine',
      )?.path,
    ).toBe(ds);
    expect(cogr('datasets', 'add', 'mine', ds).status).toBe(0);
  });
});

describe('a resume on changed data', () => {
  // Each change, and the parts of the fingerprint it must name (and only those).
  const cases: [string, (d: string) => void, string[]][] = [
    [
      'judgements re-graded',
      (d) =>
        write(
          join(d, 'qrels.jsonl'),
          lines(join(d, 'qrels.jsonl')).map((q, i) => (i === 0 ? { ...q, grade: 2 } : q)),
        ),
      ['judgements'],
    ],
    [
      'one item text',
      (d) =>
        write(
          join(d, 'items.jsonl'),
          lines(join(d, 'items.jsonl')).map((it, i) => (i === 3 ? { ...it, text: `${String(it.text)} changed` } : it)),
        ),
      ['items'],
    ],
    [
      'one query text',
      (d) =>
        write(
          join(d, 'queries.jsonl'),
          lines(join(d, 'queries.jsonl')).map((q, i) => (i === 0 ? { ...q, text: `${String(q.text)} changed` } : q)),
        ),
      ['queries'],
    ],
    [
      "a query's judgements dropped",
      (d) => {
        const all = lines(join(d, 'qrels.jsonl'));
        write(
          join(d, 'qrels.jsonl'),
          all.filter((q) => q.query_id !== all[0].query_id),
        );
      },
      ['judgements', 'split'],
    ],
  ];
  for (const [what, change, parts] of cases) {
    it(`is refused naming what changed: ${what}`, async () => {
      const steps = await publishedSteps();
      const d = variant(what.replace(/\W+/g, '-'), change);
      expect(cogr('datasets', 'add', 'mine', d, '--replace').status).toBe(0);
      const r = demo(2);
      expect(r.status).toBe(2);
      const named = [...r.stderr.matchAll(/(items|queries|judgements|split) \(\d+ → \d+/g)].map((m) => m[1]);
      expect(named).toEqual(parts);
      expect(r.stderr).toMatch(
        new RegExp(
          `^error\\[INVALID_ARGUMENT\\]: the database ${db} holds a run made on other data than dataset mine holds now: .* changed since the run began; .*--fresh`,
        ),
      );
      // Nothing was written: the stored run is as it was.
      expect(await publishedSteps()).toEqual(steps);
      // The readers that take the dataset from the run refuse it too (they would serve the
      // run's generations with other titles, planner texts or judgements), before listening.
      for (const cmd of ['serve', 'reward-server']) {
        const r2 = cogr(cmd, '--port', '0');
        expect(r2.status, cmd).toBe(2);
        expect(r2.stderr).toMatch(
          /^error\[INVALID_ARGUMENT\]: the database .* holds a run made on other data .*serving it would pair the run's generations with other data/,
        );
      }
      // Rollouts for an external trainer are refused on other data too (rewards from the old judgements).
      const roll = cogr('rollouts', '--side', 'query', '--round', '1', '--out', join(dir, 'r.jsonl'), '--limit', '1', '--quiet');
      expect(roll.status).toBe(2);
      expect([...roll.stderr.matchAll(/(items|queries|judgements|split) \(\d+ → \d+/g)].map((m) => m[1])).toEqual(
        parts.filter((p) => p !== 'split'),
      );
      expect(cogr('datasets', 'add', 'mine', ds, '--replace').status).toBe(0);
    }, 60_000);
  }

  it('goes on when the data is the same again, and --fresh starts over on other data', async () => {
    const more = demo(2);
    expect(more.status, more.stderr).toBe(0);
    expect(await publishedSteps()).toEqual(['sft', 'r1-query', 'r1-item', 'r2-query', 'r2-item', 'refit']);
    const d = variant('fresh', cases[0][1]);
    expect(cogr('datasets', 'add', 'mine', d, '--replace').status).toBe(0);
    const fresh = demo(1, '--fresh');
    expect(fresh.status, fresh.stderr).toBe(0);
    expect(demo(1).status).toBe(0);
    expect(cogr('datasets', 'add', 'mine', ds, '--replace').status).toBe(0);
    expect(demo(1).status).toBe(2);
    expect(demo(1, '--fresh').status).toBe(0);
  }, 120_000);

  it('accepts a run stored before fingerprints and records one at its next resume', async () => {
    // Such a run: the same state without the `data` value.
    const h = await openDb(db);
    await h.sublevel(RUN_SUBLEVEL).del('data');
    await new RunState(h).publish();
    await h.close();
    expect((await readPublishedRun(db))!.data).toBeUndefined();
    const r = demo(1);
    expect(r.status, r.stderr).toBe(0);
    expect((await readPublishedRun(db))!.data?.judgements.count).toBeGreaterThan(0);
    const d = variant('after-old', cases[1][1]);
    expect(cogr('datasets', 'add', 'mine', d, '--replace').status).toBe(0);
    expect(demo(1).stderr).toMatch(/items \(\d+ → \d+, other contents\) changed/);
  }, 60_000);
});
