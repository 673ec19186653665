/**
 * The catalog log: every catalog write (items added, updated or deleted, keywords set or
 * cleared by hand) is one delta, numbered by a sequence number that is never reused, kept
 * in the project database (the `catalog` sublevel) and published beside the generation
 * files as a sealed file readers use without the database:
 *
 *   d \0 <seq, 8 hex digits>   CatalogDelta (the database's copy)
 *   n                          the next sequence number
 *   <db>/published/catalog-<seq, 8 digits>.json   the delta, sealed
 *
 * A delta is written before the item generation that applies it is committed (that
 * generation's meta names the delta's `seq`, and how many deltas its root's catalog holds);
 * a delta whose generation was never committed (a writer killed between the two) has a
 * sequence number above every committed one, and the next writer deletes it before it
 * writes (`CatalogLog.dropAbove`). Readers only read the deltas a served generation names.
 */
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import type { CogrDb, JsonSublevel } from '../../index/store/db.ts';
import { cogrError, schemaError } from '../../index/core/errors.ts';
import { publishedDir, PUBLISHED_FORMAT_VERSION } from '../../index/store/published.ts';
import { readSealedJson, writeSealedJson } from '../../index/store/sealed.ts';

export const CATALOG_SUBLEVEL = 'catalog';
const DELTA_FORMAT = 'cogr-catalog-delta';
const FILE = /^catalog-(\d{8})\.json$/;

/** An item's document as the catalog holds it. */
export interface CatalogDoc {
  id: string;
  title: string;
  text: string;
  fields?: Record<string, string>;
}

/** One catalog write. */
export interface CatalogDelta {
  format: typeof DELTA_FORMAT;
  version: number;
  seq: number;
  /** The item generation of the run this catalog builds on (a root's deltas fold in seq order). */
  root: number;
  /** The generation the write was built on (the root, or the catalog's previous generation). */
  base: number;
  at: string;
  /** Items added or updated, with their documents. */
  put: CatalogDoc[];
  /** Items deleted. */
  delete: string[];
  /** Keywords set by hand (kept across later generator runs), or cleared (null: the item generator's again). */
  handSet: { id: string; keywords: string[] | null }[];
}

const DeltaSchema = z.object({
  format: z.literal(DELTA_FORMAT),
  version: z.number(),
  seq: z.number().int().nonnegative(),
  root: z.number().int().nonnegative(),
  base: z.number().int().nonnegative(),
  at: z.string(),
  put: z.array(
    z.object({ id: z.string(), title: z.string(), text: z.string(), fields: z.record(z.string(), z.string()).optional() }).strict(),
  ),
  delete: z.array(z.string()),
  handSet: z.array(z.object({ id: z.string(), keywords: z.array(z.string()).nullable() }).strict()),
});

/** The published file of a delta. */
export function deltaFile(dbPath: string, seq: number): string {
  return join(publishedDir(dbPath), `catalog-${String(seq).padStart(8, '0')}.json`);
}

function checkDelta(raw: unknown, file: string): CatalogDelta {
  const r = DeltaSchema.safeParse(raw);
  if (!r.success) throw schemaError('DB_CORRUPT', r.error, { what: `the catalog delta ${file}`, details: { file } });
  if (r.data.version !== PUBLISHED_FORMAT_VERSION)
    throw cogrError(
      'DB_VERSION',
      `the catalog delta ${file} has format version ${r.data.version}, this cogr reads version ${PUBLISHED_FORMAT_VERSION}`,
      { file },
    );
  return r.data as CatalogDelta;
}

/** A published delta, checked (its seal, its format, its number); NOT_FOUND when the file is missing. */
export async function readDeltaFile(dbPath: string, seq: number): Promise<CatalogDelta> {
  const file = deltaFile(dbPath, seq);
  const raw = await readSealedJson(file, `catalog delta ${seq}`);
  if (raw === undefined)
    throw cogrError(
      'NOT_FOUND',
      `catalog delta ${seq}: file ${file} is missing (the next catalog writer, \`cogr items\` or \`cogr serve --writable\`, writes it again from the database)`,
      { file },
    );
  const d = checkDelta(raw, file);
  if (d.seq !== seq) throw cogrError('DB_CORRUPT', `the catalog delta ${file} holds delta ${d.seq}`, { file });
  return d;
}

/** The sequence numbers of the published delta files, ascending. */
export async function publishedDeltaNumbers(dbPath: string): Promise<number[]> {
  const names = await readdir(publishedDir(dbPath)).catch(() => [] as string[]);
  const out: number[] = [];
  for (const n of names) {
    const m = FILE.exec(n);
    if (m) out.push(Number(m[1]));
  }
  return out.sort((a, b) => a - b);
}

const key = (seq: number) => `d\u0000${seq.toString(16).padStart(8, '0')}`;

/** The writer's side of the log (the database's copy and the published files). */
export class CatalogLog {
  private readonly sub: JsonSublevel<unknown>;
  constructor(private readonly db: CogrDb) {
    this.sub = db.sublevel(CATALOG_SUBLEVEL);
  }

  /** The next sequence number (not reserved until `write`). */
  async next(): Promise<number> {
    return ((await this.sub.get('n')) as number | undefined) ?? 0;
  }

  /** Write a delta: the database's copy and the counter in one batch, then its file. */
  async write(delta: Omit<CatalogDelta, 'format' | 'version'>): Promise<CatalogDelta> {
    const full: CatalogDelta = { format: DELTA_FORMAT, version: PUBLISHED_FORMAT_VERSION, ...delta };
    await this.sub.batch([
      { type: 'put', key: key(full.seq), value: full },
      { type: 'put', key: 'n', value: full.seq + 1 },
    ]);
    await writeSealedJson(deltaFile(this.db.path, full.seq), full);
    return full;
  }

  /** The database's copy of a delta. */
  async read(seq: number): Promise<CatalogDelta | undefined> {
    const v = await this.sub.get(key(seq));
    return v === undefined ? undefined : checkDelta(v, `${this.db.path} (catalog sublevel)`);
  }

  /** Every stored delta's number, ascending. */
  async numbers(): Promise<number[]> {
    const out: number[] = [];
    for await (const k of this.sub.keys({ gte: 'd\u0000', lt: 'd\u0001' })) out.push(parseInt(k.slice(2), 16));
    return out;
  }

  /**
   * Before a writer's first write: delete the deltas above `committed` (written by a writer
   * killed before their generation was committed; never named by one), then their files,
   * and publish every other delta whose file is missing.
   */
  async reconcile(committed: number): Promise<{ dropped: number[]; republished: number[] }> {
    const dropped: number[] = [];
    const republished: number[] = [];
    const files = new Set(await publishedDeltaNumbers(this.db.path));
    for (const seq of await this.numbers()) {
      if (seq > committed) {
        dropped.push(seq);
        continue;
      }
      if (!files.has(seq)) {
        await writeSealedJson(deltaFile(this.db.path, seq), (await this.read(seq))!);
        republished.push(seq);
      }
    }
    if (dropped.length) await this.sub.batch(dropped.map((s) => ({ type: 'del' as const, key: key(s) })));
    for (const seq of files) if (seq > committed) await rm(deltaFile(this.db.path, seq), { force: true });
    return { dropped, republished };
  }
}
