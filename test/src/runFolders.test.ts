/**
 * First-hour friction of runs and datasets, through the real CLI in process: a run's
 * folder and name come from the dataset's identity (registered name or absolute path),
 * so two spellings of one dataset are one run and two folders that end alike never
 * collide; flags are checked before anything is created; folds count from 0 everywhere;
 * `evolve --fresh` exists; `datasets add` never registers a folder that does not load and
 * `datasets remove` forgets one.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { datasetIdentity } from '../../src/datasets/index.ts';
import { dataRoot } from '../../src/datasets/registry.ts';
import { cogr } from './_cli.ts';

const FIXTURES = join(__dirname, '../fixtures/datasets');
const tmp = mkdtempSync(join(tmpdir(), 'cogr-folders-'));
const saved = process.env.COGR_HOME;
let home = '';
beforeEach(() => {
  home = mkdtempSync(join(tmp, 'home-'));
  process.env.COGR_HOME = home;
});
afterAll(() => {
  process.env.COGR_HOME = saved;
  rmSync(tmp, { recursive: true, force: true });
});

describe('dataset identity', () => {
  it('a shipped name and its folder are one dataset; two folders ending alike are two', () => {
    expect(datasetIdentity('med')).toMatchObject({ id: 'med', folder: 'med' });
    expect(datasetIdentity(join(dataRoot(), 'med'))).toMatchObject({ id: 'med', folder: 'med' });
    const a = join(tmp, 'a', 'beir');
    const b = join(tmp, 'b', 'beir');
    cpSync(join(FIXTURES, 'beir'), a, { recursive: true });
    cpSync(join(FIXTURES, 'beir'), b, { recursive: true });
    const ia = datasetIdentity(a);
    const ib = datasetIdentity(b);
    expect(ia.id).toBe(a);
    expect(ib.id).toBe(b);
    expect(ia.folder).toMatch(/^beir-[0-9a-f]{8}$/);
    expect(ib.folder).toMatch(/^beir-[0-9a-f]{8}$/);
    expect(ia.folder).not.toBe(ib.folder);
    // A relative spelling of the same folder is the same dataset.
    expect(datasetIdentity(join(tmp, 'a', '..', 'a', 'beir')).id).toBe(a);
  });
});

describe('cogr evolve and cogr demo check their flags before creating anything', () => {
  it('--fold out of range is refused naming the range; no database is left behind', async () => {
    const r = await cogr('evolve', '--dataset', 'med', '--folds', '5', '--fold', '7', '--quiet');
    expect(r.code).toBe(2);
    expect(r.err).toBe('error[INVALID_ARGUMENT]: --fold: expected an integer in [0, 4] (folds count from 0), got "7"\n');
    expect(existsSync(join(home, 'evolve'))).toBe(false);
    expect((await cogr('evolve', '--dataset', 'med', '--fold', '0x1', '--quiet')).err).toContain('--fold: expected an integer');
    expect(existsSync(join(home, 'evolve'))).toBe(false);
  });

  it('bad options and unknown datasets leave no database', async () => {
    expect((await cogr('demo', '--dataset', 'nope', '--quiet')).err).toMatch(/^error\[DATA_MISSING\]: dataset "nope"/);
    expect((await cogr('demo', '--rounds', '1e2', '--quiet')).err).toBe(
      'error[INVALID_ARGUMENT]: --rounds: expected an integer, got "1e2"\n',
    );
    expect((await cogr('demo', '--dataset', join(FIXTURES, 'jsonl-badline'), '--quiet')).err).toMatch(/^error\[DATA_FORMAT\]/);
    expect(existsSync(join(home, 'db'))).toBe(false);
  });

  it('evolve takes --fresh (its refusal of other options suggests it)', async () => {
    const help = await cogr('evolve', '--help');
    expect(help.out).toMatch(/--fresh +delete the stored run of each fold first/);
    expect(help.out).toMatch(/--fold <k> +run only this fold; folds count from 0/);
  });
});

describe('cogr datasets add / remove', () => {
  it('a folder that does not load is reported and not registered', async () => {
    const r = await cogr('datasets', 'add', 'broken', join(FIXTURES, 'jsonl-badline'));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^error\[DATA_FORMAT\]: .*items\.jsonl:\d+/);
    expect(existsSync(join(home, 'datasets.json'))).toBe(false);
  });

  it('registers, then forgets a name; the folder stays', async () => {
    const dir = join(home, 'mine');
    mkdirSync(dir);
    cpSync(join(FIXTURES, 'jsonl'), dir, { recursive: true });
    expect((await cogr('datasets', 'add', 'mine', dir)).code).toBe(0);
    expect(JSON.parse(readFileSync(join(home, 'datasets.json'), 'utf8')).datasets).toHaveProperty('mine');
    // The registered name is the identity of its folder too.
    expect(datasetIdentity(dir)).toMatchObject({ id: 'mine', folder: 'mine' });
    const rm = await cogr('datasets', 'remove', 'mine');
    expect(rm.out).toBe(`removed mine (${dir} is left alone)\n`);
    expect(JSON.parse(readFileSync(join(home, 'datasets.json'), 'utf8')).datasets).toEqual({});
    expect(existsSync(join(dir, 'items.jsonl'))).toBe(true);
    expect((await cogr('datasets', 'remove', 'mine')).err).toBe(
      'error[NOT_FOUND]: name: no registered dataset "mine" (registered: none)\n',
    );
    expect((await cogr('datasets', 'remove', 'med')).err).toBe(
      'error[INVALID_ARGUMENT]: name: "med" is a shipped dataset and cannot be removed\n',
    );
  });
});
