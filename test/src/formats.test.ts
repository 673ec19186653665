/**
 * Format compatibility (in the style of tantivy's): databases (with their published
 * generation files) and policy files written by earlier versions, committed under
 * test/fixtures/formats/ (see make.ts there), are opened by this version and read back
 * exactly, by the writer's path and by the readers' path; a file of another format
 * version is refused with the version message, never misread.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DB_FORMAT_VERSION, DB_META_KEY, DB_UPGRADE_HINT, openDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { PUBLISHED_FORMAT_VERSION, PublishedIndex } from '../../index/store/published.ts';
import { openSealedJson, sealJson } from '../../index/store/sealed.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { POLICY_VERSION } from '../../generators/policy/serialize.ts';
import { policyStore } from '../../src/run/policies.ts';
import { publishedPolicyStore } from '../../src/run/published.ts';
import { readRunAt, readStoredRun, RUN_STATE_VERSION, RUN_SUBLEVEL } from '../../src/run/state.ts';
import { formatSummary, POLICY_PROBE } from '../fixtures/formats/summary.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';

const FIXTURES = join(__dirname, '../fixtures/formats');
const json = (x: unknown): unknown => JSON.parse(JSON.stringify(x));

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-formats-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A writable copy of a fixture database (opening a LevelDB writes to its folder). */
function copy(name: string): string {
  const to = join(dir, `${name}-${readdirSync(dir).length}`);
  cpSync(join(FIXTURES, name), to, { recursive: true });
  return to;
}

const CURRENT = `db-v${DB_FORMAT_VERSION}-run-v${RUN_STATE_VERSION}-files-v${PUBLISHED_FORMAT_VERSION}`;

describe('committed databases', () => {
  const dbs = readdirSync(FIXTURES).filter((f) => /^db-v\d+-run-v\d+(-files-v\d+)?$/.test(f));
  it('there is one of the current versions', () => {
    expect(dbs).toContain(CURRENT);
  });
  for (const name of dbs) {
    const [, v, rv] = /^db-v(\d+)-run-v(\d+)/.exec(name)!;
    const version = Number(v);
    const runVersion = Number(rv);
    if (version === DB_FORMAT_VERSION && runVersion < RUN_STATE_VERSION) {
      it(`${name} (an older run state) opens, and its run is refused with the version message`, async () => {
        const db = await openDb(copy(name));
        try {
          await expect(readStoredRun(db)).rejects.toMatchObject({
            code: 'DB_VERSION',
            message: `the co-evolution run in ${db.path} has run-state version ${runVersion}, expected ${RUN_STATE_VERSION}; refusing to read it`,
          });
        } finally {
          await db.close();
        }
      });
      continue;
    }
    if (version < DB_FORMAT_VERSION) {
      it(`${name} (an older format) is refused with the version message and how to rebuild`, async () => {
        const path = copy(name);
        await expect(openDb(path)).rejects.toMatchObject({
          code: 'DB_VERSION',
          message: `database ${path} has format version ${version}, expected ${DB_FORMAT_VERSION}; refusing to read it: ${DB_UPGRADE_HINT}`,
        });
      });
      continue;
    }
    it(`${name} opens and reads back its run, generations, searches and policies`, async () => {
      const db = await openDb(copy(name));
      try {
        const got = await formatSummary(await readStoredRun(db), new KeywordIndexStore(db), policyStore(db), synthCorpus().items);
        expect(json(got)).toEqual(JSON.parse(readFileSync(join(FIXTURES, `${name}.expected.json`), 'utf8')));
      } finally {
        await db.close();
      }
    });
    const files = /-files-v(\d+)$/.exec(name);
    if (files && Number(files[1]) === PUBLISHED_FORMAT_VERSION) {
      it(`${name}: readers read back the same from its generation files alone (the folder is not written)`, async () => {
        const path = join(FIXTURES, name);
        const got = await formatSummary(
          (await readRunAt(path))!,
          new PublishedIndex(path),
          publishedPolicyStore(path),
          synthCorpus().items,
        );
        expect(json(got)).toEqual(JSON.parse(readFileSync(join(FIXTURES, `${name}.expected.json`), 'utf8')));
      });
    }
  }

  it('a generation file of another format version is refused with the version message', async () => {
    const path = copy(CURRENT);
    const manifest = join(path, 'published', 'item-00000001.json');
    const doc = openSealedJson(readFileSync(manifest), 'test', manifest) as Record<string, unknown>;
    writeFileSync(manifest, sealJson({ ...doc, version: PUBLISHED_FORMAT_VERSION + 1 }));
    await expect(new PublishedIndex(path).openView('item', 1)).rejects.toMatchObject({
      code: 'DB_VERSION',
      message: `item generation 1: manifest ${manifest} has generation-file format version ${PUBLISHED_FORMAT_VERSION + 1}, this cogr reads version ${PUBLISHED_FORMAT_VERSION}; rewrite the files with \`cogr verify --repair\``,
    });
    const run = join(path, 'published', 'run.json');
    writeFileSync(run, sealJson({ ...(openSealedJson(readFileSync(run), 'test', run) as object), version: 0 }));
    await expect(readRunAt(path)).rejects.toMatchObject({
      code: 'DB_VERSION',
      message: `the co-evolution run state: file ${run} has format version 0, this cogr reads version ${PUBLISHED_FORMAT_VERSION}; rewrite it with \`cogr verify --repair\``,
    });
  });

  it('a database of another format version is refused with the version message', async () => {
    const path = copy(CURRENT);
    const db = await openDb(path);
    await db.level.put(DB_META_KEY, JSON.stringify({ version: DB_FORMAT_VERSION + 1, createdAt: 'later' }));
    await db.close();
    await expect(openDb(path)).rejects.toMatchObject({
      code: 'DB_VERSION',
      message: `database ${path} has format version ${DB_FORMAT_VERSION + 1}, expected ${DB_FORMAT_VERSION}; refusing to read it (it was written by a newer cogr)`,
    });
  });

  it('a run of another run-state version is refused with the version message', async () => {
    const path = copy(CURRENT);
    const db = await openDb(path);
    try {
      await db.sublevel(RUN_SUBLEVEL).put('version', RUN_STATE_VERSION + 1);
      await expect(readStoredRun(db)).rejects.toMatchObject({
        code: 'DB_VERSION',
        message: `the co-evolution run in ${db.path} has run-state version ${RUN_STATE_VERSION + 1}, expected ${RUN_STATE_VERSION}; refusing to read it`,
      });
    } finally {
      await db.close();
    }
  });
});

describe('committed policy files', () => {
  const files = readdirSync(FIXTURES).filter((f) => /^policy-v\d+\.json$/.test(f));
  const read = (v: number) => JSON.parse(readFileSync(join(FIXTURES, `policy-v${v}.json`), 'utf8'));
  it('there is one of the current version, and it decodes as the policy it was saved from', () => {
    expect(files).toContain(`policy-v${POLICY_VERSION}.json`);
    const p = EmbeddedPolicy.fromJSON(read(POLICY_VERSION));
    expect(p.side).toBe('item');
    expect(p.vocabulary).not.toBeNull();
    const expected = JSON.parse(readFileSync(join(FIXTURES, `policy-v${POLICY_VERSION}.expected.json`), 'utf8')) as { decode: unknown };
    expect(json(p.decode(POLICY_PROBE, { greedy: true }))).toEqual(expected.decode);
  });
  it('a version 3 policy (before the shared vocabulary) is read with an open vocabulary and decodes as it did', () => {
    const expected = JSON.parse(readFileSync(join(FIXTURES, `${CURRENT}.expected.json`), 'utf8')) as { decodes: Record<string, unknown> };
    const p = EmbeddedPolicy.fromJSON(read(3));
    expect(p.vocabulary).toBeNull();
    expect(json(p.decode(POLICY_PROBE, { greedy: true }))).toEqual(expected.decodes['item:1']);
  });
  it('a policy of another version is refused with the version message', () => {
    const j = read(POLICY_VERSION);
    for (const version of [2, POLICY_VERSION + 1])
      expect(() => EmbeddedPolicy.fromJSON({ ...j, version })).toThrow(
        `embedded policy has format version ${version}; this cogr reads versions 3 and ${POLICY_VERSION} only (retrain with cogr sft)`,
      );
  });
});
