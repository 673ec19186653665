/**
 * What a co-evolution run needs of a collection, checked before anything is written (the
 * split, `computeSplit`, runs before a database is opened) and warned about when a folder is
 * registered (`cogr datasets add`): each shortfall names the number found and the number
 * needed.
 */
import type { Corpus } from '../../index/core/types.ts';
import { judgedQueryIds } from '../splits.ts';

/** BM25's minimum (baseline/bm25.ts): every run ends with the BM25 baseline on its split. */
export const MIN_ITEMS = 3;
/** One query to train on and one held out. */
export const MIN_JUDGED_QUERIES = 2;

/** Why no run can be made on `corpus` (empty when one can). */
export function trainingShortfalls(corpus: Pick<Corpus, 'name' | 'items' | 'queries' | 'relevant'>): string[] {
  const out: string[] = [];
  const items = corpus.items.length;
  if (items < MIN_ITEMS)
    out.push(
      `dataset ${corpus.name} has ${items} item${items === 1 ? '' : 's'}; a run needs at least ${MIN_ITEMS} (BM25's minimum: every run is compared with the BM25 baseline)`,
    );
  const judged = judgedQueryIds(corpus).length;
  if (judged < MIN_JUDGED_QUERIES)
    out.push(
      `dataset ${corpus.name} has ${judged} judged queries; a run needs at least ${MIN_JUDGED_QUERIES} (one to train on, one held out; a judged query has a relevant item)`,
    );
  return out;
}
