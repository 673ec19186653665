/**
 * `cogr drift` against a real LevelDB keyword store on disk: the store-backed report equals
 * the pure analysis of the same generations, and the CLI prints the table, writes the
 * files, prints JSON with `--json -` and fails with clear errors.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { analyzeDrift, type DriftInput } from '../../src/drift/analyze.ts';
import { driftReportFromStore, parseDriftQuery, writeDriftReport } from '../../src/drift/fromStore.ts';
import { syntheticDriftInput } from '../../src/drift/synthetic.ts';
import { runDriftCommand, type DriftCliOptions } from '../../src/commands/drift.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
let dir: string;
let dbDir: string;
let input: DriftInput;

function cli(...args: string[]) {
  const p = spawnSync(process.execPath, [join(ROOT, 'bin/cogr.mjs'), 'drift', ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, COGR_HOME: join(dir, 'home') },
    timeout: 60_000,
  });
  return { code: p.status, stdout: p.stdout, stderr: p.stderr };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-drift-cmd-'));
  dbDir = join(dir, 'db');
  input = syntheticDriftInput({ seed: 11, items: 40, queries: 15, generations: 4 });
  const db = await openDb(dbDir);
  try {
    const store = new KeywordIndexStore(db);
    for (const side of ['item', 'query'] as const) {
      for (const snap of input.sides[side]) {
        const w = store.writer(side, { mode: 'replace' });
        for (const e of snap.entries) w.set(e.id, e.self, e.keywords);
        const g = await w.commit({ round: snap.generation });
        expect(g).toBe(snap.generation);
      }
    }
  } finally {
    await db.close();
  }
  writeFileSync(join(dir, 'metrics.json'), JSON.stringify(input.f1ByRound));
});

/** The same snapshots as the store reads them back: under the english analyzer. */
function english(i: DriftInput): DriftInput {
  return {
    ...i,
    sides: {
      item: i.sides.item.map((g) => ({ ...g, analyzer: 'english' as const })),
      query: i.sides.query.map((g) => ({ ...g, analyzer: 'english' as const })),
    },
  };
}

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('drift over a LevelDB store', () => {
  it('equals the pure analysis of the same generations', async () => {
    const db = await openDb(dbDir, { createIfMissing: false });
    try {
      const store = new KeywordIndexStore(db);
      const fromStore = await driftReportFromStore(store, { from: 1, to: 3, f1ByRound: input.f1ByRound });
      // The store's generations use the default english analyzer.
      expect(fromStore).toEqual(analyzeDrift(english(input), { from: 1, to: 3 }));
      expect(fromStore.sides.item.generations.map((g) => g.generation)).toEqual([1, 2, 3]);
      // The published generation files (what cogr drift and GET /v1/drift read) give the same report.
      expect(await driftReportFromStore(new PublishedIndex(dbDir), { from: 1, to: 3, f1ByRound: input.f1ByRound })).toEqual(fromStore);
      const out = join(dir, 'loop', 'drift.json');
      const written = await writeDriftReport(store, {
        jsonPath: out,
        htmlPath: join(dir, 'loop', 'drift.html'),
        f1ByRound: input.f1ByRound,
      });
      expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(written);
      expect(readFileSync(join(dir, 'loop', 'drift.html'), 'utf8')).toContain('data-chart="bubbles"');
    } finally {
      await db.close();
    }
  });

  it('parses query-string options', () => {
    expect(parseDriftQuery({})).toEqual({});
    expect(parseDriftQuery({ from: '2', to: 'latest', limit: '10' })).toEqual({ from: 2, to: null, limit: 10 });
    expect(() => parseDriftQuery({ from: 'x' })).toThrow(/from must be a non-negative integer/);
    expect(() => parseDriftQuery({ from: '3', to: '1' })).toThrow('to: must be ≥ from (3), got 1');
    // On the command line the same errors name the flags.
    expect(() => parseDriftQuery({ from: '3', to: '1' }, 'cli')).toThrow('--to: must be ≥ --from (3), got 1');
    expect(() => parseDriftQuery({ from: '0x1' }, 'cli')).toThrow('--from must be a non-negative integer');
    expect(() => parseDriftQuery({ limit: '0' })).toThrow(/limit/);
  });
});

describe('cogr drift', () => {
  it('prints the summary table and writes the HTML and JSON reports', () => {
    const r = cli('--db', dbDir, '--from', '1', '--html', 'out/report.html', '--json', 'out/drift.json', '--metrics', 'metrics.json');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/^side\s+gen\s+entities\s+distinct\s+kw\/ent\s+median\s+1w\s+2w\s+3\+w\s+H bits\s+Gini\s+churn$/);
    expect(lines.filter((l) => /^item\s+[123]\s+40\s/.test(l))).toHaveLength(3);
    expect(lines.filter((l) => /^query\s+[123]\s+15\s/.test(l))).toHaveLength(3);
    expect(r.stdout).toMatch(/^round\s+q-in-item\s+i-in-query\s+Jaccard\s+F1 q-step\s+F1 i-step$/m);
    expect(r.stdout).toMatch(/^item 1 -> 3: kept \d+, \+\d+ added: /m);
    expect(r.stdout).toContain('HTML report written to out/report.html');
    const json = JSON.parse(readFileSync(join(dir, 'out/drift.json'), 'utf8'));
    expect(json).toEqual(analyzeDrift(english(input), { from: 1 }));
    const html = readFileSync(join(dir, 'out/report.html'), 'utf8');
    for (const c of ['bubbles', 'ngram', 'vocab', 'alignment', 'f1', 'churn']) expect(html).toContain(`data-chart="${c}"`);
  });

  it('prints JSON with --json - (in process)', async () => {
    const { output } = await runDriftCommand({ db: dbDir, from: '0', to: '2', limit: '3', json: '-' });
    const report = JSON.parse(output);
    expect(report).toEqual(analyzeDrift({ sides: english(input).sides }, { to: 2, limit: 3 }));
    expect(report.sides.item.diff.added.length).toBeLessThanOrEqual(3);
  });

  it('fails with clear errors', async () => {
    // One real process for the CLI's error line and exit code; the rest in process.
    const r = cli('--db', dbDir, '--from', '3', '--to', '1');
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('error[INVALID_ARGUMENT]: --to: must be ≥ --from (3), got 1\n');
    const run = (o: Partial<DriftCliOptions>) => runDriftCommand({ db: dbDir, from: '0', to: 'latest', limit: '50', ...o });
    await expect(run({ db: join(dir, 'nope') })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringMatching(/no database at .*nope: run `cogr demo`/),
    });
    expect(existsSync(join(dir, 'nope'))).toBe(false);
    writeFileSync(join(dir, 'bad.json'), JSON.stringify([{ round: 1, side: 'both', f1: 0.3 }]));
    await expect(run({ metrics: join(dir, 'bad.json') })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/bad\.json: \[0\]\.side: side must be 'item', 'query' or 'refit'/),
    });
    await expect(run({ metrics: join(dir, 'missing.json') })).rejects.toMatchObject({ code: 'DATA_MISSING' });
    await expect(run({ from: '9' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringMatching(/no generation in the range from 9 to latest/),
    });
    await expect(run({ to: 'soon' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/to must be/) });
  });
});
