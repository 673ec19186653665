/**
 * The keyword index's cell layout in its LevelDB sublevel (`kwi`): the manifest and record
 * types, the key escaping and generation numbers, the argument checks, and what a record
 * posts (its match keys, its analysed form). The writer and the store (store.ts) build every
 * key through these.
 */
import { cogrError } from '../core/errors.ts';
import { SIDES, type Side } from '../core/types.ts';
import { keywordWords } from '../text/normalize.ts';
import type { Analyzer } from '../text/analyzer.ts';
import type { GenerationInfo } from './published.ts';

export const KWI_SUBLEVEL = 'kwi';

export interface GenerationManifest extends GenerationInfo {
  /** Internal: the generation whose cells this one inherits (changes when a generation is deleted). */
  chainParent: number | null;
}

export interface LiveRecord {
  s: string;
  k: string[];
  l: number;
}
export type StoredRecord = LiveRecord | { x: 1 };

export const SEP = '\0';

export function esc(s: string): string {
  if (s.indexOf('\x01') < 0 && s.indexOf('\0') < 0) return s;
  return s.replace(/\x01/g, '\x01\x02').replace(/\0/g, '\x01\x01');
}
export function unesc(s: string): string {
  return s.replace(/\x01\x01/g, '\0').replace(/\x01\x02/g, '\x01');
}
export function genHex(g: number): string {
  return g.toString(16).padStart(8, '0');
}
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function checkSide(side: unknown): Side {
  if (!SIDES.includes(side as Side)) {
    throw cogrError('INVALID_ARGUMENT', `side must be "item" or "query" (got ${JSON.stringify(side)})`);
  }
  return side as Side;
}
export function checkGeneration(g: unknown, field = 'generation'): number {
  if (typeof g !== 'number' || !Number.isInteger(g) || g < 0 || g > 0xffffffff) {
    throw cogrError('INVALID_ARGUMENT', `${field} must be a non-negative integer (got ${JSON.stringify(g)})`);
  }
  return g;
}

/** The match keys posted for a record: its keywords' keys and its self key. */
export function postedKeys(rec: LiveRecord | undefined, an: Analyzer): Set<string> {
  const s = new Set<string>();
  if (!rec) return s;
  for (const k of rec.k) s.add(an.key(k));
  if (rec.s.length > 0) s.add(an.key(rec.s));
  return s;
}
/** A record under an analyzer: one surface form per match key (the first), its document length. */
export function analysed(rec: LiveRecord, an: Analyzer): LiveRecord {
  const seen = new Set<string>();
  const k: string[] = [];
  for (const kw of rec.k) {
    const key = an.key(kw);
    if (seen.has(key)) continue;
    seen.add(key);
    k.push(kw);
  }
  let l = 0;
  for (const key of postedKeys({ s: rec.s, k, l: 0 }, an)) l += keywordWords(key).length;
  return { s: rec.s, k, l };
}
export function sameRecord(a: LiveRecord, b: LiveRecord): boolean {
  if (a.s !== b.s || a.k.length !== b.k.length) return false;
  const sa = new Set(a.k);
  return b.k.every((k) => sa.has(k));
}
export function isLive(r: StoredRecord | undefined): r is LiveRecord {
  return r !== undefined && !('x' in r);
}
