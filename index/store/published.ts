/**
 * Generation files: what the writer publishes for readers, so that readers never open
 * the LevelDB (and never take its lock).
 *
 * Committing a generation (store.ts) also writes, in `<db>/published/`:
 *
 *   <side>-<g, 8 digits>.view   the frozen read view (every typed array of ViewData) and
 *                               the generation's entries (ids, self keywords, keywords in
 *                               their stored surface forms), in one binary file
 *   <side>-<g, 8 digits>.json   its manifest, a sealed JSON document (sealed.ts): format
 *                               and version, the generation's info (as `index list`
 *                               shows it), and the name, size and SHA-256 of every file
 *
 * The data file is written first and the manifest last (each through a rename), so a
 * generation is visible to readers only when it is complete; deleting a generation
 * removes its manifest first. Files are never changed once written. A reader checks the
 * manifest's seal and the SHA-256 of every file it reads and refuses a mismatch with
 * CogrError('DB_CORRUPT') naming the generation and the file.
 *
 * View file layout (little-endian): "COGRVIEW", u32 format version, u32 length of a JSON
 * header (the scalars of ViewData and a table of sections: name, element type, byte
 * offset, length), the header, then each section 8-byte aligned.
 */
import { constants } from 'node:fs';
import { createHash } from 'node:crypto';
import { access, mkdir, open, readdir, rm } from 'node:fs/promises';
import { endianness } from 'node:os';
import { join, resolve } from 'node:path';
import { cogrError, isCogrError } from '../core/errors.ts';
import { encodeStrings, StringTable } from '../view/buffers.ts';
import type { AnalyzerName } from '../text/analyzer.ts';
import { SIDES, type IndexEntry, type Side } from '../core/types.ts';
import { KeywordView } from '../view/view.ts';
import type { ViewData } from '../view/viewBuild.ts';
import { corrupt, IO_CHUNK, isTemporaryName, readSealedJson, sha256Hex, writeFileAtomic, writeSealedJson } from './sealed.ts';
import { failpoint } from '../core/failpoint.ts';

/** The folder (inside the database folder) holding the published files. */
export const PUBLISHED_DIR = 'published';
/**
 * Version of the generation files' layout.
 *   1  the first layout (this one).
 */
export const PUBLISHED_FORMAT_VERSION = 1;
const MANIFEST_FORMAT = 'cogr-generation';
const VIEW_MAGIC = 'COGRVIEW';

export function publishedDir(dbPath: string): string {
  return join(resolve(dbPath), PUBLISHED_DIR);
}

/** What `index list` shows of a generation (the store's GenerationInfo). */
export interface GenerationInfo {
  side: Side;
  generation: number;
  /** The generation this one was built from (null for a build from empty). May since have been deleted. */
  parent: number | null;
  createdAt: string;
  /** Number of entities. */
  size: number;
  /** Σ document lengths in words (BM25 integer statistic). */
  totalLength: number;
  /** Number of entities written (set, replaced or removed) by this generation's commit. */
  changed: number;
  /** Caller's metadata (label, round, generator, ...), fixed at commit. */
  meta: Record<string, unknown>;
  /** How this generation's match keys are made. */
  analyzer: AnalyzerName;
}

export interface PublishedFile {
  name: string;
  bytes: number;
  sha256: string;
}

export interface GenerationManifest extends GenerationInfo {
  format: typeof MANIFEST_FORMAT;
  version: number;
  /** The database format version the generation was published from. */
  dbFormat: number;
  /** Vocabulary size: distinct match keys, self keywords included (the view's numKeywords). */
  vocabulary: number;
  files: PublishedFile[];
}

export function fileStem(side: Side, generation: number): string {
  return `${side}-${String(generation).padStart(8, '0')}`;
}
const MANIFEST_NAME = /^(item|query)-(\d{8})\.json$/;

function what(side: Side, generation: number): string {
  return `${side} generation ${generation}`;
}

// ---- encoding ----------------------------------------------------------------------

type SectionType = 'i32' | 'u8';
const VIEW_SECTIONS: readonly (readonly [keyof ViewData, SectionType])[] = [
  ['surfBlob', 'u8'],
  ['surfOff', 'i32'],
  ['idsBlob', 'u8'],
  ['idsOff', 'i32'],
  ['kwBlob', 'u8'],
  ['kwOff', 'i32'],
  ['wordBlob', 'u8'],
  ['wordOff', 'i32'],
  ['postOff', 'i32'],
  ['post', 'i32'],
  ['fwdOff', 'i32'],
  ['fwd', 'i32'],
  ['self', 'i32'],
  ['bagOff', 'i32'],
  ['bagWord', 'i32'],
  ['bagTf', 'i32'],
  ['docLen', 'i32'],
  ['wordDf', 'i32'],
];
const SCALARS = ['side', 'analyzer', 'generation', 'numEntities', 'numKeywords', 'numWords', 'totalLength'] as const;

interface SectionEntry {
  name: string;
  type: SectionType;
  offset: number;
  length: number;
}
interface ViewHeader {
  scalars: Pick<ViewData, (typeof SCALARS)[number]>;
  sections: SectionEntry[];
}

function checkEndianness(): void {
  if (endianness() !== 'LE') throw cogrError('INTERNAL', 'generation files are little-endian; this machine is big-endian');
}

/** n rounded up to a multiple of 8 (arithmetic, not bitwise: files pass 2^31 bytes). */
export function pad8(n: number): number {
  return Math.ceil(n / 8) * 8;
}

/** The bytes of a view file: the view's arrays and the entries (in view ordinal order). */
export function encodeViewFile(data: ViewData, entries: readonly IndexEntry[]): Uint8Array[] {
  checkEndianness();
  if (entries.length !== data.numEntities) throw cogrError('INTERNAL', `view of ${data.numEntities} entities, ${entries.length} entries`);
  const selfs = encodeStrings(
    entries.map((e) => e.self),
    false,
  );
  const kwOff = new Int32Array(entries.length + 1);
  const kws: string[] = [];
  for (let e = 0; e < entries.length; e++) {
    kwOff[e] = kws.length;
    for (const k of entries[e].keywords) kws.push(k);
  }
  kwOff[entries.length] = kws.length;
  const kwTable = encodeStrings(kws, false);
  const arrays: [string, SectionType, Int32Array | Uint8Array][] = VIEW_SECTIONS.map(([name, type]) => [
    name,
    type,
    data[name] as Int32Array | Uint8Array,
  ]);
  arrays.push(
    ['entSelfBlob', 'u8', selfs.blob],
    ['entSelfOff', 'i32', selfs.off],
    ['entKwOff', 'i32', kwOff],
    ['entKwBlob', 'u8', kwTable.blob],
    ['entKwStrOff', 'i32', kwTable.off],
  );
  const sections: SectionEntry[] = [];
  let rel = 0;
  for (const [name, type, a] of arrays) {
    sections.push({ name, type, offset: rel, length: a.length });
    rel = pad8(rel + a.byteLength);
  }
  const scalars = Object.fromEntries(SCALARS.map((k) => [k, data[k]])) as ViewHeader['scalars'];
  const headerJson = Buffer.from(JSON.stringify({ scalars, sections } satisfies ViewHeader), 'utf8');
  const start = pad8(16 + headerJson.length);
  const head = Buffer.alloc(start);
  head.write(VIEW_MAGIC, 0, 'latin1');
  head.writeUInt32LE(PUBLISHED_FORMAT_VERSION, 8);
  head.writeUInt32LE(headerJson.length, 12);
  headerJson.copy(head, 16);
  const parts: Uint8Array[] = [head];
  for (const [, , a] of arrays) {
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    parts.push(bytes);
    const pad = pad8(a.byteLength) - a.byteLength;
    if (pad > 0) parts.push(new Uint8Array(pad));
  }
  return parts;
}

/** A decoded view file: the view's data (arrays over one buffer) and its entries, decoded on demand. */
export interface DecodedView {
  data: ViewData;
  entries(): IndexEntry[];
}

/**
 * Decode a view file already checked against its digest (structure errors are still
 * DB_CORRUPT): the first `byteLength` bytes of `buffer` (8-byte aligned, shared when the
 * view is to be shared), which every array of the view then points into. The buffer may
 * be larger than one typed array can be (files of tens of millions of entities).
 */
export function decodeViewFile(buffer: ArrayBuffer | SharedArrayBuffer, byteLength: number, label: string, file: string): DecodedView {
  checkEndianness();
  const bad = (why: string) => corrupt(label, file, why);
  const head = new Uint8Array(buffer, 0, Math.min(16, byteLength));
  const dv = new DataView(buffer, 0, head.byteLength);
  if (byteLength < 16 || Buffer.from(head.subarray(0, 8)).toString('latin1') !== VIEW_MAGIC) throw bad('not a cogr view file');
  const version = dv.getUint32(8, true);
  if (version !== PUBLISHED_FORMAT_VERSION) {
    throw cogrError(
      'DB_VERSION',
      `${label}: file ${file} has generation-file format version ${version}, this cogr reads version ${PUBLISHED_FORMAT_VERSION}; rewrite the files with \`cogr verify --repair\``,
      { file },
    );
  }
  const hlen = dv.getUint32(12, true);
  if (16 + hlen > byteLength) throw bad('its header runs past the end of the file');
  let header: ViewHeader;
  try {
    header = JSON.parse(Buffer.from(new Uint8Array(buffer, 16, hlen)).toString('utf8')) as ViewHeader;
  } catch (e) {
    throw bad(`its header is not JSON (${(e as Error).message})`);
  }
  const start = pad8(16 + hlen);
  const arrays = new Map<string, Int32Array | Uint8Array>();
  for (const s of header.sections ?? []) {
    const off = start + s.offset;
    const size = s.type === 'i32' ? 4 : 1;
    if (!Number.isInteger(s.offset) || !Number.isInteger(s.length) || s.length < 0 || off % 8 !== 0 || off + s.length * size > byteLength)
      throw bad(`section ${s.name} lies outside the file`);
    arrays.set(s.name, s.type === 'i32' ? new Int32Array(buffer, off, s.length) : new Uint8Array(buffer, off, s.length));
  }
  const get = <T extends Int32Array | Uint8Array>(name: string, type: SectionType): T => {
    const a = arrays.get(name);
    if (!a || (type === 'i32') !== a instanceof Int32Array) throw bad(`section ${name} is missing`);
    return a as T;
  };
  const data = { ...header.scalars } as ViewData;
  for (const [name, type] of VIEW_SECTIONS) (data as unknown as Record<string, unknown>)[name] = get(name, type);
  const n = data.numEntities;
  if (!Number.isInteger(n) || data.idsOff.length !== n + 1 || data.postOff.length !== data.numKeywords + 1)
    throw bad('its sections do not fit its counts');
  const entSelfBlob = get<Uint8Array>('entSelfBlob', 'u8');
  const entSelfOff = get<Int32Array>('entSelfOff', 'i32');
  const entKwOff = get<Int32Array>('entKwOff', 'i32');
  const entKwBlob = get<Uint8Array>('entKwBlob', 'u8');
  const entKwStrOff = get<Int32Array>('entKwStrOff', 'i32');
  if (entSelfOff.length !== n + 1 || entKwOff.length !== n + 1) throw bad('its entries do not fit its counts');
  let entries: IndexEntry[] | null = null;
  return {
    data,
    entries(): IndexEntry[] {
      if (entries) return entries;
      const ids = new StringTable(data.idsBlob, data.idsOff, n).all();
      const selfs = new StringTable(entSelfBlob, entSelfOff, n).all();
      const kws = new StringTable(entKwBlob, entKwStrOff, entKwStrOff.length - 1).all();
      const out: IndexEntry[] = new Array(n);
      for (let e = 0; e < n; e++) out[e] = { id: ids[e], self: selfs[e], keywords: kws.slice(entKwOff[e], entKwOff[e + 1]) };
      return (entries = out);
    },
  };
}

// ---- writing (the store's side) ------------------------------------------------------

/** Publish one committed generation: its view file, then its manifest. */
export async function publishGeneration(
  dbPath: string,
  info: GenerationInfo,
  data: ViewData,
  entries: readonly IndexEntry[],
  dbFormat: number,
): Promise<GenerationManifest> {
  const dir = publishedDir(dbPath);
  await mkdir(dir, { recursive: true });
  const stem = fileStem(info.side, info.generation);
  const parts = encodeViewFile(data, entries);
  const name = `${stem}.view`;
  await writeFileAtomic(join(dir, name), parts);
  const manifest: GenerationManifest = {
    format: MANIFEST_FORMAT,
    version: PUBLISHED_FORMAT_VERSION,
    dbFormat,
    ...info,
    vocabulary: data.numKeywords,
    files: [{ name, bytes: parts.reduce((s, p) => s + p.byteLength, 0), sha256: sha256Hex(...parts) }],
  };
  failpoint('store.publish:before-manifest');
  await writeSealedJson(join(dir, `${stem}.json`), manifest);
  return manifest;
}

/** Remove a generation's files: the manifest first (readers stop seeing it), then the data. */
export async function unpublishGeneration(dbPath: string, side: Side, generation: number): Promise<void> {
  const dir = publishedDir(dbPath);
  const stem = fileStem(side, generation);
  await rm(join(dir, `${stem}.json`), { force: true });
  await rm(join(dir, `${stem}.view`), { force: true });
}

// ---- reading --------------------------------------------------------------------------

/**
 * Read a whole file into one new 8-byte-aligned buffer (a SharedArrayBuffer when
 * `shared`), in reads of at most `chunk` bytes, hashing as it goes; its size and
 * SHA-256 must be the manifest's. No intermediate copy: files of gigabytes are read
 * once into the buffer the view then uses. `gone` runs when the file does not exist
 * (and throws when that is not damage).
 */
async function readChecked(
  file: string,
  entry: PublishedFile,
  shared: boolean,
  label: string,
  chunk: number,
  gone: () => Promise<void>,
): Promise<{ buffer: ArrayBuffer | SharedArrayBuffer; byteLength: number }> {
  let fh;
  try {
    fh = await open(file, 'r');
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') {
      await gone();
      throw corrupt(label, file, 'the file is missing');
    }
    throw corrupt(label, file, `it cannot be read (${(e as Error).message})`);
  }
  try {
    const size = (await fh.stat()).size;
    if (size !== entry.bytes) throw corrupt(label, file, `it has ${size} bytes, its manifest says ${entry.bytes}`);
    const buffer = shared ? new SharedArrayBuffer(Math.max(8, size)) : new ArrayBuffer(Math.max(8, size));
    const h = createHash('sha256');
    for (let pos = 0; pos < size;) {
      const win = new Uint8Array(buffer, pos, Math.min(chunk, size - pos));
      for (let got = 0; got < win.byteLength;) {
        const { bytesRead } = await fh.read(win, got, win.byteLength - got, pos + got);
        if (bytesRead === 0)
          throw corrupt(label, file, `it ended after ${pos + got} bytes while being read, its manifest says ${entry.bytes}`);
        got += bytesRead;
      }
      h.update(win);
      pos += win.byteLength;
    }
    const digest = h.digest('hex');
    if (digest !== entry.sha256)
      throw corrupt(
        label,
        file,
        `its content does not match the SHA-256 in its manifest (expected ${entry.sha256.slice(0, 12)}…, found ${digest.slice(0, 12)}…)`,
      );
    return { buffer, byteLength: size };
  } catch (e) {
    if (isCogrError(e)) throw e;
    throw corrupt(label, file, `it cannot be read (${(e as Error).message})`);
  } finally {
    await fh.close();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

function checkManifest(raw: unknown, side: Side, generation: number, file: string): GenerationManifest {
  const label = what(side, generation);
  const m = raw as Partial<GenerationManifest> | null;
  if (!m || typeof m !== 'object' || m.format !== MANIFEST_FORMAT) throw corrupt(label, file, 'it is not a generation manifest');
  if (m.version !== PUBLISHED_FORMAT_VERSION) {
    throw cogrError(
      'DB_VERSION',
      `${label}: manifest ${file} has generation-file format version ${JSON.stringify(m.version)}, this cogr reads version ${PUBLISHED_FORMAT_VERSION}; rewrite the files with \`cogr verify --repair\``,
      { file, found: m.version ?? null, expected: PUBLISHED_FORMAT_VERSION },
    );
  }
  if (m.side !== side || m.generation !== generation || !Array.isArray(m.files))
    throw corrupt(label, file, `it describes ${m.side} generation ${m.generation}`);
  return m as GenerationManifest;
}

export function publicInfo(m: GenerationInfo): GenerationInfo {
  return {
    side: m.side,
    generation: m.generation,
    parent: m.parent,
    createdAt: m.createdAt,
    size: m.size,
    totalLength: m.totalLength,
    changed: m.changed,
    meta: m.meta,
    analyzer: m.analyzer,
  };
}

/**
 * The generations published in a database folder, read without the database: the
 * reader side of everything above. Every manifest and file is checked when read; nothing
 * is cached here (callers keep what they loaded: generations never change).
 */
export class PublishedIndex {
  readonly dbPath: string;
  readonly dir: string;
  /** Bytes per read call when loading a view file (tests make it small to cross chunk edges). */
  readonly readChunk: number;
  constructor(dbPath: string, opts: { readChunk?: number } = {}) {
    this.dbPath = resolve(dbPath);
    this.dir = publishedDir(dbPath);
    this.readChunk = opts.readChunk ?? IO_CHUNK;
  }

  /** NOT_FOUND with what to do when there is no database or nothing published in it. */
  async checkExists(): Promise<void> {
    if (await exists(this.dir)) return;
    if (!(await exists(this.dbPath))) {
      throw cogrError(
        'NOT_FOUND',
        `no database at ${this.dbPath}: run \`cogr demo\` (or \`cogr evolve\`, \`cogr index import\`) first, or point --db at a database`,
        { path: this.dbPath },
      );
    }
    throw cogrError(
      'NOT_FOUND',
      `the database ${this.dbPath} has no generation files yet (nothing committed so far, or it was written by an older cogr: \`cogr verify --repair\` writes them)`,
      { path: this.dbPath },
    );
  }

  /** Generation numbers published for a side (by file name, unchecked), ascending. */
  async numbers(side: Side): Promise<number[]> {
    await this.checkExists();
    const out: number[] = [];
    for (const name of await readdir(this.dir)) {
      if (isTemporaryName(name)) continue;
      const m = MANIFEST_NAME.exec(name);
      if (m && m[1] === side) out.push(Number(m[2]));
    }
    return out.sort((a, b) => a - b);
  }

  /** One generation's checked manifest; NOT_FOUND when it is not published. */
  async manifest(side: Side, generation: number): Promise<GenerationManifest> {
    const file = join(this.dir, `${fileStem(side, generation)}.json`);
    const raw = await readSealedJson(file, what(side, generation));
    if (raw === undefined) {
      await this.checkExists();
      throw cogrError('NOT_FOUND', `${side} generation ${generation} does not exist in ${this.dbPath}`, { side, generation });
    }
    return checkManifest(raw, side, generation, file);
  }

  /** Resolve 'latest' (the highest published number) or check a number. */
  async resolve(side: Side, generation: number | 'latest'): Promise<number> {
    if (generation !== 'latest') return generation;
    const nums = await this.numbers(side);
    if (nums.length === 0) throw cogrError('NOT_FOUND', `the ${side} index in ${this.dbPath} has no generation yet`, { side });
    return nums[nums.length - 1];
  }

  /** Every published generation of a side, oldest first (every manifest checked). */
  async listGenerations(side: Side): Promise<GenerationInfo[]> {
    const out: GenerationInfo[] = [];
    for (const g of await this.numbers(side)) {
      try {
        out.push(publicInfo(await this.manifest(side, g)));
      } catch (e) {
        if (isCogrError(e, 'NOT_FOUND')) continue; // deleted while we listed
        throw e;
      }
    }
    return out;
  }

  async generationInfo(side: Side, generation: number | 'latest'): Promise<GenerationInfo> {
    return publicInfo(await this.manifest(side, await this.resolve(side, generation)));
  }

  async latest(side: Side): Promise<number | null> {
    const nums = await this.numbers(side);
    return nums.length === 0 ? null : nums[nums.length - 1];
  }

  /** Read and check a generation's view file. */
  async load(
    side: Side,
    generation: number | 'latest',
    opts: { shared?: boolean } = {},
  ): Promise<{ manifest: GenerationManifest; view: DecodedView }> {
    const g = await this.resolve(side, generation);
    const manifest = await this.manifest(side, g);
    const label = what(side, g);
    const entry = manifest.files.find((f) => f.name.endsWith('.view'));
    if (!entry) throw corrupt(label, join(this.dir, `${fileStem(side, g)}.json`), 'its manifest names no view file');
    const file = join(this.dir, entry.name);
    const { buffer, byteLength } = await readChecked(file, entry, opts.shared ?? false, label, this.readChunk, async () => {
      // Deleted since we read the manifest (the manifest goes first), or lost.
      if (!(await exists(join(this.dir, `${fileStem(side, g)}.json`))))
        throw cogrError('NOT_FOUND', `${side} generation ${g} was deleted while it was being read`, { side, generation: g });
    });
    const view = decodeViewFile(buffer, byteLength, label, file);
    if (view.data.side !== side || view.data.generation !== g || view.data.numEntities !== manifest.size)
      throw corrupt(label, file, 'it does not describe the generation its manifest names');
    return { manifest, view };
  }

  /** A frozen view of one generation (arrays on SharedArrayBuffer with `shared: true`). */
  async openView(side: Side, generation: number | 'latest', opts: { shared?: boolean } = {}): Promise<KeywordView> {
    return new KeywordView((await this.load(side, generation, opts)).view.data);
  }

  /** The entries of a generation, sorted by id (keywords in their stored order). */
  async entries(side: Side, generation: number | 'latest'): Promise<IndexEntry[]> {
    return (await this.load(side, generation)).view.entries();
  }

  /** What changed from generation a to generation b of a side. */
  async diff(side: Side, a: number, b: number): Promise<GenerationDiff> {
    return diffEntries(side, a, b, await this.entries(side, a), await this.entries(side, b));
  }
}

export interface GenerationDiff {
  side: Side;
  from: number;
  to: number;
  added: string[];
  removed: string[];
  /** Ids present in both whose keyword set or self keyword differ. */
  changed: string[];
  /** Σ over ids of |S_to \ S_from| (a missing entity has the empty set). */
  keywordsAdded: number;
  /** Σ over ids of |S_from \ S_to|. */
  keywordsDropped: number;
}

/** The diff of two generations' entries (the store and the published files share it). */
export function diffEntries(side: Side, a: number, b: number, ea: readonly IndexEntry[], eb: readonly IndexEntry[]): GenerationDiff {
  const ma = new Map(ea.map((e) => [e.id, e]));
  const mb = new Map(eb.map((e) => [e.id, e]));
  const out: GenerationDiff = { side, from: a, to: b, added: [], removed: [], changed: [], keywordsAdded: 0, keywordsDropped: 0 };
  for (const [id, x] of ma) {
    const y = mb.get(id);
    const sx = new Set(x.keywords);
    const sy = new Set(y ? y.keywords : []);
    let add = 0;
    let drop = 0;
    for (const k of sy) if (!sx.has(k)) add++;
    for (const k of sx) if (!sy.has(k)) drop++;
    out.keywordsAdded += add;
    out.keywordsDropped += drop;
    if (!y) out.removed.push(id);
    else if (add > 0 || drop > 0 || x.self !== y.self) out.changed.push(id);
  }
  for (const [id, y] of mb) {
    if (ma.has(id)) continue;
    out.added.push(id);
    out.keywordsAdded += new Set(y.keywords).size;
  }
  out.added.sort();
  return out;
}

/** Every side's published generation numbers (for the writer's reconciliation and `cogr verify`). */
export async function publishedNumbers(dbPath: string): Promise<Record<Side, number[]>> {
  const idx = new PublishedIndex(dbPath);
  const out: Record<Side, number[]> = { item: [], query: [] };
  if (!(await exists(idx.dir))) return out;
  for (const side of SIDES) out[side] = await idx.numbers(side);
  return out;
}
