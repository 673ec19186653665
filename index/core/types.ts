/**
 * Shared domain types. They live at the bottom of the dependency graph (index/) so
 * that every other folder can use them without importing upwards.
 */

/** Which side of the retrieval problem an index, a generator or a reward belongs to. */
export type Side = 'item' | 'query';
export const SIDES: readonly Side[] = ['item', 'query'];

/** A normalised keyword (see normalize.ts). Multi-word phrases are normal. */
export type Keyword = string;

/** A set of normalised keywords, de-duplicated, in generation order. */
export type KeywordSet = Keyword[];

export interface Item {
  id: string;
  title: string;
  text: string;
  /** Optional structured fields (brand, category, ...) a dataset may carry. */
  fields?: Record<string, string>;
}

export interface Query {
  id: string;
  text: string;
}

/**
 * One validated corpus shape produced by every dataset loader.
 * `qrels` maps a query id to its judged items with their grade (> 0);
 * `relevant` is derived from `qrels` by the loader's documented threshold.
 */
export interface Corpus {
  name: string;
  items: Item[];
  queries: Query[];
  qrels: Map<string, Map<string, number>>;
  relevant: Map<string, Set<string>>;
}

/** One entity's entry in a keyword index: its keyword set and its self keyword. */
export interface IndexEntry {
  id: string;
  /**
   * The entity's own string treated as one extra keyword: the item title ({i}) or the
   * raw query text ({q}). Normalised without the length limits of ordinary keywords.
   */
  self: string;
  keywords: KeywordSet;
}
