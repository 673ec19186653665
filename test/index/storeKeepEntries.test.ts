/**
 * A store that keeps the entries it published last (`keepEntries`, the catalog writer's)
 * derives a patch's entries from them instead of reading the generation back: over random
 * patches (entities set, replaced with keywords that normalise or analyse alike, removed,
 * set again unchanged) its published files hold exactly what the database holds, and what a
 * store without it publishes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../../index/store/db.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { createRng } from '../../index/core/random.ts';

const dir = mkdtempSync(join(tmpdir(), 'cogr-keep-entries-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const WORDS = ['red', 'Red', 'shoes', 'shoe', 'running', 'wool', 'hat', 'hats', 'rain', 'jacket'];

describe('keepEntries', () => {
  it("publishes a patch's entries from the last ones: the same files as the database's entries", async () => {
    const rng = createRng(5);
    const kw = () =>
      Array.from(
        { length: 1 + Math.floor(rng() * 4) },
        () => `${WORDS[Math.floor(rng() * WORDS.length)]} ${WORDS[Math.floor(rng() * WORDS.length)]}`,
      );
    for (const analyzer of ['english', 'none'] as const) {
      const path = join(dir, `db-${analyzer}`);
      const db = await openDb(path);
      try {
        const keeping = new KeywordIndexStore(db, { keepEntries: true });
        const w0 = keeping.writer('item', { base: null, analyzer });
        for (let i = 0; i < 40; i++) w0.set(`e${i}`, `Item ${i}`, kw());
        let g = await w0.commit();
        for (let round = 0; round < 12; round++) {
          const w = keeping.writer('item', { mode: 'patch' });
          for (let c = 0; c < 1 + Math.floor(rng() * 6); c++) {
            const id = `e${Math.floor(rng() * 50)}`;
            const r = rng();
            if (r < 0.3) w.remove(id);
            else w.set(id, `Item ${id}`, kw());
          }
          g = await w.commit();
          const fromDb = await keeping.entries('item', g);
          const published = await new PublishedIndex(path).entries('item', g);
          expect(published, `${analyzer} generation ${g}`).toEqual(fromDb);
          const view = await new PublishedIndex(path).openView('item', g);
          expect(view.size).toBe(fromDb.length);
        }
      } finally {
        await db.close();
      }
    }
  });
});
