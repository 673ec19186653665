import { describe, expect, it } from 'vitest';
import { KeywordView } from '../../index/view/view.ts';
import { querySideOf, type QueryOffering } from '../../src/run/context.ts';

// The query generation: three training queries and the keywords they carry.
const queryView = KeywordView.build('query', 0, [
  { id: 'q1', self: 'heart disease in children', keywords: ['heart', 'children'] },
  { id: 'q2', self: 'heart surgery outcomes', keywords: ['heart', 'surgery'] },
  { id: 'q3', self: 'lung cancer', keywords: ['lung'] },
]);
const offerings: QueryOffering[] = [
  { queryId: 'q1', keywords: ['heart', 'children'], judged: ['a', 'b'], ranked: ['c'] },
  { queryId: 'q2', keywords: ['heart', 'surgery'], judged: ['a'], ranked: ['b'] },
  { queryId: 'q3', keywords: ['lung'], judged: ['d'], ranked: [] },
];
const asObject = (side: ReturnType<typeof querySideOf>, ids: string[]) => Object.fromEntries(ids.map((id) => [id, side.offers(id)]));

describe('query offers, whole and leaving queries out (--adopt-on leaveout)', () => {
  it('sums every query’s offers per item: judging and ranking counts, precision over the keyword’s carriers', () => {
    const side = querySideOf(offerings, queryView);
    expect(side.offers('a')).toEqual([
      // 'heart': judged by q1 and q2, carried by both; 'children' by q1 alone; 'surgery' by q2 alone.
      { keyword: 'heart', judged: 2, ranked: 0, precision: 1 },
      { keyword: 'children', judged: 1, ranked: 0, precision: 1 },
      { keyword: 'surgery', judged: 1, ranked: 0, precision: 1 },
    ]);
    expect(side.offers('b')).toEqual([
      { keyword: 'heart', judged: 1, ranked: 1, precision: 0.5 },
      { keyword: 'children', judged: 1, ranked: 0, precision: 1 },
      { keyword: 'surgery', judged: 0, ranked: 1, precision: 0 },
    ]);
    expect(side.offers('none')).toEqual([]);
  });

  it('leaving a query out is the sum over the others: its items lose exactly its offers, no other item changes', () => {
    const ids = ['a', 'b', 'c', 'd'];
    const without1 = querySideOf(offerings, queryView, { without: 'q1' });
    expect(asObject(without1, ids)).toEqual(asObject(querySideOf(offerings.slice(1), queryView), ids));
    // 'c' was offered by q1 alone; 'd' never by q1.
    expect(without1.offers('c')).toEqual([]);
    expect(without1.offers('d')).toEqual(querySideOf(offerings, queryView).offers('d'));
    expect(without1.offers('a')).toEqual([
      { keyword: 'heart', judged: 1, ranked: 0, precision: 0.5 },
      { keyword: 'surgery', judged: 1, ranked: 0, precision: 1 },
    ]);
    // A group left out at once: only q3's offers remain.
    expect(asObject(querySideOf(offerings, queryView, { without: new Set(['q1', 'q2']) }), ids)).toEqual(
      asObject(querySideOf(offerings.slice(2), queryView), ids),
    );
    expect(querySideOf(offerings, queryView, { without: new Set(['q1', 'q2']) }).offers('a')).toEqual([]);
    // Leaving out a query that is not there changes nothing.
    expect(asObject(querySideOf(offerings, queryView, { without: 'q9' }), ids)).toEqual(asObject(querySideOf(offerings, queryView), ids));
  });
});
