/**
 * Shared fixture for the HTTP server tests: a small synthetic catalogue committed as
 * item (and query) generations into a real LevelDB in a temp dir, a deterministic
 * query keyword source, and helpers to start a server on loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { withDb } from '../../index/store/db.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import type { IndexEntry, Item } from '../../index/core/types.ts';
import { createRng } from '../../index/core/random.ts';
import type { QueryKeywordSource } from '../../src/server/state.ts';

const COLOURS = ['red', 'blue', 'green', 'black', 'white'];
const KINDS = ['running shoes', 'wool hat', 'rain jacket', 'leather boots', 'cotton socks', 'summer dress'];
const BRANDS = ['Acme', 'Borealis', 'Cobalt', 'Acme Pro'];

export interface Catalogue {
  items: Item[];
  /** Item keywords per generation. */
  generations: IndexEntry[][];
}

/** `n` items; generation g gives each item a different (seeded) keyword set. */
export function catalogue(n = 40, gens = 2, seed = 7): Catalogue {
  const rng = createRng(seed);
  const items: Item[] = [];
  for (let i = 0; i < n; i++) {
    const colour = COLOURS[i % COLOURS.length];
    const kind = KINDS[Math.floor(rng() * KINDS.length)];
    items.push({
      id: `p${String(i).padStart(3, '0')}`,
      title: `${colour} ${kind} ${i}`,
      text: `a ${colour} ${kind}`,
      fields: { brand: BRANDS[i % BRANDS.length], category: kind.split(' ')[1], colour },
    });
  }
  const generations: IndexEntry[][] = [];
  for (let g = 0; g < gens; g++) {
    generations.push(
      items.map((it) => {
        const [colour, ...rest] = it.text.slice(2).split(' ');
        const kind = rest.join(' ');
        const kws = [kind, `${colour} ${kind}`, rest[1]];
        if (rng() < 0.5) kws.push(colour);
        if (g > 0) kws.push(`gen${g} special`, rng() < 0.3 ? 'sale' : 'new season');
        return { id: it.id, self: it.title, keywords: kws };
      }),
    );
  }
  return { items, generations };
}

export async function commitGeneration(
  dbPath: string,
  side: 'item' | 'query',
  entries: readonly IndexEntry[],
  round: number,
): Promise<number> {
  return withDb(dbPath, async (db) => {
    const store = new KeywordIndexStore(db);
    const w = store.writer(side, { mode: 'replace' });
    for (const e of entries) w.set(e.id, e.self, e.keywords);
    return w.commit({ round, label: `round ${round}` });
  });
}

export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Keywords = the query's words that are known kinds / colours, plus "sale" when asked. */
export function fakeSource(opts: { delayMs?: number; fail?: boolean; name?: string } = {}): QueryKeywordSource & { calls: number } {
  const src = {
    name: opts.name ?? 'test',
    calls: 0,
    async keywords(text: string, signal: AbortSignal): Promise<string[]> {
      src.calls++;
      if (opts.delayMs) {
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, opts.delayMs);
          signal.addEventListener('abort', () => {
            clearTimeout(t);
            reject(new Error('aborted'));
          });
        });
      }
      if (opts.fail) throw new Error('generator exploded');
      const t = text.toLowerCase();
      const out: string[] = [];
      for (const k of KINDS) if (t.includes(k.split(' ')[1])) out.push(k);
      for (const c of COLOURS) if (t.includes(c)) out.push(c);
      if (t.includes('sale')) out.push('sale');
      return out;
    },
  };
  return src;
}

export async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return `http://127.0.0.1:${addr.port}`;
}
