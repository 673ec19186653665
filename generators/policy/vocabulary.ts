/**
 * The shared keyword vocabulary: the phrases an item may carry as keywords, so that the
 * keywords of both sides are language (what an item is about, words many items share)
 * rather than addresses (a phrase or a number only one item has).
 *
 * Built once, at SFT, from the items' texts alone (title + text, cut to the item budget; no
 * judgement, no query): every 1–3-word n-gram of content words (no stop word at either edge,
 * no word without a letter, no placeholder token) that
 *   - occurs in at least `minItems` items (a keyword names a group of items), and in at most
 *     `maxShare` of them (a word on every tenth item names nothing), and,
 *   - for a phrase of two or more words, is cohesive: it occurs in at least `cohesion` of the
 *     items that hold its rarest content word ("heart disease" is a phrase of its own,
 *     "review summarizes current" is words that happen to meet).
 * Item keywords are chosen within it (candidates.ts), the query planner plans only keywords
 * that at least `minCarriers` items carry (generators/planner), and `carriedOnly` drops from
 * an item generation the keywords fewer items carry: a keyword of the index always names a
 * group of items.
 */
import { cogrError } from '../../index/core/errors.ts';
import { getAnalyzer, isAnalyzerName, type Analyzer, type AnalyzerName } from '../../index/text/analyzer.ts';
import type { GenerateInput } from '../types.ts';
import { itemGrams } from './candidates.ts';

export interface VocabularyOptions {
  /** Fewest items a phrase must occur in. */
  minItems: number;
  /** Largest share of the items a phrase may occur in. */
  maxShare: number;
  /** A phrase of 2+ words: least share of the items holding its rarest content word that hold the phrase. */
  cohesion: number;
  maxNgram: number;
}

export const DEFAULT_VOCABULARY: VocabularyOptions = { minItems: 3, maxShare: 0.1, cohesion: 0.15, maxNgram: 3 };

export interface VocabularyJSON {
  options: VocabularyOptions;
  analyzer: AnalyzerName;
  items: number;
  /** The match keys of its phrases (under `analyzer`: "x-ray" and "x-rays" are one). */
  keys: string[];
}

export class Vocabulary {
  private readonly set: Set<string>;
  private readonly an: Analyzer;
  private constructor(
    readonly options: VocabularyOptions,
    readonly analyzer: AnalyzerName,
    /** Items it was built from. */
    readonly items: number,
    keys: Iterable<string>,
  ) {
    this.set = new Set(keys);
    this.an = getAnalyzer(analyzer);
  }

  get size(): number {
    return this.set.size;
  }
  /** Whether a normalised keyword (surface form) is a phrase of the vocabulary, by its match key. */
  has(keyword: string): boolean {
    return this.set.has(this.an.key(keyword));
  }

  /** The vocabulary of a set of items (their titles and texts); phrases are counted by their match key under `analyzer`. */
  static build(inputs: readonly GenerateInput[], analyzer: AnalyzerName, opts: Partial<VocabularyOptions> = {}): Vocabulary {
    const o = { ...DEFAULT_VOCABULARY, ...opts };
    if (!(o.minItems >= 1) || !(o.maxShare > 0 && o.maxShare <= 1) || !(o.cohesion >= 0 && o.cohesion <= 1))
      throw cogrError('INVALID_ARGUMENT', `vocabulary options out of range: ${JSON.stringify(o)}`);
    const an = getAnalyzer(analyzer);
    const df = new Map<string, number>();
    const words = new Map<string, string[]>();
    for (const x of inputs) {
      const seen = new Set<string>();
      for (const [k, g] of itemGrams(x, o.maxNgram, true)) {
        const key = an.key(k);
        if (seen.has(key)) continue;
        seen.add(key);
        df.set(key, (df.get(key) ?? 0) + 1);
        if (g.words.length > 1 && !words.has(key))
          words.set(
            key,
            g.content.map((w) => an.key(w)),
          );
      }
    }
    const n = inputs.length;
    const maxItems = Math.max(o.minItems, Math.floor(o.maxShare * n));
    const phrases: string[] = [];
    for (const [k, c] of df) {
      if (c < o.minItems || c > maxItems) continue;
      const ws = words.get(k);
      if (ws) {
        let rarest = Infinity;
        for (const w of ws) rarest = Math.min(rarest, df.get(w) ?? c);
        if (c / rarest < o.cohesion) continue;
      }
      phrases.push(k);
    }
    phrases.sort();
    return new Vocabulary(o, analyzer, n, phrases);
  }

  toJSON(): VocabularyJSON {
    return { options: { ...this.options }, analyzer: this.analyzer, items: this.items, keys: [...this.set].sort() };
  }
  static fromJSON(j: VocabularyJSON): Vocabulary {
    if (!j || typeof j !== 'object' || !Array.isArray(j.keys) || !j.options || typeof j.items !== 'number' || !isAnalyzerName(j.analyzer))
      throw cogrError('DATA_FORMAT', 'vocabulary JSON is malformed (options, analyzer, items, keys)');
    return new Vocabulary({ ...DEFAULT_VOCABULARY, ...j.options }, j.analyzer, j.items, j.keys);
  }
}

/**
 * Entries with only the keywords at least `minCarriers` of them carry (and, with `existing`,
 * counting the carriers an index already has: entries added to it keep a keyword that
 * existing items carry). One pass: dropping a keyword changes no other keyword's count.
 */
export function carriedOnly<T extends { keywords: string[] }>(
  entries: readonly T[],
  minCarriers: number,
  normalize: (k: string) => string | null,
  existing?: (key: string) => number,
): T[] {
  if (minCarriers <= 1) return [...entries];
  const count = new Map<string, number>();
  for (const e of entries) {
    const seen = new Set<string>();
    for (const k of e.keywords) {
      const key = normalize(k);
      if (key === null || seen.has(key)) continue;
      seen.add(key);
      count.set(key, (count.get(key) ?? 0) + 1);
    }
  }
  const carriers = (key: string) => (count.get(key) ?? 0) + (existing ? existing(key) : 0);
  return entries.map((e) => {
    const keep = e.keywords.filter((k) => {
      const key = normalize(k);
      return key !== null && carriers(key) >= minCarriers;
    });
    return keep.length === e.keywords.length ? e : { ...e, keywords: keep };
  });
}

/**
 * The first M keywords of each item's ranked list such that every keyword kept is carried by
 * at least `minCarriers` items: a keyword fewer items would carry is struck from every list
 * and each list refilled from further down, until none is struck (SFT's base item keywords
 * under the shared vocabulary). Keywords compare by `normalize` (the index's match key).
 */
export function carriedTopM(
  ranked: ReadonlyMap<string, readonly string[]>,
  M: number,
  minCarriers: number,
  normalize: (k: string) => string | null,
): Map<string, string[]> {
  const struck = new Set<string>();
  let out = new Map<string, string[]>();
  for (let pass = 0; pass < 50; pass++) {
    out = new Map();
    const count = new Map<string, number>();
    for (const [id, list] of ranked) {
      const keep: string[] = [];
      const keys = new Set<string>();
      for (const k of list) {
        if (keep.length >= M) break;
        const key = normalize(k);
        if (key === null || struck.has(key) || keys.has(key)) continue;
        keys.add(key);
        keep.push(k);
      }
      for (const key of keys) count.set(key, (count.get(key) ?? 0) + 1);
      out.set(id, keep);
    }
    let more = 0;
    for (const [key, c] of count)
      if (c < minCarriers) {
        struck.add(key);
        more++;
      }
    if (more === 0) return out;
  }
  // Not settled within the passes (never seen): drop what is still under the minimum.
  const ids = [...out.keys()];
  const kept = carriedOnly(
    ids.map((id) => ({ keywords: out.get(id)! })),
    minCarriers,
    normalize,
  );
  return new Map(ids.map((id, i) => [id, kept[i].keywords]));
}
