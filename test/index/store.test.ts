import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/db.ts';
import { KeywordIndexStore } from '../../index/store.ts';
import { buildViewData } from '../../index/viewBuild.ts';

let dir: string;
let db: CogrDb;
let store: KeywordIndexStore;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-store-'));
  db = await openDb(join(dir, 'db'));
  store = new KeywordIndexStore(db);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const strip = (d: ReturnType<typeof buildViewData>) => ({ ...d });

describe('KeywordIndexStore', () => {
  it('commits generations, opens views equal to buildViewData, keeps old generations', async () => {
    const w0 = store.writer('item');
    w0.set('i1', 'Red Shoes', ['running shoes', 'Red', 'sneakers']);
    w0.set('i2', 'Blue Hat', ['hat', 'wool hat']);
    w0.set('i3', 'Green Shoes', ['running shoes', 'green']);
    expect(await w0.commit({ label: 'sft' })).toBe(0);

    const w1 = store.writer('item');
    w1.set('i2', 'Blue Hat', ['hat', 'winter hat']);
    w1.remove('i3');
    w1.set('i4', 'Socks', ['socks', 'wool']);
    w1.set('i1', 'Red Shoes', ['sneakers', 'red', 'running shoes']); // same set: not rewritten
    const r1 = await w1.commitWithStats({ label: 'round 1' });
    expect(r1).toEqual({ generation: 1, changed: 3, rejectedKeywords: 0 });

    const gens = await store.listGenerations('item');
    expect(gens.map((g) => [g.generation, g.parent, g.size, g.changed, g.meta.label])).toEqual([
      [0, null, 3, 3, 'sft'],
      [1, 0, 3, 3, 'round 1'],
    ]);
    const e0 = await store.entries('item', 0);
    expect(e0.map((e) => e.id)).toEqual(['i1', 'i2', 'i3']);
    const v0 = await store.openView('item', 0);
    expect(v0.data).toEqual(strip(buildViewData('item', 0, e0)));
    const v1 = await store.openView('item', 'latest');
    expect(v1.generation).toBe(1);
    expect(v1.ids()).toEqual(['i1', 'i2', 'i4']);
    expect(v1.search({ self: 'red shoes', keywords: ['wool'] }, { all: true }).items.map((x) => x.id).sort()).toEqual(['i1', 'i4']);
    expect(await store.postings('item', 1, 'running shoes')).toEqual(['i1']);
    expect(await store.postings('item', 0, 'running shoes')).toEqual(['i1', 'i3']);
    const st = await store.statistics('item', 1, ['hat', 'shoes', 'wool', 'nope']);
    expect(st.numEntities).toBe(3);
    expect(st.totalLength).toBe(v1.data.totalLength);
    // Words are analysed like the generation's keywords ("shoes" counts as "shoe").
    expect(v1.wordOrdinal('shoes')).toBe(-1);
    expect([...st.df]).toEqual([
      ['hat', v1.data.wordDf[v1.wordOrdinal('hat')]],
      ['shoes', v1.data.wordDf[v1.wordOrdinal('shoe')]],
      ['wool', v1.data.wordDf[v1.wordOrdinal('wool')]],
      ['nope', 0],
    ]);

    const d = await store.diff('item', 0, 1);
    expect(d).toMatchObject({ added: ['i4'], removed: ['i3'], changed: ['i2'], keywordsAdded: 3, keywordsDropped: 3 });

    // Delete generation 0: generation 1 reads exactly as before.
    const before = (await store.openView('item', 1)).data;
    await store.deleteGeneration('item', 0);
    expect((await store.listGenerations('item')).map((g) => g.generation)).toEqual([1]);
    expect((await store.openView('item', 1)).data).toEqual(before);
    await expect(store.openView('item', 0)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // Numbers are never reused.
    expect(await store.writer('item').commit()).toBe(2);
    // The query side is independent.
    await expect(store.openView('query', 'latest')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('matches on analysed keys, keeps surface forms, and keeps one analyzer per lineage', async () => {
    const w = store.writer('item');
    w.set('a', 'Statin therapy', ['Statins', 'statin', 'LDL cholesterol']);
    w.set('b', '', ['statin trials']);
    expect(await w.commit()).toBe(0);
    expect((await store.generationInfo('item', 0)).analyzer).toBe('english');
    // One keyword per key: "Statins" and "statin" are the same keyword; the first surface form is stored.
    expect((await store.entries('item', 0))[0].keywords).toEqual(['statins', 'ldl cholesterol']);
    expect(await store.postings('item', 0, 'statin')).toEqual(['a']);
    const v = await store.openView('item', 0);
    expect(Array.from(v.match({ keywords: ['STATINS'] })).map((e) => v.id(e))).toEqual(['a']);
    expect(v.keywordsOf(v.ordinalOf('a'))).toEqual(['ldl cholesterol', 'statins']);
    // A generation built on it keeps its analyzer; naming another is refused.
    expect(() => store.writer('item', { analyzer: 'nope' as never })).toThrow(/analyzer/);
    const w1 = store.writer('item', { analyzer: 'none' });
    w1.set('c', '', ['statins']);
    await expect(w1.commit()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/uses the english analyzer/) });
    const w2 = store.writer('item', { base: null, mode: 'replace', analyzer: 'none' });
    w2.set('c', '', ['statins']);
    const g2 = await w2.commit();
    const vn = await store.openView('item', g2);
    expect(vn.analyzer.name).toBe('none');
    expect(vn.match({ keywords: ['statin'] }).length).toBe(0);
    expect(vn.match({ keywords: ['statins'] }).length).toBe(1);
  });
});
