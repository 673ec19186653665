/**
 * The keyword audit: are a run's keywords language or addresses? The same figures as the
 * team's audit of a served run (../shared/tools/keyword-audit.py), from keyword lists and
 * the item index they are matched against:
 *   queries: keywords per query; the share of query keywords that match at most one item
 *            (an address: an item number, a phrase one item has); the median number of items
 *            a query keyword matches; the share of bare numbers; the share whose every word
 *            is a word of the query's text ("taken from the query") against the rest
 *            ("added"); with cosines (an embeddings endpoint), the share at cosine ≥ 0.3 to
 *            the query's text ("related") and the median cosine.
 *   items:   keywords per item; the share of item keywords that no other item carries; the
 *            median number of items an item keyword matches.
 * "Matches" counts the items the keyword alone retrieves under the CoGR rule: those that
 * carry it, or whose title it is (`KeywordView.keywordDf`). Pure: `cogr audit`, the run's
 * step records and the tests call it.
 */
import type { KeywordView } from '../../index/view/view.ts';

/** A query keyword is related to its query at this cosine or more (the team's audit's threshold). */
export const RELATED_COSINE = 0.3;

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
  /** With cosines: share at cosine ≥ RELATED_COSINE and the median cosine. */
  related?: { share: number; medianCosine: number; threshold: number };
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
  let measured = true;
  for (const q of queries) {
    const words = new Set(q.text.toLowerCase().match(WORD) ?? []);
    if (!q.cosines) measured = false;
    q.keywords.forEach((k, i) => {
      keywords++;
      const c = q.matches[i];
      matches.push(c);
      if (c <= 1) one++;
      if (BARE_NUMBER.test(k.trim())) numbers++;
      const kw = k.toLowerCase().match(WORD) ?? [];
      if (kw.every((w) => words.has(w))) fromQuery++;
      if (q.cosines) cos.push(q.cosines[i]);
    });
  }
  const out: QueryKeywordAudit = {
    queries: queries.length,
    keywords,
    keywordsPerQuery: share(keywords, queries.length),
    shareOneItem: share(one, keywords),
    medianItemsPerKeyword: median(matches),
    shareBareNumbers: share(numbers, keywords),
    shareFromQuery: share(fromQuery, keywords),
  };
  if (measured && queries.length > 0)
    out.related = {
      share: share(cos.filter((c) => c >= RELATED_COSINE).length, cos.length),
      medianCosine: median(cos) ?? 0,
      threshold: RELATED_COSINE,
    };
  return out;
}

/** The items a keyword alone matches in a view (0 when the view does not know it). */
export function keywordMatches(view: KeywordView, keyword: string): number {
  const o = view.ordinalOfKeyword(keyword);
  return o < 0 ? 0 : view.keywordDf(o);
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
  const related = q.every((x) => x.related)
    ? {
        share: qk((x) => x.related!.share),
        medianCosine: meanOf(q.map((x) => x.related!.medianCosine)) ?? 0,
        threshold: RELATED_COSINE,
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
    `item keywords ${i.keywordsPerItem.toFixed(1)} per item, ${pct(i.shareOneItem)} carried by one item, median ${med(i.medianItemsPerKeyword)} items each`
  );
}

/** A step's audit: its held-out queries' keywords and its item generation (null for steps stored before audits). */
export function stepAudit(s: { metrics: { keywords?: QueryKeywordAudit }; itemKeywords?: ItemKeywordAudit }): KeywordAudit | null {
  return s.metrics.keywords && s.itemKeywords ? { query: s.metrics.keywords, item: s.itemKeywords } : null;
}
