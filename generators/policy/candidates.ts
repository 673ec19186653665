/**
 * Candidate keywords and their features for the embedded (item-side) policy.
 *
 * The 1–3-word n-grams of title + text (text cut to ITEM_TEXT_BUDGET) with no stop word at
 * either edge, plus the normalised title — or, with a shared vocabulary (vocabulary.ts, the
 * default of new runs), only the n-grams in it and no title; at most `maxItemCandidates`,
 * chosen by a fixed tf·idf prior. With a query side attached (the item half-rounds), also the keywords the
 * frozen query generation offers the item — those of training queries that judge it
 * relevant or rank it high — with their own dense features (qJudged, qRanked, qPrec,
 * fromQuery). (The query side is the query planner, generators/planner.)
 *
 * Dense features (DENSE, fixed order) are documented next to their names; sparse features
 * are one per keyword ("k␁<kw>"), with value 1.
 */
import { bm25Idf } from '../../index/text/bm25.ts';
import { KEYWORD_MAX_CHARS, KEYWORD_MAX_WORDS, keywordWords, normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import { ITEM_TEXT_BUDGET } from '../prompts.ts';
import type { GenerateInput } from '../types.ts';
import type { OppositeIndex } from './opposite.ts';
import { STOP_WORDS } from './stopwords.ts';
import type { Vocabulary } from './vocabulary.ts';

export const DENSE = [
  'len1', // 1-word keyword
  'len2', // 2-word keyword
  'len3', // 3+-word keyword
  'self', // the input's own string (title / query)
  'ngram', // an n-gram of the input
  'inTitle', // occurs in the item title
  'logTf', // log(1 + occurrences in the input)
  'firstPos', // first occurrence / input length, 1 when absent
  'idf', // mean word idf among the items / 10
  'inOpp', // present in the opposite (query) index's vocabulary
  'oppDf', // log(1 + df on the opposite index) / log(1 + N)
  'overlap', // share of its words that occur in the input
  'borrowed', // not an n-gram of the input nor its title (offered by the query side only)
  'qJudged', // log(1 + training queries judging the item relevant that offer it) (item side, query-side keywords)
  'qRanked', // log(1 + training queries ranking the item high that offer it) (item side)
  'qPrec', // judging queries offering it / training queries carrying it in the query generation (item side)
  'fromQuery', // offered by the query side (item side)
] as const;
/** The query-side dense features (trainable with grpoParams 'sparse+query' and 'query'). */
export const QUERY_SIDE_FEATURES: readonly (typeof DENSE)[number][] = ['qJudged', 'qRanked', 'qPrec', 'fromQuery'];
export const D = DENSE.length;
export const DI: Record<(typeof DENSE)[number], number> = Object.fromEntries(DENSE.map((n, i) => [n, i])) as never;

export interface CandidateConfig {
  maxNgram: number;
  maxItemCandidates: number;
  /** Most query-side keywords offered per item. */
  maxQuerySide: number;
}
export const DEFAULT_CANDIDATES: CandidateConfig = {
  maxNgram: 3,
  maxItemCandidates: 64,
  maxQuerySide: 48,
};

/**
 * What the item side borrows from the frozen query side: for an item id, the keywords
 * the query generation offers it (from training queries that judge the item relevant or
 * rank it high), each with how many judging and high-ranking queries offer it and the
 * share of the keyword's carriers that judge the item relevant.
 */
export interface QuerySide {
  offers(itemId: string): readonly QueryOffer[];
}
export interface QueryOffer {
  keyword: string;
  judged: number;
  ranked: number;
  precision: number;
}

/** Word statistics of the items (for the idf feature). */
export interface WordStats {
  n: number;
  df: Map<string, number>;
}

export interface RawCandidate {
  keyword: string;
  dense: Float64Array;
}

export function inputWords(input: GenerateInput): { title: string[]; text: string[] } {
  const t = normalizeSelf(input.text.slice(0, ITEM_TEXT_BUDGET));
  const title = normalizeSelf(input.title ?? '');
  return { title: title ? title.split(' ') : [], text: t ? t.split(' ') : [] };
}

export function selfKeyword(input: GenerateInput): string {
  return normalizeSelf(input.title ?? '');
}

function wordIdf(stats: WordStats | null, w: string): number {
  if (!stats || stats.n === 0) return 1;
  return bm25Idf(stats.n, stats.df.get(w) ?? 0);
}

interface Gram {
  tf: number;
  first: number;
  inTitle: boolean;
  /** Words and mean word idf of the keyword (computed once per distinct n-gram). */
  words: string[];
  meanIdf: number;
}

/**
 * Words (from normalizeSelf) that normalizeKeyword leaves unchanged. An n-gram of such
 * words joined by single spaces is already a normalised keyword when it has at most
 * KEYWORD_MAX_WORDS words and KEYWORD_MAX_CHARS characters, so the per-n-gram
 * normalisation (the extraction's hot spot) is done once per distinct word.
 */
const STABLE = new Map<string, boolean>();
function stableWord(w: string): boolean {
  let v = STABLE.get(w);
  if (v === undefined) {
    v = normalizeKeyword(w) === w;
    if (STABLE.size >= 1_000_000) STABLE.clear();
    STABLE.set(w, v);
  }
  return v;
}

/**
 * Tokens that cannot start or end a keyword of the shared vocabulary (vocabulary.ts) beside
 * the stop words: `num`, the placeholder some preprocessed collections (NFCorpus) put for
 * every number. A word without a letter (a number, an item id) cannot be in one at all.
 */
const PLACEHOLDERS: ReadonlySet<string> = new Set(['num']);
const LETTER = /\p{L}/u;
const LETTERS = new Map<string, boolean>();
function hasLetter(w: string): boolean {
  let v = LETTERS.get(w);
  if (v === undefined) {
    v = LETTER.test(w);
    if (LETTERS.size >= 1_000_000) LETTERS.clear();
    LETTERS.set(w, v);
  }
  return v;
}

/** The 1–maxN-grams of a word sequence into `into` (tf, first position, whether in the title). `strict`: the shared vocabulary's rules (no word without a letter; no placeholder at an edge). */
function ngrams(
  words: string[],
  maxN: number,
  into: Map<string, Gram>,
  offset: number,
  inTitle: boolean,
  idfOf: (w: string) => number,
  strict: boolean,
): void {
  const maxWords = Math.min(maxN, KEYWORD_MAX_WORDS);
  const edge = (w: string) => STOP_WORDS.has(w) || (strict && PLACEHOLDERS.has(w));
  for (let i = 0; i < words.length; i++) {
    if (edge(words[i]) || (strict && !hasLetter(words[i]))) continue;
    let k = '';
    let stable = true;
    for (let n = 1; n <= maxN && i + n <= words.length; n++) {
      const last = words[i + n - 1];
      if (strict && !hasLetter(last)) break;
      k = n === 1 ? last : k + ' ' + last;
      stable &&= stableWord(last);
      if (edge(last)) continue;
      let key: string | null = k;
      if (!stable || n > maxWords || k.length > KEYWORD_MAX_CHARS) key = normalizeKeyword(k);
      if (key === null) continue;
      const g = into.get(key);
      if (g) {
        g.tf++;
        g.inTitle ||= inTitle;
      } else {
        const ws = key === k ? words.slice(i, i + n) : keywordWords(key);
        let sum = 0;
        for (const w of ws) sum += idfOf(w);
        into.set(key, { tf: 1, first: offset + i, inTitle, words: ws, meanIdf: sum / Math.max(1, ws.length) });
      }
    }
  }
}

/** An item's n-grams (title and text, the text cut to ITEM_TEXT_BUDGET) with their counts and content words (stop words and placeholders out). */
export function itemGrams(
  input: GenerateInput,
  maxN: number,
  strict: boolean,
): Map<string, { tf: number; words: string[]; content: string[] }> {
  const { title, text } = inputWords(input);
  const grams = new Map<string, Gram>();
  ngrams(title, maxN, grams, 0, true, () => 0, strict);
  ngrams(text, maxN, grams, title.length, false, () => 0, strict);
  const out = new Map<string, { tf: number; words: string[]; content: string[] }>();
  for (const [k, g] of grams)
    out.set(k, { tf: g.tf, words: g.words, content: g.words.filter((w) => !STOP_WORDS.has(w) && !PLACEHOLDERS.has(w)) });
  return out;
}

/**
 * An item's candidates from its own text (n-grams, capped by a tf·idf prior, and its title
 * outside the shared vocabulary), in order, with their dense features; what `withQuerySide`
 * adds the query side's offers to. It does not depend on the query side, so a policy keeps it
 * while the query side changes (model.ts).
 */
export interface TextCandidates {
  /** Candidate keyword → dense features, in candidate order. Not to be changed: withQuerySide copies what it changes. */
  readonly features: ReadonlyMap<string, Float64Array>;
  /** The dense features of a keyword not among them (an offer the text does not hold). */
  readonly borrowed: (k: string) => Float64Array;
}

export function textCandidates(
  input: GenerateInput,
  cfg: CandidateConfig,
  stats: WordStats | null,
  opposite: OppositeIndex | null,
  vocabulary: Vocabulary | null = null,
): TextCandidates {
  const strict = vocabulary !== null;
  const { title, text } = inputWords(input);
  const all = [...title, ...text];
  const len = Math.max(1, all.length);
  const wordSet = new Set(all);
  const idfMemo = new Map<string, number>();
  const idfOf = (w: string) => {
    let v = idfMemo.get(w);
    if (v === undefined) idfMemo.set(w, (v = wordIdf(stats, w)));
    return v;
  };
  const grams = new Map<string, Gram>();
  ngrams(title, cfg.maxNgram, grams, 0, true, idfOf, strict);
  ngrams(text, cfg.maxNgram, grams, title.length, false, idfOf, strict);
  // With a shared vocabulary, only its phrases; the title is not a keyword (it is {i}, matched by the rule).
  if (vocabulary) for (const k of [...grams.keys()]) if (!vocabulary.has(k)) grams.delete(k);
  const self = vocabulary ? '' : selfKeyword(input);
  const out = new Map<string, Float64Array>();
  const meanIdf = (k: string) => {
    const ws = keywordWords(k);
    let s = 0;
    for (const w of ws) s += idfOf(w);
    return s / Math.max(1, ws.length);
  };
  const fresh = (k: string, g?: Gram): Float64Array => {
    const f = new Float64Array(D);
    const ws = g ? g.words : keywordWords(k);
    f[ws.length === 1 ? DI.len1 : ws.length === 2 ? DI.len2 : DI.len3] = 1;
    f[DI.idf] = (g ? g.meanIdf : meanIdf(k)) / 10;
    f[DI.firstPos] = 1;
    let ov = 0;
    for (const w of ws) if (wordSet.has(w)) ov++;
    f[DI.overlap] = ov / Math.max(1, ws.length);
    if (opposite) {
      const df = opposite.keywordDf(k);
      f[DI.inOpp] = df > 0 ? 1 : 0;
      f[DI.oppDf] = opposite.scaledDf(k);
    }
    f[DI.borrowed] = 1;
    return f;
  };
  const base = (k: string, g?: Gram): Float64Array => {
    let f = out.get(k);
    if (!f) out.set(k, (f = fresh(k, g)));
    return f;
  };
  // Input n-grams, capped by a tf·idf prior.
  let gramList = [...grams.entries()];
  const prior = (g: Gram) => Math.log1p(g.tf) * g.meanIdf * (g.inTitle ? 1.5 : 1) * (1 + 0.2 * (g.words.length - 1));
  const cap = cfg.maxItemCandidates;
  if (gramList.length > cap) {
    gramList = gramList
      .map((e) => [e, prior(e[1])] as const)
      .sort((a, b) => b[1] - a[1] || (a[0][0] < b[0][0] ? -1 : 1))
      .slice(0, cap)
      .map((x) => x[0]);
  }
  for (const [k, g] of gramList) {
    const f = base(k, g);
    f[DI.ngram] = 1;
    f[DI.borrowed] = 0;
    f[DI.inTitle] = g.inTitle ? 1 : 0;
    f[DI.logTf] = Math.log1p(g.tf);
    f[DI.firstPos] = g.first / len;
  }
  if (self.length > 0) {
    const f = base(self);
    f[DI.self] = 1;
    f[DI.borrowed] = 0;
    f[DI.inTitle] = 1;
    f[DI.firstPos] = 0;
    if (normalizeKeyword(self) === null) out.delete(self); // over the keyword limits: cannot be emitted
  }
  return { features: out, borrowed: (k) => fresh(k) };
}

/** An item's candidates: its text's, then the query side's offers (features copied where an offer meets a text candidate), in order. */
export function withQuerySide(
  text: TextCandidates,
  input: GenerateInput,
  cfg: CandidateConfig,
  querySide: QuerySide | null,
  vocabulary: Vocabulary | null = null,
): RawCandidate[] {
  if (!querySide) return [...text.features].map(([keyword, dense]) => ({ keyword, dense }));
  const out = new Map(text.features);
  const copied = new Set<string>();
  for (const o of querySide.offers(input.id).slice(0, cfg.maxQuerySide)) {
    if (normalizeKeyword(o.keyword) !== o.keyword || (vocabulary && !vocabulary.has(o.keyword))) continue;
    let f = out.get(o.keyword);
    if (!f) {
      out.set(o.keyword, (f = text.borrowed(o.keyword)));
      copied.add(o.keyword);
    } else if (!copied.has(o.keyword)) {
      out.set(o.keyword, (f = Float64Array.from(f)));
      copied.add(o.keyword);
    }
    f[DI.qJudged] = Math.log1p(o.judged);
    f[DI.qRanked] = Math.log1p(o.ranked);
    f[DI.qPrec] = o.precision;
    f[DI.fromQuery] = 1;
  }
  return [...out.entries()].map(([keyword, dense]) => ({ keyword, dense }));
}
