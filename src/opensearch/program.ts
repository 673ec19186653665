/**
 * Boolean retrieval programs (src/server/program.ts) on an OpenSearch alias: the program
 * becomes one `bool` query that matches what the in-memory evaluation matches, ranked by
 * the same BM25 words.
 *
 *   {keyword: k}        term on `keys` (k's match key under the index's analyzer; a keyword
 *                       that normalises to nothing matches nothing)
 *   {any_of: [...]}     terms on `keys`
 *   {text: t}           terms on `keys` of t's generated keywords and t itself, as GET
 *                       /v1/search probes it; a text with no searchable term matches nothing
 *   {field: …}          an `ids` filter of the items the predicate selects, evaluated by the
 *                       server on the dataset's fields as the in-memory program does (the
 *                       exported index keeps fields by type, not in cogr's normalisation)
 *   {and} / {or} / {not} bool filter / should (at least one) / must_not
 *
 * The ranking: a `match` on `words` of the distinct words of the positive keywords and
 * texts (under an even number of `not`s), scores × (k1 + 1) as cogr's BM25, ties by id;
 * without positive words every match scores 0 and the order is by id.
 */
import { keywordWords, sharedKeywordNormalizer } from '../../index/text/normalize.ts';
import type { ProgramNode, ProgramTerms } from '../server/program.ts';
import type { OpenSearchNodes } from './client.ts';
import { probeTerms, runSearch, type BackendHits, type IndexMeta } from './index.ts';

const NOTHING = { match_none: {} };

/** The bool query of a program and the words that rank it. */
export function programQuery(node: ProgramNode, analyzer: IndexMeta['analyzer'], terms: ProgramTerms): { query: unknown; words: string[] } {
  const norm = sharedKeywordNormalizer(analyzer);
  const words = new Set<string>();
  const keyOf = (k: string) => norm.key(k);
  const rankBy = (keys: readonly string[]) => {
    for (const k of keys) for (const w of keywordWords(k)) words.add(w);
  };
  const walk = (n: ProgramNode, positive: boolean, path: string): unknown => {
    if ('keyword' in n) {
      const k = keyOf(n.keyword);
      if (k === null) return NOTHING;
      if (positive) rankBy([k]);
      return { term: { keys: k } };
    }
    if ('any_of' in n) {
      const keys = [...new Set(n.any_of.map(keyOf).filter((k): k is string => k !== null))];
      if (positive) rankBy(keys);
      return keys.length ? { terms: { keys } } : NOTHING;
    }
    if ('text' in n) {
      const { keys } = probeTerms(analyzer, n.text, terms.textKeywords.get(n.text) ?? []);
      if (terms.noTerms.has(n.text) || keys.length === 0) return NOTHING;
      if (positive) rankBy(keys);
      return { terms: { keys } };
    }
    if ('field' in n) {
      const ids = terms.fieldIds(n.field, `${path}.field`);
      return ids.length ? { ids: { values: ids } } : NOTHING;
    }
    if ('and' in n) return { bool: { filter: n.and.map((c, i) => walk(c, positive, `${path}.and[${i}]`)) } };
    if ('or' in n) return { bool: { should: n.or.map((c, i) => walk(c, positive, `${path}.or[${i}]`)), minimum_should_match: 1 } };
    return { bool: { must_not: [walk(n.not, !positive, `${path}.not`)] } };
  };
  const filter = walk(node, true, 'program');
  const list = [...words];
  return {
    query: { bool: { filter: [filter], ...(list.length > 0 ? { should: [{ match: { words: { query: list.join(' ') } } }] } : {}) } },
    words: list,
  };
}

/** A program's matched set and its top k on the alias. */
export async function searchProgram(
  os: OpenSearchNodes,
  alias: string,
  meta: Pick<IndexMeta, 'analyzer' | 'k1' | 'items'>,
  node: ProgramNode,
  terms: ProgramTerms,
  k: number,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<BackendHits> {
  const { query } = programQuery(node, meta.analyzer, terms);
  const body = {
    size: Math.min(k, meta.items),
    track_total_hits: true,
    _source: false,
    query,
    sort: [{ _score: 'desc' }, { id: 'asc' }],
    track_scores: true,
  };
  return runSearch(os, alias, meta, body, opts);
}
