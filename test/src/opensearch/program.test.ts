/** Boolean programs as OpenSearch bool queries (src/opensearch/program.ts), by hand. */
import { describe, expect, it } from 'vitest';
import { programQuery } from '../../../src/opensearch/program.ts';
import type { FieldPredicate } from '../../../src/server/program.ts';

const fieldsSeen: [FieldPredicate, string][] = [];
const terms = {
  textKeywords: new Map<string, readonly string[]>([['red shoes for running', ['running shoes', 'red']]]),
  noTerms: new Set(['zzqx']),
  fieldIds: (f: FieldPredicate, path: string) => {
    fieldsSeen.push([f, path]);
    return 'equals' in f && f.equals === 'acme' ? ['d2', 'd7'] : [];
  },
};

describe('programQuery: the bool query and the ranking words of a program', () => {
  it('and / or / not become filter / should (one at least) / must_not; only positive terms rank', () => {
    const { query, words } = programQuery(
      { and: [{ or: [{ keyword: 'Running Shoes' }, { any_of: ['trail', 'Trail', 'road'] }] }, { not: { keyword: 'wool hat' } }] },
      'none',
      terms,
    );
    expect(query).toEqual({
      bool: {
        filter: [
          {
            bool: {
              filter: [
                {
                  bool: { should: [{ term: { keys: 'running shoes' } }, { terms: { keys: ['trail', 'road'] } }], minimum_should_match: 1 },
                },
                { bool: { must_not: [{ term: { keys: 'wool hat' } }] } },
              ],
            },
          },
        ],
        should: [{ match: { words: { query: 'running shoes trail road' } } }],
      },
    });
    expect(words).toEqual(['running', 'shoes', 'trail', 'road']);
  });
  it('a text probes its generated keywords and itself, as GET /v1/search does; a text with no searchable term matches nothing', () => {
    const { query } = programQuery({ or: [{ text: 'red shoes for running' }, { text: 'zzqx' }] }, 'none', terms);
    expect(query).toEqual({
      bool: {
        filter: [
          {
            bool: {
              should: [{ terms: { keys: ['running shoes', 'red', 'red shoes for running'] } }, { match_none: {} }],
              minimum_should_match: 1,
            },
          },
        ],
        should: [{ match: { words: { query: 'running shoes red for' } } }],
      },
    });
  });
  it('a field predicate is the ids the server selects (none: matches nothing); a program without positive words ranks by id alone', () => {
    const a = programQuery({ field: { name: 'brand', equals: 'acme' } }, 'none', terms);
    expect(a).toEqual({ query: { bool: { filter: [{ ids: { values: ['d2', 'd7'] } }] } }, words: [] });
    const b = programQuery({ not: { field: { name: 'brand', equals: 'other' } } }, 'none', terms);
    expect(b.query).toEqual({ bool: { filter: [{ bool: { must_not: [{ match_none: {} }] } }] } });
    expect(fieldsSeen.map(([, p]) => p)).toEqual(['program.field', 'program.not.field']);
  });
});
