/**
 * What the query side of serving shares between the snapshot state (state.ts), the keyword
 * workers (keywordPool.ts) and the served planner (queryGenerator.ts): the planner document
 * that crosses to a worker, a ranking request and its answer, and the no-searchable-term
 * refusal. Plain types below all three, so none imports another for them.
 */
import type { Floor } from '../../generators/planner/ranking.ts';
import type { Ranker } from '../../generators/planner/rankers.ts';

/** What crosses to the workers: plain JSON. */
export interface QueryGeneratorDocument {
  kind: 'planner';
  /** The planner round the document was saved as. */
  round: number;
  json: unknown;
}

/** A ranking request: the served set of `text` with `keywords` ordered by `ranker` (generators/planner/ranking.ts), its first `limit` entries. */
export interface RankRequest {
  text: string;
  keywords: string[];
  ranker: Ranker;
  floor: Floor;
  limit: number;
}
/** The served set's size and its first entries by the ranker (view ordinals, the ranker's and the keyword-bag scores). */
export interface RankedSet {
  matched: number;
  ordinals: number[];
  scores: number[];
  keywordScores: number[];
  fallback: 'empty_plan' | null;
}

/**
 * A query text with no searchable term: no word (stop words aside) at all, or — for a
 * source that knows the served data, such as the query planner — none that occurs in the
 * items' texts or keywords. Search answers it with `fallback: no_terms` and nothing
 * matched, instead of keywords invented for a text that says nothing.
 */
export class NoSearchableTerms extends Error {
  constructor(
    readonly text: string,
    why: 'no_words' | 'unknown_words' = 'unknown_words',
  ) {
    super(
      `the query has no searchable term (${text.trim() === '' ? 'it is blank' : why === 'no_words' ? 'it has no word but stop words and punctuation' : 'no word of it occurs in the served items'})`,
    );
    this.name = 'NoSearchableTerms';
  }
}
