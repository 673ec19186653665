/**
 * What a catalog generation holds beyond its keywords: the documents of the items the
 * catalog added or changed, the items it deleted, and the keywords set by hand — the fold
 * of its root's deltas (log.ts) up to the one it names — and which generation is the
 * catalog's newest on a root.
 *
 * A catalog generation is an item generation whose meta holds `catalog: {root, seq,
 * deltas}`: built (patch mode) on the root — an item generation of the run — or on the
 * catalog's previous generation of that root, applying delta `seq`; `deltas` counts the
 * root's deltas up to it, so a reader that finds another number knows a file is missing.
 * It carries no `step` (a resumed run deletes only generations its steps made).
 */
import { cogrError } from '../../index/core/errors.ts';
import type { Item } from '../../index/core/types.ts';
import type { GenerationInfo } from '../../index/store/published.ts';
import { publishedDeltaNumbers, readDeltaFile, type CatalogDelta, type CatalogDoc } from './log.ts';

/** What a catalog generation's meta names. */
export interface CatalogMeta {
  root: number;
  seq: number;
  deltas: number;
}

export function catalogMeta(g: Pick<GenerationInfo, 'meta'>): CatalogMeta | null {
  const c = g.meta?.catalog as Partial<CatalogMeta> | undefined;
  if (!c || typeof c !== 'object') return null;
  const int = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;
  return int(c.root) && int(c.seq) && int(c.deltas) ? { root: c.root!, seq: c.seq!, deltas: c.deltas! } : null;
}

/** The catalog of one generation: the fold of its root's deltas. */
export interface CatalogState {
  root: number;
  /** The newest delta folded in (−1: none). */
  seq: number;
  deltas: number;
  /** The newest delta that added, changed or deleted an item (−1: none): what the items' texts are as of. */
  docsSeq: number;
  /** Items whose documents the catalog holds: added or updated (the document), deleted (null). */
  docs: ReadonlyMap<string, CatalogDoc | null>;
  /** Keywords set by hand, kept until cleared or the item is deleted. */
  handSet: ReadonlyMap<string, readonly string[]>;
}

export function emptyCatalog(root: number): CatalogState {
  return { root, seq: -1, deltas: 0, docsSeq: -1, docs: new Map(), handSet: new Map() };
}

/** The state after `deltas` (of the state's root, in sequence order): a new state, the old one unchanged. */
export function applyDeltas(state: CatalogState, deltas: readonly CatalogDelta[]): CatalogState {
  if (deltas.length === 0) return state;
  const docs = new Map(state.docs);
  const handSet = new Map(state.handSet);
  let seq = state.seq;
  let docsSeq = state.docsSeq;
  for (const d of deltas) {
    if (d.root !== state.root || d.seq <= seq)
      throw cogrError('INTERNAL', `catalog delta ${d.seq} (root ${d.root}) cannot follow delta ${seq} of root ${state.root}`);
    for (const id of d.delete) {
      docs.set(id, null);
      handSet.delete(id);
    }
    for (const doc of d.put) docs.set(doc.id, doc);
    for (const h of d.handSet) {
      if (h.keywords === null) handSet.delete(h.id);
      else handSet.set(h.id, h.keywords);
    }
    seq = d.seq;
    if (d.put.length > 0 || d.delete.length > 0) docsSeq = d.seq;
  }
  return { root: state.root, seq, deltas: state.deltas + deltas.length, docsSeq, docs, handSet };
}

/**
 * Reads the catalog of served generations from the published delta files (no database),
 * keeping the deltas read (they never change) and the last state, so that the next
 * generation of the same root folds only its newer deltas.
 */
export class PublishedCatalog {
  private readonly deltas = new Map<number, CatalogDelta>();
  private last: CatalogState | null = null;
  constructor(private readonly dbPath: string) {}

  /** The catalog of `head` (an empty one for a generation the catalog never wrote). */
  async stateOf(head: Pick<GenerationInfo, 'generation' | 'meta'>): Promise<CatalogState> {
    const meta = catalogMeta(head);
    if (!meta) return emptyCatalog(head.generation);
    const base = this.last && this.last.root === meta.root && this.last.seq <= meta.seq ? this.last : emptyCatalog(meta.root);
    const newer: CatalogDelta[] = [];
    for (const seq of await publishedDeltaNumbers(this.dbPath)) {
      if (seq <= base.seq || seq > meta.seq) continue;
      let d = this.deltas.get(seq);
      if (!d) this.deltas.set(seq, (d = await readDeltaFile(this.dbPath, seq)));
      if (d.root === meta.root) newer.push(d);
    }
    const state = applyDeltas(base, newer);
    if (state.deltas !== meta.deltas)
      throw cogrError(
        'DB_CORRUPT',
        `item generation ${head.generation} applies ${meta.deltas} catalog deltas of root ${meta.root}, the published files hold ${state.deltas} of them up to delta ${meta.seq} (a catalog file is missing; the next catalog writer, \`cogr items\` or \`cogr serve --writable\`, writes it again from the database)`,
        { generation: head.generation },
      );
    this.last = state;
    return state;
  }
}

/** The dataset's items as the catalog has them: deleted ones left out, changed ones replaced, added ones after. */
export function catalogItems(items: readonly Item[], state: CatalogState): Item[] {
  if (state.docs.size === 0) return items as Item[];
  const out: Item[] = [];
  const seen = new Set<string>();
  const asItem = (d: CatalogDoc): Item => ({ id: d.id, title: d.title, text: d.text, ...(d.fields ? { fields: d.fields } : {}) });
  for (const it of items) {
    seen.add(it.id);
    const d = state.docs.get(it.id);
    if (d === undefined) out.push(it);
    else if (d !== null) out.push(asItem(d));
  }
  for (const [id, d] of state.docs) if (d !== null && !seen.has(id)) out.push(asItem(d));
  return out;
}

/**
 * A read-only map over a base map with the catalog's changes on top (a changed entry's
 * value, or none for a deleted one), so a snapshot need not copy the dataset's map.
 */
export class OverlayMap<V> implements ReadonlyMap<string, V> {
  private readonly removed: number;
  constructor(
    private readonly base: ReadonlyMap<string, V>,
    /** id → its value now, or undefined when it has none (deleted, or the change has none). */
    private readonly over: ReadonlyMap<string, V | undefined>,
  ) {
    let removed = 0;
    for (const [k, v] of over) if (base.has(k) && v === undefined) removed++;
    let added = 0;
    for (const [k, v] of over) if (!base.has(k) && v !== undefined) added++;
    this.removed = removed - added;
  }
  get size(): number {
    return this.base.size - this.removed;
  }
  get(key: string): V | undefined {
    return this.over.has(key) ? this.over.get(key) : this.base.get(key);
  }
  has(key: string): boolean {
    return this.get(key) !== undefined;
  }
  *entries(): MapIterator<[string, V]> {
    for (const [k, v] of this.base) if (!this.over.has(k)) yield [k, v];
    for (const [k, v] of this.over) if (v !== undefined) yield [k, v];
  }
  *keys(): MapIterator<string> {
    for (const [k] of this.entries()) yield k;
  }
  *values(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }
  [Symbol.iterator](): MapIterator<[string, V]> {
    return this.entries();
  }
  forEach(fn: (value: V, key: string, map: ReadonlyMap<string, V>) => void): void {
    for (const [k, v] of this.entries()) fn(v, k, this);
  }
}
