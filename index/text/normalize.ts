/**
 * The one keyword normalisation used everywhere (indexes, generators, rewards, HTTP).
 *
 * 1. Unicode format characters (general category Cf: zero-width space and joiners,
 *    bidirectional controls such as U+202E, soft hyphen, BOM, tags) are dropped: they are
 *    invisible, so two keywords that look the same are the same. Then Unicode NFKC, then
 *    lower case (locale-independent). Lone UTF-16 surrogates (which cannot be stored as
 *    UTF-8) become U+FFFD.
 * 2. Any run of white space or control characters (including tabs, newlines and NUL)
 *    becomes one space.
 * 3. Punctuation and symbols at either edge of the keyword, and at the edges of each
 *    word, are trimmed ("(cancer)," -> "cancer"; "co-evolution" keeps its hyphen).
 * 4. Limits for ordinary keywords: at most KEYWORD_MAX_WORDS words and
 *    KEYWORD_MAX_CHARS characters after steps 1-3; a longer keyword is rejected
 *    (normalizeKeyword returns null). The self keyword (item title or raw query text)
 *    is exempt from the limits: use normalizeSelf.
 */
import { getAnalyzer, type Analyzer, type AnalyzerName } from './analyzer.ts';
import { boundedMemo } from '../core/memo.ts';

export const KEYWORD_MAX_WORDS = 8;
export const KEYWORD_MAX_CHARS = 100;

const EDGE = /^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const SPACE_OR_CONTROL = /[\s\p{Cc}]+/u;
const FORMAT = /\p{Cf}/gu;

function cleanWords(s: string): string[] {
  const words: string[] = [];
  for (const raw of s.replace(LONE_SURROGATE, '\uFFFD').replace(FORMAT, '').normalize('NFKC').toLowerCase().split(SPACE_OR_CONTROL)) {
    const w = raw.replace(EDGE, '');
    if (w.length > 0) words.push(w);
  }
  return words;
}

/**
 * Already normalised ASCII: lower-case letters and digits, words joined by single spaces.
 * Steps 1–3 leave such a string unchanged, so it skips them (only the limits apply).
 */
const NORMALIZED_ASCII = /^[a-z0-9]+(?: [a-z0-9]+)*$/;

function spaces(s: string): number {
  let c = 0;
  for (let i = s.indexOf(' '); i >= 0; i = s.indexOf(' ', i + 1)) c++;
  return c;
}

/** Normalise one keyword; null when it is empty or over the limits. */
export function normalizeKeyword(s: string): string | null {
  if (NORMALIZED_ASCII.test(s)) return s.length > KEYWORD_MAX_CHARS || spaces(s) >= KEYWORD_MAX_WORDS ? null : s;
  const words = cleanWords(s);
  if (words.length === 0 || words.length > KEYWORD_MAX_WORDS) return null;
  const k = words.join(' ');
  return k.length > KEYWORD_MAX_CHARS ? null : k;
}

/** Normalise a self keyword (item title, raw query text): same rules, no limits. */
export function normalizeSelf(s: string): string {
  if (NORMALIZED_ASCII.test(s)) return s;
  return cleanWords(s).join(' ');
}

/**
 * Normalise and de-duplicate a keyword list, keeping first occurrences in order.
 * Returns the kept keywords and how many inputs were rejected by the limits.
 */
export function normalizeKeywordSet(list: readonly string[]): { keywords: string[]; rejected: number } {
  return PLAIN.set(list);
}

/**
 * A keyword normaliser: the rules above behind one object, with a memo of raw →
 * normalised keyword strings. Keyword strings repeat (a policy samples from a limited
 * vocabulary, a writer sees the same phrase on many entities), and NFKC plus the regexes
 * cost far more than a Map look-up, so every component that normalises keywords in bulk
 * takes one of these instead of keeping a memo of its own.
 *
 * Two forms of a keyword: `keyword(raw)` is its normalised surface form (stored, shown,
 * given to LLMs); `key(raw)` is the key it is matched on — the surface form passed
 * through the normaliser's analyzer (analyzer.ts: `english` stems word by word, `none`
 * keeps the surface form). Every index, reward and probe derives its match key here.
 */
export interface KeywordNormalizer {
  readonly analyzer: Analyzer;
  /** One keyword's normalised surface form (null: empty or over the limits), memoised. */
  keyword(raw: string): string | null;
  /** One keyword's match key (null: empty or over the limits), memoised. */
  key(raw: string): string | null;
  /** A self keyword's surface form (item title, raw query text): same rules, no limits, not memoised (mostly unique strings). */
  self(raw: string): string;
  /** A self keyword's match key. */
  selfKey(raw: string): string;
  /**
   * A list normalised and de-duplicated by match key (the first surface form of each key
   * kept, in order) with the count of rejected inputs.
   */
  set(list: readonly string[]): { keywords: string[]; rejected: number };
}

export interface KeywordNormalizerOptions {
  /** Raw strings remembered before the memo starts over; 0 disables it. Default 2^18. */
  memo?: number;
  /** The analyzer of `key()` (default `none`: the key is the surface form). */
  analyzer?: AnalyzerName;
}

export const DEFAULT_NORMALIZER_MEMO = 1 << 18;

export function makeKeywordNormalizer(opts: KeywordNormalizerOptions = {}): KeywordNormalizer {
  const max = opts.memo ?? DEFAULT_NORMALIZER_MEMO;
  const analyzer = getAnalyzer(opts.analyzer ?? 'none');
  const plain = analyzer.name === 'none';
  const keyword = boundedMemo(normalizeKeyword, max);
  const key = plain
    ? keyword
    : (raw: string): string | null => {
        const k = keyword(raw);
        return k === null ? null : analyzer.key(k);
      };
  return {
    analyzer,
    keyword,
    key,
    self: normalizeSelf,
    selfKey: plain ? normalizeSelf : (raw: string) => analyzer.key(normalizeSelf(raw)),
    set(list) {
      const keywords: string[] = [];
      const keys: string[] = [];
      let rejected = 0;
      // Linear scans beat a Set for the usual ≤ 32 keywords; longer lists use a Set.
      const seen = list.length > 32 ? new Set<string>() : null;
      for (const raw of list) {
        const k = keyword(raw);
        if (k === null) {
          rejected++;
          continue;
        }
        const m = plain ? k : analyzer.key(k);
        if (seen) {
          if (seen.has(m)) continue;
          seen.add(m);
        } else if (keys.includes(m)) continue;
        keys.push(m);
        keywords.push(k);
      }
      return { keywords, rejected };
    },
  };
}

/** The memo-free normaliser behind the plain functions. */
const PLAIN = makeKeywordNormalizer({ memo: 0 });

const threadNormalizers = new Map<AnalyzerName, KeywordNormalizer>();
/** This thread's memoised normaliser for an analyzer, shared by the reward paths (one memo per thread and analyzer). */
export function sharedKeywordNormalizer(analyzer: AnalyzerName = 'none'): KeywordNormalizer {
  let n = threadNormalizers.get(analyzer);
  if (!n) threadNormalizers.set(analyzer, (n = makeKeywordNormalizer({ analyzer })));
  return n;
}

/** The words of a normalised keyword (BM25 treats each side as a bag of these). */
export function keywordWords(k: string): string[] {
  return k.length === 0 ? [] : k.split(' ');
}
