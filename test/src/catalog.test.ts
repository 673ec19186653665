/**
 * A living catalog over HTTP (issue 48): a real `cogr serve --writable` process on a served
 * run (its writer thread holds the LevelDB), written through its API and checked from
 * outside: an added item is returned by a query sharing its keywords as soon as the write is
 * acknowledged, its keywords are those `cogr generate --side item --temperature 0` gives its
 * text with the served round's item policy, a deleted item never matches again, hand-set
 * keywords are kept across later writes until cleared, a batch is all or nothing, and
 * concurrent writes serialize while a second writer process is refused by name.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PublishedIndex } from '../../index/store/published.ts';
import { normalizeKeywordSet } from '../../index/text/normalize.ts';
import { readRunAt, bestServing, generatorRound } from '../../src/run/state.ts';
import { catalogRun, json, send, startServe, type CatalogRun, type ServeChild } from './_catalogFixture.ts';

let run: CatalogRun;
const servers: ServeChild[] = [];
beforeAll(() => {
  run = catalogRun('cogr-catalog-');
}, 300_000);
afterAll(async () => {
  for (const s of servers) await s.stop();
  run?.cleanup();
});

async function serveWritable(db: string, extra: string[] = []): Promise<ServeChild> {
  const s = await startServe(['--db', db, '--token', 'tok', '--writable', ...extra]);
  servers.push(s);
  return s;
}

// Its text holds phrases of the run's shared vocabulary (t0w0, t1w1: several items of the synthetic collection carry them).
const NEW = { title: 't0w0 t1w1 review', text: 't0w0 t0w0 t1w1 t1w1 t0w5 review of t0w5 effect t1w1 patients t0w0 analysis' };

/** Every id of a search's served set (the matched set, and the run's floor: its top items by p). */
async function found(base: string, q: string): Promise<string[]> {
  const r = await json(`${base}/v1/search?q=${encodeURIComponent(q)}&k=1000`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return (r.body.items as { id: string }[]).slice(0, r.body.matched).map((h) => h.id);
}

describe('catalog writes through cogr serve --writable', () => {
  it('an added item is searchable when acknowledged, with the keywords `cogr generate` gives it; a deleted one never matches again', async () => {
    const db = run.copy();
    const s = await serveWritable(db);
    const before = (await json(`${s.base}/health`)).body.generation as number;
    expect((await json(`${s.base}/v1/items/NEW-1`, send('PUT', NEW, 'wrong'))).status).toBe(401);
    const put = await json(`${s.base}/v1/items/NEW-1`, send('PUT', NEW));
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(put.body).toMatchObject({ base: before, counts: { added: 1, updated: 0, deleted: 0 }, removed: [] });
    // Acknowledged = served: the ack names the generation searches answer from.
    expect(put.body.served).toBe(put.body.generation);
    const keywords: string[] = put.body.items[0].keywords;
    expect(keywords.length).toBeGreaterThan(0);
    for (const k of keywords) expect(await found(s.base, k), k).toContain('NEW-1');
    const search = await json(`${s.base}/v1/search?q=${encodeURIComponent(keywords[0])}&k=1000&fields=text`);
    const hit = search.body.items.find((h: { id: string }) => h.id === 'NEW-1');
    expect(hit).toMatchObject({ title: NEW.title, fields: { text: NEW.text } });
    const item = await json(`${s.base}/v1/items/NEW-1`);
    expect(item.body).toMatchObject({ id: 'NEW-1', title: NEW.title, served: { generation: put.body.generation, handSet: false } });

    const del = await json(`${s.base}/v1/items/NEW-1`, send('DELETE'));
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ counts: { deleted: 1 }, removed: ['NEW-1'], served: del.body.generation });
    // Nothing matches it: not its keywords, not its title, not after a later write either.
    const probes = [...keywords, NEW.title, 't0w0', 't1w1 review'];
    for (const q of probes) expect(await found(s.base, q), q).not.toContain('NEW-1');
    const other = await json(`${s.base}/v1/items/NEW-2`, send('PUT', { title: 't2w1 note', text: 't2w1 t2w1 t2w3 note' }));
    expect(other.status).toBe(200);
    for (const q of probes) expect(await found(s.base, q), q).not.toContain('NEW-1');
    expect((await json(`${s.base}/v1/items/NEW-1`)).body.served).toBeNull();
    expect((await json(`${s.base}/v1/items/NEW-1`, send('DELETE'))).status).toBe(404);
    await s.stop();

    // The same text through `cogr generate --side item --temperature 0` with the served round's
    // item policy (its opposite side the served query generation): the same keywords.
    const stored = (await readRunAt(db))!;
    const best = bestServing(stored.steps)!;
    const policyRound = generatorRound(stored.steps.slice(0, stored.steps.findIndex((x) => x.step === best.step) + 1), 'item');
    const input = join(run.dir, 'new-1.jsonl');
    writeFileSync(input, JSON.stringify({ id: 'NEW-1', ...NEW }) + '\n');
    const gen = run.cogr(
      'generate',
      '--side',
      'item',
      '--temperature',
      '0',
      '--policy',
      String(policyRound),
      '--opposite',
      String(best.queryGeneration),
      '--db',
      db,
      '--from',
      input,
      '--json',
    );
    expect(gen.status, gen.stderr).toBe(0);
    const generated = JSON.parse(gen.stdout)['NEW-1'][0] as string[];
    expect([...keywords].sort()).toEqual([...normalizeKeywordSet(generated).keywords].sort());
    expect(put.body.generator).toBe(`item policy of round ${policyRound}`);
  });

  it('hand-set keywords: marked, kept across a later update until cleared, then the generator’s again', async () => {
    const db = run.copy();
    const s = await serveWritable(db);
    const set = await json(`${s.base}/v1/items/d0-1/keywords`, send('PUT', { keywords: ['hand picked', 'T0W1 Special'] }));
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.items).toEqual([{ id: 'd0-1', keywords: ['hand picked', 't0w1 special'], handSet: true }]);
    expect(await found(s.base, 'hand picked')).toContain('d0-1');
    expect((await json(`${s.base}/v1/items/d0-1`)).body.served).toMatchObject({ keywords: ['hand picked', 't0w1 special'], handSet: true });
    // An update of its text runs the generator for other items, not for this one.
    const upd = await json(
      `${s.base}/v1/items/batch`,
      send('POST', { ops: [{ op: 'update', id: 'd0-1', title: 't0w4 renamed', text: 't0w4 t0w4 new text' }] }),
    );
    expect(upd.status, JSON.stringify(upd.body)).toBe(200);
    expect(upd.body.items).toEqual([{ id: 'd0-1', keywords: ['hand picked', 't0w1 special'], handSet: true }]);
    expect((await json(`${s.base}/v1/items/d0-1`)).body).toMatchObject({ title: 't0w4 renamed', served: { handSet: true } });
    const cleared = await json(`${s.base}/v1/items/d0-1/keywords`, send('DELETE'));
    expect(cleared.status).toBe(200);
    expect(cleared.body.counts.cleared).toBe(1);
    expect(cleared.body.items[0].handSet).toBe(false);
    expect(cleared.body.items[0].keywords).not.toContain('hand picked');
    expect(await found(s.base, 'hand picked')).not.toContain('d0-1');
    // The generator's keywords for its new text: what a write of that text gives another item.
    const probe = await json(`${s.base}/v1/items/PROBE`, send('PUT', { title: 't0w4 renamed', text: 't0w4 t0w4 new text' }));
    expect([...cleared.body.items[0].keywords].sort()).toEqual([...probe.body.items[0].keywords].sort());
  });

  it('a batch is all or nothing: a bad field or a conflict is named and nothing is committed', async () => {
    const db = run.copy();
    const s = await serveWritable(db);
    const gen = async () => (await json(`${s.base}/health`)).body.generation as number;
    const g0 = await gen();
    const bad = await json(
      `${s.base}/v1/items/batch`,
      send('POST', {
        ops: [
          { op: 'add', id: 'A1', title: 'a', text: 't0w1' },
          { op: 'add', id: 'A2', title: 'b' },
        ],
      }),
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'INVALID_BODY' });
    expect(bad.body.error.message).toMatch(/^ops\[1\]\.text: /);
    const conflict = await json(
      `${s.base}/v1/items/batch`,
      send('POST', {
        ops: [
          { op: 'add', id: 'A1', title: 'a', text: 't0w1' },
          { op: 'add', id: 'd0-0', title: 'b', text: 't0w2' },
        ],
      }),
    );
    expect(conflict.status).toBe(409);
    expect(conflict.body.error).toMatchObject({ code: 'CONFLICT', details: { where: 'ops[1]', id: 'd0-0' } });
    const missing = await json(
      `${s.base}/v1/items/batch`,
      send('POST', {
        ops: [
          { op: 'delete', id: 'd0-0' },
          { op: 'delete', id: 'nope' },
        ],
      }),
    );
    expect(missing.status).toBe(404);
    expect(missing.body.error.message).toMatch(/^ops\[1\]: no item "nope"/);
    const twice = await json(
      `${s.base}/v1/items/batch`,
      send('POST', {
        ops: [
          { op: 'delete', id: 'd0-0' },
          { op: 'keywords', id: 'd0-0', keywords: ['x'] },
        ],
      }),
    );
    expect(twice.status).toBe(400);
    expect(twice.body.error.message).toMatch(/^ops\[1\]: id "d0-0" occurs twice in the batch \(also at ops\[0\]\)/);
    expect(await gen()).toBe(g0);
    expect(await found(s.base, 'a')).not.toContain('A1');
    expect((await json(`${s.base}/v1/items/d0-0`)).body.served).not.toBeNull();
    // Without --writable the write routes answer 501; the preview still answers.
    const ro = await startServe(['--db', db, '--token', 'tok']);
    servers.push(ro);
    expect((await json(`${ro.base}/v1/items/X`, send('PUT', { title: 'x', text: 'y' }))).status).toBe(501);
  });

  it('concurrent writes serialize, one generation each; a second writer process is refused by name', async () => {
    const db = run.copy();
    const s = await serveWritable(db);
    const n = 6;
    const res = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        json(`${s.base}/v1/items/C${i}`, send('PUT', { title: `t3w${i} c`, text: `t3w${i} t3w${i} t1w2 c${i}` })),
      ),
    );
    for (const r of res) expect(r.status, JSON.stringify(r.body)).toBe(200);
    const gens = res.map((r) => r.body.generation as number).sort((a, b) => a - b);
    expect(new Set(gens).size).toBe(n);
    for (let i = 1; i < n; i++) expect(res.find((r) => r.body.generation === gens[i])!.body.base).toBe(gens[i - 1]);
    for (let i = 0; i < n; i++) expect(await found(s.base, `t3w${i} c`)).toContain(`C${i}`);
    // The server holds the database: a `cogr items` writer beside it is refused, naming it.
    const file = join(run.dir, 'second.jsonl');
    writeFileSync(file, JSON.stringify({ id: 'X1', title: 'x', text: 't0w1' }) + '\n');
    const second = run.cogr('items', 'add', '--db', db, '--from', file);
    expect(second.status).not.toBe(0);
    expect(second.stderr).toMatch(/error\[DB_LOCKED\]: database .* is in use by another process/);
    // A second writable server too.
    await expect(startServe(['--db', db, '--token', 'tok', '--writable'])).rejects.toThrow(/DB_LOCKED/);
  });

  it('the OpenAPI document lists the catalog routes with their statuses', async () => {
    const s = await startServe(['--db', run.copy(), '--token', 'tok']);
    servers.push(s);
    const doc = (await json(`${s.base}/openapi.json`)).body;
    const codes = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).map(Number);
    expect(codes('/v1/items/{id}', 'put')).toEqual(expect.arrayContaining([200, 400, 401, 404, 408, 409, 413, 414, 415, 501, 502, 507]));
    expect(codes('/v1/items/{id}', 'delete')).toEqual(expect.arrayContaining([200, 401, 404]));
    expect(codes('/v1/items/batch', 'post')).toEqual(expect.arrayContaining([200, 400, 401, 409, 413, 415]));
    expect(codes('/v1/items/{id}/keywords', 'put')).toContain(200);
    expect(codes('/v1/items/{id}/keywords', 'delete')).toContain(200);
    expect(codes('/v1/items/{id}/keywords/preview', 'post')).toEqual(expect.arrayContaining([200, 404]));
    expect(doc.paths['/v1/items/{id}'].put.security).toEqual([{ bearer: [] }]);
  });
});

describe('the published view after writes', () => {
  it('holds exactly the served keywords of the catalog', async () => {
    const db = run.copy();
    const s = await serveWritable(db);
    const put = await json(`${s.base}/v1/items/P1`, send('PUT', NEW));
    await s.stop();
    const v = await new PublishedIndex(db).openView('item', put.body.generation);
    expect(v.keywordsOf(v.ordinalOf('P1')).sort()).toEqual([...put.body.items[0].keywords].sort());
  });
});
