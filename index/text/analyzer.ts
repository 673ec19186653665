/**
 * Analyzers: how a normalised keyword becomes the key it is matched on.
 *
 * Keywords keep their surface form (normalize.ts) for display, storage and the LLM
 * path; matching, postings, BM25 words and rewards use the analysed key:
 *   - `none`: the key is the normalised surface form;
 *   - `english`: every word of the normalised keyword is reduced by the Porter2
 *     (Snowball English) stemmer, word by word; stop words are kept, so multi-word
 *     keywords keep their shape ("quality of life" → "qualiti of life",
 *     "statins" → "statin").
 * Stemming a word never adds or removes a word, so BM25 document lengths (in words)
 * are the same under both analyzers.
 *
 * `textTokens` is the one tokenizer for running text (BM25 over raw item text, the
 * relevance model): lower-case runs of letters and digits, English stop words
 * (wink-nlp-utils' list) removed; analysed the same way when an analyzer is given.
 */
import stem from 'wink-porter2-stemmer';
import { boundedMemo } from '../core/memo.ts';
// The stop-word filter alone: the package's entry point also loads an English language
// model (wink-eng-lite-web-model, ~0.37 s at start-up) that nothing here uses.
import removeWords from 'wink-nlp-utils/src/tokens-remove-words.js';

export const ANALYZERS = ['none', 'english'] as const;
export type AnalyzerName = (typeof ANALYZERS)[number];
export const DEFAULT_ANALYZER: AnalyzerName = 'english';

export interface Analyzer {
  readonly name: AnalyzerName;
  /** The analysed form of one word of a normalised keyword. */
  word(w: string): string;
  /** The match key of a normalised keyword (or self keyword). */
  key(normalized: string): string;
  /** The same key without remembering it (for strings seen once, or memoised by the caller). */
  keyOnce(normalized: string): string;
}

const MEMO_MAX = 1 << 18;

function english(): Analyzer {
  const word = boundedMemo(stem, MEMO_MAX);
  const keyOnce = (k: string): string => (k.length === 0 ? k : k.indexOf(' ') < 0 ? word(k) : k.split(' ').map(word).join(' '));
  return { name: 'english', word, key: boundedMemo(keyOnce, MEMO_MAX), keyOnce };
}

const NONE: Analyzer = Object.freeze({ name: 'none' as const, word: (w: string) => w, key: (k: string) => k, keyOnce: (k: string) => k });
let ENGLISH: Analyzer | null = null;

export function isAnalyzerName(x: unknown): x is AnalyzerName {
  return typeof x === 'string' && (ANALYZERS as readonly string[]).includes(x);
}

/** The analyzer of a name (one shared, memoised instance per name and thread). */
export function getAnalyzer(name: AnalyzerName = DEFAULT_ANALYZER): Analyzer {
  if (name === 'none') return NONE;
  if (name === 'english') return (ENGLISH ??= english());
  throw new Error(`unknown analyzer ${JSON.stringify(name)} (expected one of ${ANALYZERS.join(', ')})`);
}

/** Lower-case letter/digit runs of running text, English stop words removed, analysed word by word. */
export function textTokens(text: string, analyzer: Analyzer = NONE): string[] {
  const words = text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0);
  const kept = removeWords(words);
  return analyzer.name === 'none' ? kept : kept.map((w) => analyzer.word(w));
}
