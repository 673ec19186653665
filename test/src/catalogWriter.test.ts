/**
 * The catalog writer and the loader in process, on a real LevelDB (src/catalog/writer.ts,
 * src/server/storeLoader.ts): older catalog generations are deleted beyond `keep` while
 * every write stays served (their changes folded forward, the deltas kept); a writer opened
 * again finds the catalog where the last one left it (hand-set keywords included); and a
 * catalog write keeps the query planner's items (and the keyword cache's epoch) until a
 * refresh load rebuilds them over the catalog's items.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { Item } from '../../index/core/types.ts';
import { CatalogWriter } from '../../src/catalog/writer.ts';
import { catalogMeta } from '../../src/catalog/state.ts';
import type { LocatedOp } from '../../src/catalog/ops.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader, type KeywordSourceContext } from '../../src/server/storeLoader.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { tempDir } from './_serverFixture.ts';
import { inProcessRun } from './_catalogFixture.ts';

const corpus = synthCorpus();
let tmp: ReturnType<typeof tempDir>;
let template: string;
let n = 0;

beforeAll(async () => {
  tmp = tempDir('cogr-catalog-writer-');
  template = await inProcessRun(join(tmp.dir, 'template'), corpus, 0);
}, 120_000);
afterAll(() => tmp.cleanup());

async function fresh(): Promise<string> {
  const { cpSync } = await import('node:fs');
  const path = join(tmp.dir, `db-${++n}`);
  cpSync(template, path, { recursive: true });
  return path;
}

const put = (id: string, text: string): LocatedOp => ({ op: { op: 'upsert', id, title: text, text }, where: id });

async function withWriter<T>(path: string, keep: number, fn: (w: CatalogWriter, db: CogrDb) => Promise<T>): Promise<T> {
  const db = await openDb(path);
  try {
    return await fn(await CatalogWriter.open(db, { round: 'best', corpus, keep }), db);
  } finally {
    await db.close();
  }
}

describe('catalog writer', () => {
  it('deletes older catalog generations beyond keep; every write stays served', async () => {
    const path = await fresh();
    const root = await withWriter(path, 2, async (w, db) => {
      const root = w.served;
      for (let i = 0; i < 7; i++) await w.apply([put(`N${i}`, `t0w${i} t1w${i} note`)], 'request');
      await w.drain();
      const gens = await new KeywordIndexStore(db).listGenerations('item');
      const ours = gens.filter((g) => catalogMeta(g)?.root === root);
      expect(ours.length).toBeLessThan(4);
      expect(gens.some((g) => g.generation === root)).toBe(true);
      expect(catalogMeta(ours[ours.length - 1])).toMatchObject({ root, deltas: 7 });
      return root;
    });
    const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: path, round: 'best', corpus }));
    await live.reload();
    const s = live.get();
    for (let i = 0; i < 7; i++) expect(s.item.ordinalOf(`N${i}`), `N${i}`).toBeGreaterThanOrEqual(0);
    expect(s.titles.get('N3')).toBe('t0w3 t1w3 note');
    expect(s.catalog).toMatchObject({ root, seq: 6 });
  });

  it('a writer opened again finds the catalog as the last one left it, hand-set keywords included', async () => {
    const path = await fresh();
    await withWriter(path, 4, async (w) => {
      await w.apply([put('H1', 't0w1 t0w2 h')], 'request');
      await w.apply([{ op: { op: 'keywords', id: 'H1', keywords: ['by hand'] }, where: 'H1' }], 'request');
    });
    await withWriter(path, 4, async (w) => {
      const upd = await w.apply([put('H1', 't0w5 changed')], 'request');
      expect(upd.items).toEqual([{ id: 'H1', keywords: ['by hand'], handSet: true }]);
      expect(upd.counts).toMatchObject({ updated: 1 });
      await expect(w.apply([{ op: { op: 'add', id: 'H1', title: 'x', text: 'y' }, where: 'line 1' }], 'file')).rejects.toThrow(
        /^line 1: item "H1" is already in the catalog/,
      );
    });
  });

  it("a catalog write keeps the planner's items and the keyword epoch; a refresh rebuilds them over the catalog's items", async () => {
    const path = await fresh();
    const seen: { items: readonly Item[] | null; itemsKey: string }[] = [];
    const keywordSource = (ctx: KeywordSourceContext) => {
      seen.push({ items: ctx.items, itemsKey: ctx.itemsKey });
      return null;
    };
    const loader = storeSnapshotLoader({ dbPath: path, round: 'best', corpus, keywordSource });
    const first = await loader.load();
    expect(first.catalog).toBeNull();
    await withWriter(path, 4, (w) => w.apply([put('R1', 't0w1 t0w2 r')], 'request'));
    const fast = await loader.load();
    expect(fast.catalog).toMatchObject({ plannerStale: true });
    expect(fast.keywordEpoch).toBe(first.keywordEpoch);
    expect(seen[1].itemsKey).toBe(seen[0].itemsKey);
    expect(seen[1].items!.some((it) => it.id === 'R1')).toBe(false);
    const refreshed = await loader.load({ refresh: true });
    expect(refreshed).not.toBe(fast);
    expect(refreshed.catalog).toMatchObject({ plannerStale: false });
    expect(refreshed.keywordEpoch).not.toBe(first.keywordEpoch);
    expect(seen[2].items!.find((it) => it.id === 'R1')).toEqual({ id: 'R1', title: 't0w1 t0w2 r', text: 't0w1 t0w2 r' });
    // A write of keywords alone changes no text: nothing for the planner to refresh.
    await withWriter(path, 4, (w) => w.apply([{ op: { op: 'keywords', id: 'R1', keywords: ['k'] }, where: 'R1' }], 'request'));
    expect((await loader.load()).catalog).toMatchObject({ plannerStale: false });
  });
});
