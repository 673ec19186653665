/**
 * The one keyword normalisation used everywhere (indexes, generators, rewards, HTTP).
 *
 * 1. Unicode NFKC, then lower case (locale-independent). Lone UTF-16 surrogates (which
 *    cannot be stored as UTF-8) become U+FFFD.
 * 2. Any run of white space or control characters (including tabs, newlines and NUL)
 *    becomes one space.
 * 3. Punctuation and symbols at either edge of the keyword, and at the edges of each
 *    word, are trimmed ("(cancer)," -> "cancer"; "co-evolution" keeps its hyphen).
 * 4. Limits for ordinary keywords: at most KEYWORD_MAX_WORDS words and
 *    KEYWORD_MAX_CHARS characters after steps 1-3; a longer keyword is rejected
 *    (normalizeKeyword returns null). The self keyword (item title or raw query text)
 *    is exempt from the limits: use normalizeSelf.
 */
export const KEYWORD_MAX_WORDS = 8;
export const KEYWORD_MAX_CHARS = 100;

const EDGE = /^[\p{P}\p{S}]+|[\p{P}\p{S}]+$/gu;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const SPACE_OR_CONTROL = /[\s\p{Cc}]+/u;

function cleanWords(s: string): string[] {
  const words: string[] = [];
  for (const raw of s.replace(LONE_SURROGATE, '\uFFFD').normalize('NFKC').toLowerCase().split(SPACE_OR_CONTROL)) {
    const w = raw.replace(EDGE, '');
    if (w.length > 0) words.push(w);
  }
  return words;
}

/** Normalise one keyword; null when it is empty or over the limits. */
export function normalizeKeyword(s: string): string | null {
  const words = cleanWords(s);
  if (words.length === 0 || words.length > KEYWORD_MAX_WORDS) return null;
  const k = words.join(' ');
  return k.length > KEYWORD_MAX_CHARS ? null : k;
}

/** Normalise a self keyword (item title, raw query text): same rules, no limits. */
export function normalizeSelf(s: string): string {
  return cleanWords(s).join(' ');
}

/**
 * Normalise and de-duplicate a keyword list, keeping first occurrences in order.
 * Returns the kept keywords and how many inputs were rejected by the limits.
 */
export function normalizeKeywordSet(list: readonly string[]): { keywords: string[]; rejected: number } {
  const seen = new Set<string>();
  const keywords: string[] = [];
  let rejected = 0;
  for (const s of list) {
    const k = normalizeKeyword(s);
    if (k === null) {
      rejected++;
      continue;
    }
    if (!seen.has(k)) {
      seen.add(k);
      keywords.push(k);
    }
  }
  return { keywords, rejected };
}

/** The words of a normalised keyword (BM25 treats each side as a bag of these). */
export function keywordWords(k: string): string[] {
  return k.length === 0 ? [] : k.split(' ');
}
