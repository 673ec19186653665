/**
 * No write before the store is known sound, and named errors for what the file system
 * refuses: real `cogr` child processes (dist/) on copies of a real run's project
 * database — LevelDB's CURRENT removed, a table file truncated to half, the home made
 * read-only, a write that meets a full device (/dev/full).
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

const CLI = join(__dirname, '../../bin/cogr.mjs');
const dir = mkdtempSync(join(tmpdir(), 'cogr-sound-'));
// Other users (the read-only test runs as `nobody` under root) must reach the folders.
chmodSync(dir, 0o755);
const ds = writeSynthDataset(join(dir, 'synth'));
const base = join(dir, 'base');

function cogr(args: string[], env: Record<string, string> = {}, uid?: number): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    env: { ...process.env, COGR_HOME: join(dir, 'unused-home'), ...env },
    ...(uid !== undefined ? { uid, gid: uid } : {}),
  });
}
const demoArgs = (db: string, ...extra: string[]) => [
  'demo',
  '--dataset',
  ds,
  '--db',
  db,
  '--rounds',
  '1',
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
];
type Steps = { step: string; metrics: { f1: number } }[];
const stepsOf = (stdout: string) => (JSON.parse(stdout) as { steps: Steps }).steps.map((s) => [s.step, s.metrics.f1]);

/** Every file of a LevelDB folder but its LOCK and LOG, with a digest of its bytes. */
function snapshot(db: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of readdirSync(db)) {
    if (n === 'LOCK' || n.startsWith('LOG') || !statSync(join(db, n)).isFile()) continue;
    out[n] = createHash('sha256')
      .update(readFileSync(join(db, n)))
      .digest('hex');
  }
  return out;
}

function copyOfBase(name: string): string {
  const home = join(dir, name);
  cpSync(base, home, { recursive: true });
  return join(home, 'db');
}

/** A trace of an unnamed error: `error: Error: ...` or a stack frame. */
const STACK = /^error: |\n\s+at /;
let baseSteps: unknown;
let baseRecords: { step: string; itemGeneration: number; queryGeneration: number; adopted: boolean }[] = [];

beforeAll(() => {
  const r = cogr(demoArgs(join(base, 'db')));
  expect(r.status, r.stderr).toBe(0);
  baseSteps = stepsOf(r.stdout);
  baseRecords = (JSON.parse(r.stdout) as { steps: typeof baseRecords }).steps;
  // Opening it once more turns LevelDB's log into a table file.
  expect(cogr(['verify', '--db', join(base, 'db')]).status).toBe(0);
  expect(readdirSync(join(base, 'db')).some((n) => n.endsWith('.ldb'))).toBe(true);
}, 120_000);
afterAll(() => {
  chmodSync(dir, 0o700);
  spawnSync('chmod', ['-R', 'u+w', dir]);
  rmSync(dir, { recursive: true, force: true });
});

describe('a database folder without its CURRENT file', () => {
  it('is never intact, no writer opens it (--fresh included), nothing in it changes, and the named CURRENT restores it', () => {
    const db = copyOfBase('no-current');
    rmSync(join(db, 'CURRENT'));
    const before = snapshot(db);
    const v = cogr(['verify', '--db', db, '--json']);
    expect(v.status).toBe(1);
    const report = JSON.parse(v.stdout) as { intact: boolean; database: { error: string; code: string } };
    expect(report.intact).toBe(false);
    expect(report.database.code).toBe('DB_CORRUPT');
    expect(report.database.error).toContain('no CURRENT file');
    for (const args of [
      demoArgs(db),
      demoArgs(db, '--fresh'),
      ['index', 'delete', '--db', db, '--generation', '0'],
      ['verify', '--db', db, '--repair'],
    ]) {
      const r = cogr(args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(
          `^error\\[DB_CORRUPT\\]: database ${db} holds LevelDB files \\(MANIFEST-\\d+.*\\) but no CURRENT file: it cannot be opened, and nothing was written to it; .*remove the folder ${db}\\n$`,
        ),
      );
    }
    // LevelDB made no database over the old files: every table, log and manifest is as it was.
    expect(snapshot(db)).toEqual(before);
    // The message says how to restore CURRENT; doing so gives back the whole run.
    const m = /`printf '(MANIFEST-\d+)\\n' > ([^`]+)`/.exec(cogr(['verify', '--db', db]).stderr);
    expect(m).not.toBeNull();
    writeFileSync(m![2], `${m![1]}\n`);
    expect(cogr(['verify', '--db', db]).status).toBe(0);
    const resumed = cogr(demoArgs(db));
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(stepsOf(resumed.stdout)).toEqual(baseSteps);
  }, 120_000);

  it('nor one whose CURRENT names a MANIFEST that is gone', () => {
    const db = copyOfBase('no-manifest');
    const manifest = readFileSync(join(db, 'CURRENT'), 'utf8').trim();
    rmSync(join(db, manifest));
    const before = snapshot(db);
    for (const args of [['verify', '--db', db], demoArgs(db)]) {
      const r = cogr(args);
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(`CURRENT names "${manifest}", which does not exist`);
    }
    expect(snapshot(db)).toEqual(before);
  }, 60_000);
});

describe('a table file truncated to half', () => {
  it('is a named DB_CORRUPT naming the file for every reader of the database, and --fresh starts over', () => {
    const db = copyOfBase('truncated');
    const table = readdirSync(db)
      .filter((n) => n.endsWith('.ldb'))
      .sort((a, b) => statSync(join(db, b)).size - statSync(join(db, a)).size)[0];
    truncateSync(join(db, table), Math.floor(statSync(join(db, table)).size / 2));
    for (const args of [['verify', '--db', db], ['verify', '--db', db, '--repair'], demoArgs(db)]) {
      const r = cogr(args);
      expect(r.status, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(/^error\[DB_CORRUPT\]: /);
      expect(r.stderr).toContain(join(db, table));
      expect(r.stderr).not.toMatch(STACK);
    }
    expect(cogr(demoArgs(db)).stderr).toContain('--fresh');
    // --fresh clears what it cannot read (under the lock) and runs the same run again.
    const fresh = cogr(demoArgs(db, '--fresh'));
    expect(fresh.status, fresh.stderr).toBe(0);
    expect(fresh.stderr).toContain('the database cannot be read: deleting its files to start over');
    expect(stepsOf(fresh.stdout)).toEqual(baseSteps);
    expect(cogr(['verify', '--db', db]).status).toBe(0);
  }, 120_000);
});

/**
 * Make `home` read-only for the commands: chmod, and — since chmod does not stop root —
 * under root a read-only bind mount of it (EROFS), or, where mounting is not allowed, the
 * commands run as `nobody` when that user can reach this checkout's CLI (a checkout under a
 * folder closed to other users cannot be run by `nobody`). Returns the uid to run as and
 * the undo, or a reason the case cannot be made here.
 */
function makeReadOnly(home: string): { uid?: number; undo: () => void } | { reason: string } {
  spawnSync('chmod', ['-R', 'a-w,a+rX', home]);
  if (process.getuid?.() !== 0) return { undo: () => {} };
  if (spawnSync('mount', ['--bind', home, home]).status === 0) {
    if (spawnSync('mount', ['-o', 'remount,ro,bind', home]).status === 0) return { undo: () => void spawnSync('umount', [home]) };
    spawnSync('umount', [home]);
  }
  const reach = spawnSync(process.execPath, ['-e', `require('fs').accessSync(${JSON.stringify(CLI)}, require('fs').constants.R_OK)`], {
    uid: 65534,
    gid: 65534,
  });
  if (reach.status === 0) return { uid: 65534, undo: () => {} };
  return { reason: 'running as root without mount privileges, in a checkout that `nobody` cannot read' };
}

describe('a read-only home', () => {
  it.skipIf(process.platform === 'win32')(
    'is READ_ONLY naming the folder for writers, never DB_CORRUPT; readers still work',
    (ctx) => {
      const home = join(dir, 'read-only');
      cpSync(base, home, { recursive: true });
      const db = join(home, 'db');
      const ro = makeReadOnly(home);
      if ('reason' in ro) {
        ctx.skip(ro.reason);
        return;
      }
      const { uid } = ro;
      try {
        readOnlyCases(home, db, uid);
      } finally {
        ro.undo();
      }
    },
    120_000,
  );
});

function readOnlyCases(home: string, db: string, uid: number | undefined): void {
  {
    const env = { COGR_HOME: home };
    const cases: [string[], string][] = [
      [demoArgs(db), db],
      [['verify', '--db', db], db],
      [['verify', '--db', db, '--repair'], db],
      [['index', 'delete', '--db', db, '--generation', '0'], db],
      [['datasets', 'add', 'mine', ds], home],
      [['evolve', '--dataset', ds, '--folds', '2', '--fold', '0', '--quiet'], home],
    ];
    for (const [args, path] of cases) {
      const r = cogr(args, env, uid);
      expect(r.status, `${args.join(' ')}: ${r.stderr}`).toBe(1);
      // The last line: a writer may have said what it was about to do first.
      const last = r.stderr.trimEnd().split('\n').at(-1)!;
      expect(last).toMatch(/^error\[READ_ONLY\]: /);
      expect(last).toContain(path);
      expect(r.stderr).not.toMatch(STACK);
    }
    // The readers read the published files only.
    const list = cogr(['index', 'list', '--db', db, '--json'], env, uid);
    expect(list.status, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as { generations: unknown[] }).generations.length).toBeGreaterThan(0);
    expect(cogr(['index', 'search', '--db', db, '--keywords', 't0w0'], env, uid).status).toBe(0);
  }
}

describe('a full device', () => {
  it.skipIf(!existsSync('/dev/full'))('is DISK_FULL naming the file, without a stack', () => {
    const home = join(dir, 'full');
    mkdirSync(home);
    // datasets.json is written through datasets.json.tmp: here the device behind it is full.
    symlinkSync('/dev/full', join(home, 'datasets.json.tmp'));
    const r = cogr(['datasets', 'add', 'mine', ds], { COGR_HOME: home });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(`^error\\[DISK_FULL\\]: .*${join(home, 'datasets.json.tmp')}: no space left on the device \\(ENOSPC\\)`),
    );
    expect(r.stderr).not.toMatch(STACK);
    expect(existsSync(join(home, 'datasets.json'))).toBe(false);
  });
});

describe('index delete of a generation the stored run uses', () => {
  it('is refused naming the steps unless --force; verify then reports the steps whose generation is missing', () => {
    const db = copyOfBase('delete');
    const best = baseRecords.filter((s) => s.adopted).at(-1)!;
    const users = baseRecords.filter((s) => s.itemGeneration === best.itemGeneration).map((s) => s.step);
    const list = () =>
      (JSON.parse(cogr(['index', 'list', '--db', db, '--json']).stdout) as { generations: { generation: number }[] }).generations.map(
        (g) => g.generation,
      );
    const before = list();
    const r = cogr(['index', 'delete', '--db', db, '--generation', String(best.itemGeneration)]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      new RegExp(
        `^error\\[INVALID_ARGUMENT\\]: item generation ${best.itemGeneration} is used by .*step ${best.step} \\(the run's best step\\).* --force deletes it anyway`,
      ),
    );
    for (const u of users) expect(r.stderr).toContain(`step ${u}`);
    expect(list()).toEqual(before);
    expect(cogr(['verify', '--db', db]).status).toBe(0);
    // The query side is guarded the same way.
    const q = cogr(['index', 'delete', '--db', db, '--side', 'query', '--generation', String(best.queryGeneration)]);
    expect(q.status).toBe(2);
    expect(q.stderr).toContain(`step ${best.step}`);
    // --force deletes it; verify then names every step left without it.
    const forced = cogr(['index', 'delete', '--db', db, '--generation', String(best.itemGeneration), '--force']);
    expect(forced.status, forced.stderr).toBe(0);
    expect(list()).not.toContain(best.itemGeneration);
    const v = cogr(['verify', '--db', db, '--json']);
    expect(v.status).toBe(1);
    const lines = (JSON.parse(v.stdout) as { lines: { what: string; status: string; detail: string }[] }).lines.filter(
      (l) => l.status === 'missing',
    );
    expect(lines.map((l) => l.what)).toEqual(users.map((u) => `step ${u}`));
    expect(lines[0].detail).toContain(`uses item generation ${best.itemGeneration}, which the database does not hold`);
  }, 60_000);
});
