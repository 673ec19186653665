/**
 * The keyword audit: are a run's keywords language or addresses? The same figures as the
 * team's audit of a served run (../shared/tools/keyword-audit.py), from keyword lists and
 * the item index they are matched against:
 *   queries: keywords per query; the share of query keywords that match at most one item
 *            (an address: an item number, a phrase one item has); the median number of items
 *            a query keyword matches; the share of bare numbers; the share whose every word
 *            is a word of the query's text ("taken from the query") against the rest
 *            ("added"); with cosines (an embeddings endpoint), the share at cosine ≥ 0.3 to
 *            the query's text ("related") and the median cosine, and that share apart for
 *            the keywords taken from the query and the added ones, and by the query's length
 *            in words (QUERY_LENGTHS): a one-word keyword is seldom near a query that is an
 *            abstract, even when the abstract holds the word.
 *            Queries left without any keyword apart: how many, and of those how many their own
 *            text matches as a keyword (the rule's {q}: "milk" matches the items that carry
 *            `milk`) and how many match no item at all (served by the run's floor, if any).
 *   items:   keywords per item; the share of item keywords that no other item carries; the
 *            median number of items an item keyword matches.
 * "Matches" counts the items the keyword alone retrieves under the CoGR rule: those that
 * carry it, or whose title it is (`KeywordView.keywordDf`). Pure: `cogr audit`, the run's
 * step records and the tests call it.
 */
import type { KeywordView } from '../../index/view/view.ts';

/** A query keyword is related to its query at this cosine or more (the team's audit's threshold). */
export const RELATED_COSINE = 0.3;

/** The query lengths (words of the text, at most) the related share is broken down by; the last group is the longer ones. */
export const QUERY_LENGTHS = [10, 30] as const;

/** The related share of a part of the query keywords: how many keywords it holds and their share at cosine ≥ RELATED_COSINE (0 when none). */
export interface RelatedPart {
  keywords: number;
  share: number;
}

export interface RelatedAudit {
  share: number;
  medianCosine: number;
  threshold: number;
  /** The keywords taken from the query (every word in its text) and the added ones. */
  fromQuery?: RelatedPart;
  added?: RelatedPart;
  /** By the query's length: words at most `maxWords` (null: the longer ones), the queries of that length too. */
  byQueryLength?: (RelatedPart & { maxWords: number | null; queries: number })[];
}

export interface QueryKeywordAudit {
  queries: number;
  keywords: number;
  keywordsPerQuery: number;
  /** Share of query keywords matching at most one item. */
  shareOneItem: number;
  medianItemsPerKeyword: number | null;
  shareBareNumbers: number;
  /** Share of query keywords whose every word occurs in the query's text. */
  shareFromQuery: number;
  /**
   * The queries given no keyword: how many, and when the items their own text matches are
   * known, how many it matches some item (`ownText`) and how many nothing (`nothing`).
   * Audits stored before it lack it.
   */
  withoutKeywords?: WithoutKeywords;
  /** With cosines: share at cosine ≥ RELATED_COSINE, the median cosine, and the share by kind of keyword and by length of query (audits stored before them lack the parts). */
  related?: RelatedAudit;
}

export interface WithoutKeywords {
  queries: number;
  ownText?: number;
  nothing?: number;
}

export interface ItemKeywordAudit {
  items: number;
  keywords: number;
  keywordsPerItem: number;
  /** Share of item keywords that no other item carries. */
  shareOneItem: number;
  medianItemsPerKeyword: number | null;
}

export interface KeywordAudit {
  query: QueryKeywordAudit;
  item: ItemKeywordAudit;
}

/** One audited query: its text, its keywords and the items each matches (and its cosine to the text, when measured). */
export interface AuditedQuery {
  text: string;
  keywords: readonly string[];
  matches: readonly number[];
  cosines?: readonly number[];
  /** The items the query's own text matches as a keyword ({q}); given by callers that know it. */
  ownMatches?: number;
}

const WORD = /[\p{L}\p{N}]+/gu;
const BARE_NUMBER = /^\p{N}+$/u;

function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const share = (n: number, d: number) => (d > 0 ? n / d : 0);

export function auditQueries(queries: readonly AuditedQuery[]): QueryKeywordAudit {
  let keywords = 0;
  let one = 0;
  let numbers = 0;
  let fromQuery = 0;
  const matches: number[] = [];
  const cos: number[] = [];
  const part = () => ({ keywords: 0, related: 0 });
  const taken = part();
  const added = part();
  const byLength = [...QUERY_LENGTHS, null].map((maxWords) => ({ maxWords, queries: 0, ...part() }));
  let measured = true;
  let without = 0;
  let ownText = 0;
  let ownKnown = true;
  for (const q of queries) {
    if (q.keywords.length === 0) {
      without++;
      if (q.ownMatches === undefined) ownKnown = false;
      else if (q.ownMatches > 0) ownText++;
    }
    const textWords = q.text.toLowerCase().match(WORD) ?? [];
    const words = new Set(textWords);
    const length = byLength.find((b) => b.maxWords === null || textWords.length <= b.maxWords)!;
    length.queries++;
    if (!q.cosines) measured = false;
    q.keywords.forEach((k, i) => {
      keywords++;
      const c = q.matches[i];
      matches.push(c);
      if (c <= 1) one++;
      if (BARE_NUMBER.test(k.trim())) numbers++;
      const kw = k.toLowerCase().match(WORD) ?? [];
      const own = kw.every((w) => words.has(w));
      if (own) fromQuery++;
      if (q.cosines) {
        const x = q.cosines[i];
        cos.push(x);
        for (const p of [own ? taken : added, length]) {
          p.keywords++;
          if (x >= RELATED_COSINE) p.related++;
        }
      }
    });
  }
  const relatedPart = (p: { keywords: number; related: number }): RelatedPart => ({
    keywords: p.keywords,
    share: share(p.related, p.keywords),
  });
  const out: QueryKeywordAudit = {
    queries: queries.length,
    keywords,
    keywordsPerQuery: share(keywords, queries.length),
    shareOneItem: share(one, keywords),
    medianItemsPerKeyword: median(matches),
    shareBareNumbers: share(numbers, keywords),
    shareFromQuery: share(fromQuery, keywords),
    withoutKeywords: { queries: without, ...(ownKnown ? { ownText, nothing: without - ownText } : {}) },
  };
  if (measured && queries.length > 0)
    out.related = {
      share: share(cos.filter((c) => c >= RELATED_COSINE).length, cos.length),
      medianCosine: median(cos) ?? 0,
      threshold: RELATED_COSINE,
      fromQuery: relatedPart(taken),
      added: relatedPart(added),
      byQueryLength: byLength.map((b) => ({ maxWords: b.maxWords, queries: b.queries, ...relatedPart(b) })),
    };
  return out;
}

/** The items a keyword alone matches in a view (0 when the view does not know it). */
export function keywordMatches(view: KeywordView, keyword: string): number {
  const o = view.ordinalOfKeyword(keyword);
  return o < 0 ? 0 : view.keywordDf(o);
}

/** The items a query's own text matches as its keyword ({q}: items carrying it, or whose title it is), in a view. */
export function ownTextMatches(view: KeywordView, text: string): number {
  const o = view.probeKeywordOrdinals({ self: text, keywords: [] });
  return o.length === 0 ? 0 : view.keywordDf(o[0]);
}

/** Every item's keywords of an item view (titles aside; the first `limit` items), against the items each matches. */
export function auditItems(view: KeywordView, limit?: number): ItemKeywordAudit {
  const d = view.data;
  const n = limit === undefined ? view.size : Math.min(limit, view.size);
  let keywords = 0;
  let one = 0;
  const perKeyword = new Map<number, number>();
  for (let e = 0; e < n; e++) {
    for (let j = d.fwdOff[e]; j < d.fwdOff[e + 1]; j++) {
      const o = d.fwd[j];
      const c = view.keywordDf(o);
      keywords++;
      if (c <= 1) one++;
      perKeyword.set(o, c);
    }
  }
  return {
    items: n,
    keywords,
    keywordsPerItem: share(keywords, n),
    shareOneItem: share(one, keywords),
    medianItemsPerKeyword: median([...perKeyword.values()]),
  };
}

/**
 * Audits of several folds pooled: shares weighted by their keyword counts, per-entity counts
 * by their entity counts, and the median as the mean of the folds' medians (the lists are not
 * kept). Null without audits.
 */
export function poolAudits(audits: readonly (KeywordAudit | null | undefined)[]): KeywordAudit | null {
  const all = audits.filter((a): a is KeywordAudit => a != null);
  if (all.length === 0) return null;
  const wmean = (parts: { w: number; v: number }[]) => {
    const w = parts.reduce((a, p) => a + p.w, 0);
    return w > 0 ? parts.reduce((a, p) => a + p.w * p.v, 0) / w : 0;
  };
  const meanOf = (xs: (number | null)[]) => {
    const ys = xs.filter((x): x is number => x !== null);
    return ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : null;
  };
  const q = all.map((a) => a.query);
  const it = all.map((a) => a.item);
  const qk = (pick: (x: QueryKeywordAudit) => number) => wmean(q.map((x) => ({ w: x.keywords, v: pick(x) })));
  const ik = (pick: (x: ItemKeywordAudit) => number) => wmean(it.map((x) => ({ w: x.keywords, v: pick(x) })));
  const related: RelatedAudit | undefined = q.every((x) => x.related)
    ? {
        share: qk((x) => x.related!.share),
        medianCosine: meanOf(q.map((x) => x.related!.medianCosine)) ?? 0,
        threshold: RELATED_COSINE,
        ...poolParts(q.map((x) => x.related!)),
      }
    : undefined;
  return {
    query: {
      queries: q.reduce((a, x) => a + x.queries, 0),
      keywords: q.reduce((a, x) => a + x.keywords, 0),
      keywordsPerQuery: wmean(q.map((x) => ({ w: x.queries, v: x.keywordsPerQuery }))),
      shareOneItem: qk((x) => x.shareOneItem),
      medianItemsPerKeyword: meanOf(q.map((x) => x.medianItemsPerKeyword)),
      shareBareNumbers: qk((x) => x.shareBareNumbers),
      shareFromQuery: qk((x) => x.shareFromQuery),
      ...poolWithout(q),
      ...(related ? { related } : {}),
    },
    item: {
      items: it.reduce((a, x) => a + x.items, 0),
      keywords: it.reduce((a, x) => a + x.keywords, 0),
      keywordsPerItem: wmean(it.map((x) => ({ w: x.items, v: x.keywordsPerItem }))),
      shareOneItem: ik((x) => x.shareOneItem),
      medianItemsPerKeyword: meanOf(it.map((x) => x.medianItemsPerKeyword)),
    },
  };
}

/** The queries without keywords of several audits summed; none when an audit lacks them (stored before them). */
function poolWithout(q: readonly QueryKeywordAudit[]): Pick<QueryKeywordAudit, 'withoutKeywords'> {
  if (!q.every((x) => x.withoutKeywords)) return {};
  const sum = (pick: (w: WithoutKeywords) => number) => q.reduce((a, x) => a + pick(x.withoutKeywords!), 0);
  const known = q.every((x) => x.withoutKeywords!.ownText !== undefined && x.withoutKeywords!.nothing !== undefined);
  return {
    withoutKeywords: {
      queries: sum((w) => w.queries),
      ...(known ? { ownText: sum((w) => w.ownText!), nothing: sum((w) => w.nothing!) } : {}),
    },
  };
}

/** The related parts of several audits pooled by keyword counts; none when an audit lacks them (stored before them). */
function poolParts(rs: readonly RelatedAudit[]): Pick<RelatedAudit, 'fromQuery' | 'added' | 'byQueryLength'> {
  if (!rs.every((r) => r.fromQuery && r.added && r.byQueryLength)) return {};
  const pool = (ps: RelatedPart[]): RelatedPart => {
    const keywords = ps.reduce((a, p) => a + p.keywords, 0);
    return {
      keywords,
      share: share(
        ps.reduce((a, p) => a + p.share * p.keywords, 0),
        keywords,
      ),
    };
  };
  return {
    fromQuery: pool(rs.map((r) => r.fromQuery!)),
    added: pool(rs.map((r) => r.added!)),
    byQueryLength: rs[0].byQueryLength!.map((b, j) => ({
      maxWords: b.maxWords,
      queries: rs.reduce((a, r) => a + r.byQueryLength![j].queries, 0),
      ...pool(rs.map((r) => r.byQueryLength![j])),
    })),
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

/** One line of an audit: the query side, then the item side. */
export function auditLine(a: KeywordAudit): string {
  const q = a.query;
  const i = a.item;
  const med = (x: number | null) => (x === null ? '—' : String(Math.round(x * 10) / 10));
  const related = q.related ? `, ${pct(q.related.share)} related to the query (cosine ≥ ${q.related.threshold})` : '';
  return (
    `query keywords ${q.keywordsPerQuery.toFixed(1)} per query, ${pct(q.shareOneItem)} match at most one item, median ${med(q.medianItemsPerKeyword)} items each, ` +
    `${pct(q.shareFromQuery)} taken from the query, ${pct(q.shareBareNumbers)} bare numbers${related}; ` +
    withoutLine(q.withoutKeywords, q.queries) +
    `item keywords ${i.keywordsPerItem.toFixed(1)} per item, ${pct(i.shareOneItem)} carried by one item, median ${med(i.medianItemsPerKeyword)} items each`
  );
}

/** The queries without keywords, as auditLine says them ('' for audits stored before them). */
function withoutLine(w: WithoutKeywords | undefined, queries: number): string {
  if (!w) return '';
  const apart =
    w.ownText !== undefined && w.nothing !== undefined ? ` (${w.ownText} matched by their own text, ${w.nothing} by nothing)` : '';
  return `${w.queries} of ${queries} queries without a keyword${apart}; `;
}

/** The names of the query-length groups of an audit, in order: "1–10 words", "11–30 words", "31+ words". */
export function queryLengthLabels(groups: readonly { maxWords: number | null }[]): string[] {
  let lo = 1;
  return groups.map((b) => {
    const label = b.maxWords === null ? `${lo}+ words` : `${lo}–${b.maxWords} words`;
    if (b.maxWords !== null) lo = b.maxWords + 1;
    return label;
  });
}

/** The related share apart (taken from the query, added, by query length), one line; null when the audit has no parts. */
export function relatedLine(r: RelatedAudit | undefined): string | null {
  if (!r?.fromQuery || !r.added || !r.byQueryLength) return null;
  const part = (p: RelatedPart) => `${pct(p.share)} of ${p.keywords}`;
  const labels = queryLengthLabels(r.byQueryLength);
  const lengths = r.byQueryLength.map((b, j) => `${labels[j]} (${b.queries} queries) ${part(b)}`);
  return `related (cosine ≥ ${r.threshold}): taken from the query ${part(r.fromQuery)}, added ${part(r.added)}; by query length: ${lengths.join(', ')}`;
}

/** A step's audit: its held-out queries' keywords and its item generation (null for steps stored before audits). */
export function stepAudit(s: { metrics: { keywords?: QueryKeywordAudit }; itemKeywords?: ItemKeywordAudit }): KeywordAudit | null {
  return s.metrics.keywords && s.itemKeywords ? { query: s.metrics.keywords, item: s.itemKeywords } : null;
}
