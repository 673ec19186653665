/**
 * Faults of catalog writes (issue 48), with real processes: a bad line is named by file and
 * line and commits nothing; a `cogr serve --writable` killed with SIGKILL while a batch is
 * generating its keywords leaves the previous generation served and the batch absent; a
 * `cogr items add` killed with SIGKILL at each point of its batch leaves the batch all
 * there or not there at all, and the next writer cleans up what it left. And the command
 * line's other paths: the preview, and the fold of the catalog into a dataset for the next
 * run (which the stored run refuses: it trains on its own snapshot).
 */
import { spawn } from 'node:child_process';
import { cpSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PublishedIndex } from '../../index/store/published.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { readRunAt } from '../../src/run/state.ts';
import { resolveSelector, selectGenerations, servedHead } from '../../src/catalog/served.ts';
import { chatCompletion } from '../fixtures/chatCompletion.ts';
import { catalogRun, CLI, demoArgs, json, send, startServe, type CatalogRun } from './_catalogFixture.ts';

let run: CatalogRun;
beforeAll(() => {
  run = catalogRun('cogr-catalog-faults-');
}, 300_000);
afterAll(() => run?.cleanup());

/** What readers of a database see: the served generation (the catalog's newest on the run's best) and its ids. */
async function served(db: string): Promise<{ generation: number; ids: Set<string> }> {
  const files = new PublishedIndex(db);
  const items = await files.listGenerations('item');
  const sel = selectGenerations(items, await files.listGenerations('query'), resolveSelector(await readRunAt(db), 'best').selector);
  const { head } = servedHead(items, sel.item);
  const v = await files.openView('item', head.generation);
  return { generation: head.generation, ids: new Set(v.ids()) };
}

const deltaFiles = (db: string) => readdirSync(join(db, 'published')).filter((f) => f.startsWith('catalog-'));

function lines(name: string, rows: unknown[]): string {
  const file = join(run.dir, name);
  writeFileSync(file, rows.map((r) => (typeof r === 'string' ? r : JSON.stringify(r))).join('\n') + '\n');
  return file;
}

describe('a bad batch commits nothing', () => {
  it('a bad line, an id twice, an item added that is there: named by file and line', async () => {
    const db = run.copy();
    const before = await served(db);
    const bad = lines('bad.jsonl', [
      { id: 'B1', title: 'b', text: 't0w1' },
      { id: 'B2', title: 'b' },
    ]);
    const r1 = run.cogr('items', 'add', '--db', db, '--from', bad);
    expect(r1.status).not.toBe(0);
    expect(r1.stderr).toContain(`error[DATA_FORMAT]: ${bad}:2: text: required, a string`);
    const notJson = lines('notjson.jsonl', [{ id: 'B1', title: 'b', text: 't0w1' }, '{"id": "B2", ']);
    expect(run.cogr('items', 'add', '--db', db, '--from', notJson).stderr).toContain(`error[DATA_FORMAT]: ${notJson}:2: not valid JSON`);
    const twice = lines('twice.jsonl', [
      { id: 'B1', title: 'b', text: 't0w1' },
      { id: 'B1', title: 'c', text: 't0w2' },
    ]);
    expect(run.cogr('items', 'add', '--db', db, '--from', twice).stderr).toContain(`error[DUPLICATE_ID]: ${twice}:2: id "B1" occurs twice`);
    const there = lines('there.jsonl', [
      { id: 'B1', title: 'b', text: 't0w1' },
      { id: 'd1-1', title: 'c', text: 't0w2' },
    ]);
    const r4 = run.cogr('items', 'add', '--db', db, '--from', there);
    expect(r4.stderr).toContain(`error[CONFLICT]: ${there}:2: item "d1-1" is already in the catalog`);
    const gone = lines('gone.jsonl', [{ id: 'd1-1' }, { id: 'nope' }]);
    expect(run.cogr('items', 'delete', '--db', db, '--from', gone).stderr).toContain(`error[NOT_FOUND]: ${gone}:2: no item "nope"`);
    const after = await served(db);
    expect(after).toEqual(before);
    expect(deltaFiles(db)).toEqual([]);
  });
});

describe('kill -9', () => {
  let llm: Server;
  const held: Socket[] = [];
  let seen: () => void = () => {};
  let llmUrl = '';
  beforeAll(async () => {
    // An LLM endpoint that takes a request and never answers: the batch stays in its keyword generation.
    llm = createServer((req) => {
      held.push(req.socket);
      seen();
    });
    await new Promise<void>((r) => llm.listen(0, '127.0.0.1', r));
    llmUrl = `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    for (const s of held) s.destroy();
    await new Promise((r) => llm.close(r));
  });

  it('a writable server killed while a batch generates its keywords: the previous generation served, the batch absent', async () => {
    const db = run.copy();
    const before = await served(db);
    const s = await startServe([
      '--db',
      db,
      '--token',
      'tok',
      '--writable',
      '--item-generator',
      'openai',
      '--base-url',
      llmUrl,
      '--model',
      'fake',
    ]);
    const asked = new Promise<void>((r) => (seen = r));
    const write = json(`${s.base}/v1/items/batch`, send('POST', { ops: [{ op: 'add', id: 'K1', title: 'k', text: 't0w1 t0w2' }] })).catch(
      (e: unknown) => e,
    );
    await asked;
    s.child.kill('SIGKILL');
    await new Promise((r) => s.child.once('exit', r));
    expect(await write).toBeInstanceOf(Error);
    const after = await served(db);
    expect(after).toEqual(before);
    expect(after.ids.has('K1')).toBe(false);
    // A reader serves the previous generation; the next writer opens the database cleanly and writes.
    const reader = await startServe(['--db', db]);
    try {
      expect((await json(`${reader.base}/health`)).body.generation).toBe(before.generation);
    } finally {
      await reader.stop();
    }
    const ok = run.cogr(
      'items',
      'add',
      '--db',
      db,
      '--item-generator',
      'embedded',
      '--from',
      lines('k2.jsonl', [{ id: 'K2', title: 'k2', text: 't0w1' }]),
    );
    expect(ok.status, ok.stderr).toBe(0);
    expect((await served(db)).ids.has('K2')).toBe(true);
  });

  it('cogr items add killed at each point of its batch: the batch all there or not at all, its leftovers cleaned', async () => {
    const rows = Array.from({ length: 400 }, (_, i) => ({
      id: `M${i}`,
      title: `t${i % 5}w${i % 10} m${i}`,
      text: `t${i % 5}w${i % 10} t${i % 5}w${(i + 3) % 10} m`,
    }));
    const file = lines('many.jsonl', rows);
    for (const point of [
      'catalog writer ready',
      'catalog delta written',
      'committed keyword index generation',
      'catalog write committed',
    ]) {
      const db = run.copy();
      const before = await served(db);
      const child = spawn(process.execPath, [CLI, 'items', 'add', '--db', db, '--from', file], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      await new Promise<void>((resolve) => {
        child.stderr!.on('data', (d: Buffer) => {
          err += d.toString();
          if (err.includes(point)) {
            child.kill('SIGKILL');
            resolve();
          }
        });
        void exit.then(() => resolve());
      });
      await exit;
      expect(err, point).toContain(point);
      const seen = await served(db);
      const present = rows.filter((r) => seen.ids.has(r.id)).length;
      // Readers see the batch whole or not at all.
      expect([0, rows.length], `${point}: ${present} of ${rows.length} items served`).toContain(present);
      if (present === 0) expect(seen.generation, point).toBe(before.generation);
      // The next writer puts right what the killed one left: a delta no generation applies is deleted,
      // a committed generation without its files is published.
      const next = run.cogr('items', 'add', '--db', db, '--from', lines('one.jsonl', [{ id: 'Z1', title: 'z', text: 't0w1' }]));
      expect(next.status, next.stderr).toBe(0);
      const final = await served(db);
      const now = rows.filter((r) => final.ids.has(r.id)).length;
      expect([0, rows.length], point).toContain(now);
      expect(final.ids.has('Z1')).toBe(true);
      expect(deltaFiles(db).length, point).toBe(now === 0 ? 1 : 2);
    }
  }, 240_000);
});

describe('the command line', () => {
  it('cogr items preview, and a fold of the catalog into a dataset that the stored run refuses and a new run takes', async () => {
    const db = run.copy();
    const add = run.cogr(
      'items',
      'add',
      '--db',
      db,
      '--json',
      '--from',
      lines('add.jsonl', [{ id: 'F1', title: 't0w1 fresh', text: 't0w1 t0w1 t0w2 fresh', fields: { brand: 'x' } }]),
    );
    expect(add.status, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({ counts: { added: 1 } });
    expect(run.cogr('items', 'delete', '--db', db, '--from', lines('del.jsonl', [{ id: 'd0-0' }])).status).toBe(0);
    const hand = run.cogr('items', 'keywords', '--db', db, '--from', lines('kw.jsonl', [{ id: 'd0-1', keywords: ['picked'] }]));
    expect(hand.status, hand.stderr).toBe(0);
    const pv = run.cogr('items', 'preview', '--db', db, '--id', 'd0-2', '--keywords', 't0w2; t0w8 effect', '--json');
    expect(pv.status, pv.stderr).toBe(0);
    const p = JSON.parse(pv.stdout);
    expect(p).toMatchObject({ id: 'd0-2', keywords: ['t0w2', 't0w8 effect'] });
    expect(typeof p.reward).toBe('number');
    expect(run.cogr('items', 'preview', '--db', db, '--id', 'd0-2', '--keywords', 't0w2').stdout).toMatch(/counterfactual item reward/);

    const to = join(run.dir, 'folded');
    const fold = run.cogr('items', 'fold', '--db', db, '--to', to, '--json');
    expect(fold.status, fold.stderr).toBe(0);
    expect(JSON.parse(fold.stdout)).toMatchObject({ items: 60, added: 1, deleted: 1, handSet: 1 });
    const folded = await loadDataset(to);
    const original = await loadDataset(run.dataset);
    expect(folded.corpus.items.length).toBe(original.corpus.items.length);
    expect(folded.corpus.items.find((i) => i.id === 'F1')).toEqual({
      id: 'F1',
      title: 't0w1 fresh',
      text: 't0w1 t0w1 t0w2 fresh',
      fields: { brand: 'x' },
    });
    expect(folded.corpus.items.some((i) => i.id === 'd0-0')).toBe(false);
    expect(folded.corpus.queries).toEqual(original.corpus.queries);
    expect(run.cogr('items', 'fold', '--db', db, '--to', to).stderr).toMatch(/error\[INVALID_ARGUMENT\]: --to: .* exists/);
    // A new run takes the folded dataset.
    const fresh = run.cogr(...demoArgs(to, join(run.dir, 'next-db')));
    expect(fresh.status, fresh.stderr).toBe(0);
    // The stored run trains on its own snapshot: with its dataset's items replaced by the folded
    // ones (a copy of the dataset, the run made on it), resuming it is refused by the data guard.
    const ds = join(run.dir, 'ds-copy');
    cpSync(run.dataset, ds, { recursive: true });
    const own = join(run.dir, 'own-db');
    expect(run.cogr('demo', '--dataset', ds, '--db', own, '--rounds', '0', '--sft-epochs', '1', '--workers', '1', '--quiet').status).toBe(
      0,
    );
    cpSync(join(to, 'items.jsonl'), join(ds, 'items.jsonl'));
    const resume = run.cogr(...demoArgs(ds, own));
    expect(resume.status).not.toBe(0);
    expect(resume.stderr).toMatch(
      /error\[INVALID_ARGUMENT\]: the database .* holds a run made on other data than dataset .* items .*changed since the run began/,
    );
  }, 120_000);

  it('an LLM item generator (--item-generator openai): the endpoint asked at temperature 0, its keywords committed', async () => {
    const asked: { temperature?: number; messages?: unknown[] }[] = [];
    const llm = createServer((req, res) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => {
        asked.push(JSON.parse(data || '{}'));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(chatCompletion('{"keywords": ["llm alpha", "LLM Beta"]}', 'fake')));
      });
    });
    await new Promise<void>((r) => llm.listen(0, '127.0.0.1', r));
    try {
      const db = run.copy();
      const r = await run.cogrAsync(
        'items',
        'add',
        '--db',
        db,
        '--json',
        '--item-generator',
        'openai',
        '--base-url',
        `http://127.0.0.1:${(llm.address() as AddressInfo).port}/v1`,
        '--model',
        'fake',
        '--from',
        lines('llm.jsonl', [{ id: 'L1', title: 't0w1 l', text: 't0w1 t0w2 l' }]),
      );
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ items: [{ id: 'L1', keywords: ['llm alpha', 'llm beta'] }], generator: 'openai:fake' });
      expect(asked.length).toBeGreaterThan(0);
      expect(asked[0].temperature).toBe(0);
      expect(JSON.stringify(asked[0].messages)).toContain('t0w1 t0w2 l');
      expect((await served(db)).ids.has('L1')).toBe(true);
    } finally {
      await new Promise((r) => llm.close(r));
    }
  });
});
