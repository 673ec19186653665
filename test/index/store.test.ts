import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { KWI_SUBLEVEL } from '../../index/store/layout.ts';
import { silentLogger } from '../../index/core/log.ts';
import { memoryLogger } from '../fixtures/memory.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { bigEntries } from '../fixtures/bigEntries.ts';
import { buildViewData } from '../../index/view/viewBuild.ts';

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
    expect(
      v1
        .search({ self: 'red shoes', keywords: ['wool'] }, { all: true })
        .items.map((x) => x.id)
        .sort(),
    ).toEqual(['i1', 'i4']);
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
    await expect(w1.commit()).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/uses the english analyzer/),
    });
    const w2 = store.writer('item', { base: null, mode: 'replace', analyzer: 'none' });
    w2.set('c', '', ['statins']);
    const g2 = await w2.commit();
    const vn = await store.openView('item', g2);
    expect(vn.analyzer.name).toBe('none');
    expect(vn.match({ keywords: ['statin'] }).length).toBe(0);
    expect(vn.match({ keywords: ['statins'] }).length).toBe(1);
  });
});

describe('staged commits (more operations than maxBatchOps)', () => {
  /** Every raw key of the keyword index sublevel. */
  async function rawKeys(d: CogrDb): Promise<string[]> {
    const out: string[] = [];
    for await (const k of d.sublevel<unknown>(KWI_SUBLEVEL).keys()) out.push(k);
    return out;
  }
  const gensOfCells = (keys: string[]) => new Set(keys.filter((k) => 'rpw'.includes(k[0])).map((k) => parseInt(k.slice(-8), 16)));

  it('write the same generations as one-batch commits, in many batches, with progress lines', async () => {
    const log = memoryLogger();
    const db2 = await openDb(join(dir, 'db2'), { logger: silentLogger });
    try {
      const staged = new KeywordIndexStore(db2, { maxBatchOps: 9, logger: log });
      const entries = bigEntries(300, 5);
      for (const s of [store, staged]) {
        const w = s.writer('item');
        for (const e of entries) w.set(e.id, e.self, e.keywords);
        expect(await w.commit({ label: 'a' })).toBe(0);
        const w1 = s.writer('item');
        for (const e of entries.slice(0, 120)) w1.set(e.id, e.self, e.keywords.slice(1));
        for (const e of entries.slice(200)) w1.remove(e.id);
        expect(await w1.commit({ label: 'b' })).toBe(1);
        const w2 = s.writer('item', { base: 0, mode: 'replace' });
        for (const e of entries.slice(50, 80)) w2.set(e.id, e.self, e.keywords);
        expect(await w2.commit({ label: 'c' })).toBe(2);
      }
      for (const g of [0, 1, 2]) {
        expect((await staged.openView('item', g)).data).toEqual((await store.openView('item', g)).data);
        expect(await staged.entries('item', g)).toEqual(await store.entries('item', g));
        expect(await new PublishedIndex(db2.path).entries('item', g)).toEqual(await store.entries('item', g));
      }
      // The cells themselves are the same (one-batch and staged layouts do not differ).
      expect(await rawKeys(db2)).toEqual(await rawKeys(db));
      const progress = log.lines.filter((l) => l.startsWith('info: staged commit'));
      expect(progress.length).toBeGreaterThan(50);
      expect(progress[0]).toMatch(/side=item generation=0 entities=\d+\/\d+ operations=\d+ rate=\d+\/s/);
      expect(log.lines.filter((l) => /committed keyword index generation.*staged=true/.test(l))).toHaveLength(3);
    } finally {
      await db2.close();
    }
  });

  it('leave nothing behind when they fail, and a writer deletes what a killed one left', async () => {
    const log = memoryLogger();
    const entries = bigEntries(200, 9);
    const staged = new KeywordIndexStore(db, { maxBatchOps: 10, logger: log });
    const w0 = staged.writer('item');
    for (const e of entries) w0.set(e.id, e.self, e.keywords);
    expect(await w0.commit()).toBe(0);
    const before = await rawKeys(db);
    // A failure after batches were written (the base's df cell is made wrong on purpose,
    // so the commit fails when it computes the df cells, after its postings are out).
    const sub = db.sublevel<unknown>(KWI_SUBLEVEL);
    const dfKey = before.find((k) => k.startsWith('w\0item\0'))!;
    const dfValue = await sub.get(dfKey);
    await sub.put(dfKey, 0);
    const w1 = staged.writer('item', { mode: 'replace' });
    for (const e of entries.slice(0, 100)) w1.set(e.id, e.self, []);
    await expect(w1.commit()).rejects.toMatchObject({ code: 'DB_CORRUPT' });
    await sub.put(dfKey, dfValue);
    expect(log.lines.some((l) => l.includes('deleted the cells of an unfinished staged commit') && l.includes('generation=1'))).toBe(true);
    expect(await rawKeys(db)).toEqual(before.concat().sort());
    expect(await staged.latest('item')).toBe(0);

    // A process killed mid-commit leaves its reserved number, its marker and some cells.
    const orphan = (g: number) => g.toString(16).padStart(8, '0');
    await sub.batch([
      { type: 'put', key: 'n\0item', value: 3 },
      { type: 'put', key: 's\0item', value: 2 },
      { type: 'put', key: `r\0item\0ghost\0${orphan(2)}`, value: { s: 'ghost', k: ['boo'], l: 2 } },
      { type: 'put', key: `p\0item\0boo\0ghost\0${orphan(2)}`, value: 1 },
      { type: 'put', key: `w\0item\0boo\0${orphan(2)}`, value: 1 },
    ]);
    // Nothing reads them: generation 0 is unchanged, no generation 2 exists.
    expect(await staged.latest('item')).toBe(0);
    expect(await staged.postings('item', 0, 'boo')).toEqual([]);
    const log2 = memoryLogger();
    const next = new KeywordIndexStore(db, { logger: log2 });
    const w2 = next.writer('item');
    w2.set('x', 'x', ['y']);
    expect(await w2.commit()).toBe(3);
    expect(
      log2.lines.some(
        (l) => l.includes('deleted the cells of an unfinished staged commit') && l.includes('generation=2') && l.includes('cells=3'),
      ),
    ).toBe(true);
    const after = await rawKeys(db);
    expect(gensOfCells(after)).toEqual(new Set([0, 3]));
    expect(after.some((k) => k.startsWith('s\0'))).toBe(false);
    expect((await next.openView('item', 0)).data).toEqual(buildViewData('item', 0, await next.entries('item', 0)));
    expect(await next.entries('item', 0)).toHaveLength(entries.length);
  });
});
