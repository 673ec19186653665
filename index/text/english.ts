/**
 * Running-text analysis as Lucene users know it: the chain of Lucene's `EnglishAnalyzer`
 * (and Anserini's / Pyserini's default `DefaultEnglishAnalyzer` with Porter stemming):
 *
 *   StandardTokenizer (Unicode UAX #29 word boundaries) → EnglishPossessiveFilter
 *   (a trailing 's, ’s or ＇s removed) → LowerCaseFilter → StopFilter (Lucene's 33-word
 *   English stop set, `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`) → PorterStemFilter
 *   (Porter's original algorithm, "v1", not Snowball's Porter2).
 *
 * The tokenizer here is the platform's UAX #29 word segmentation (`Intl.Segmenter`, ICU),
 * keeping word-like segments, with ideographs and hiragana one token per character as
 * Lucene's StandardTokenizer emits them, pictographs (emoji, ®, ™) kept as tokens as Lucene
 * keeps them, and tokens cut at Lucene's 255 characters. ICU and Lucene's JFlex grammar
 * implement the same rules; where they may still part (dictionary segmentation of Thai,
 * Lao, Khmer, Myanmar; emoji sequences with joiners) the bench
 * `npm run bench -- crosscheck` counts the differing tokens against Lucene's analyzer
 * itself on the shipped collections.
 *
 * `TEXT_ANALYSES` names the two analyses of running text cogr has: `lucene` (this chain)
 * and `wink` (index/text/analyzer.ts textTokens: lower-case letter/digit runs, wink-nlp-utils'
 * stop words, no stemming in the BM25 baselines, Porter2 in the relevance model).
 */
import { stemmer } from 'stemmer';
import { boundedMemo } from '../core/memo.ts';

export const TEXT_ANALYSES = ['lucene', 'wink'] as const;
export type TextAnalysis = (typeof TEXT_ANALYSES)[number];

export function isTextAnalysis(x: unknown): x is TextAnalysis {
  return typeof x === 'string' && (TEXT_ANALYSES as readonly string[]).includes(x);
}

/** Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`: 33 words. */
export const LUCENE_ENGLISH_STOP_WORDS: ReadonlySet<string> = new Set([
  'a',
  'an',
  'and',
  'are',
  'as',
  'at',
  'be',
  'but',
  'by',
  'for',
  'if',
  'in',
  'into',
  'is',
  'it',
  'no',
  'not',
  'of',
  'on',
  'or',
  'such',
  'that',
  'the',
  'their',
  'then',
  'there',
  'these',
  'they',
  'this',
  'to',
  'was',
  'will',
  'with',
]);

const MAX_TOKEN = 255;
const SPLIT_CHARS = /[\p{Script=Han}\p{Script=Hiragana}]/u;
const PICTOGRAPH = /\p{Extended_Pictographic}/u;

let segmenter: Intl.Segmenter | null = null;

/**
 * Node 20's `Intl.Segmenter` takes time that grows faster than the text's length (about
 * 2.4 µs a character at 10 KB, 18 µs at 100 KB, and 200 KB never ends in practice), so
 * text is segmented in pieces of about SEGMENT_CHUNK characters (0.3 µs a character:
 * linear). A piece ends only where UAX #29 always breaks and no rule looks across:
 * after an ASCII white-space character and before a printable ASCII one (no rule joins
 * across white space except WB3/WB3d, between white space, and WB4, before an extending
 * or format character, and WB3c, a joiner before a pictograph). Normal text always has
 * such a place within a word's length, so its tokens are those of the whole text
 * (test/index/english.test.ts checks every item of the shipped collections). Text
 * without one over MAX_SCAN characters (a run of tens of KB without ASCII white space)
 * is cut after any white space character, else at the nearest code point boundary.
 */
const SEGMENT_CHUNK = 512;
const MAX_SCAN = 8 * SEGMENT_CHUNK;

function isAsciiSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d || c === 0x0c || c === 0x0b;
}

const SPACE = /\s/;
const JOINS_BACK = /[\p{M}\p{Cf}\u200d]/u;

/** The end of the piece of `text` that starts at `from` (see SEGMENT_CHUNK). */
function segmentPieceEnd(text: string, from: number): number {
  const n = text.length;
  if (n - from <= SEGMENT_CHUNK) return n;
  const safe = (i: number): boolean => {
    const c = text.charCodeAt(i);
    return c > 0x20 && c < 0x7f && isAsciiSpace(text.charCodeAt(i - 1));
  };
  // The last such place before the target, else the first after it.
  const target = from + SEGMENT_CHUNK;
  for (let i = target; i > from + SEGMENT_CHUNK / 4; i--) if (safe(i)) return i;
  const limit = Math.min(n, from + MAX_SCAN);
  for (let i = target + 1; i < limit; i++) if (safe(i)) return i;
  if (limit === n) return n;
  // No ASCII white space: after any white space not followed by a character that joins back.
  for (let i = limit - 1; i > from + 1; i--) {
    if (SPACE.test(text[i - 1]) && !JOINS_BACK.test(text[i]) && !isLowSurrogate(text.charCodeAt(i))) return i;
  }
  return isLowSurrogate(text.charCodeAt(limit)) ? limit - 1 : limit;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** StandardTokenizer's tokens (case kept), segmented piece by piece (linear in the text's length). */
export function standardTokens(text: string): string[] {
  segmenter ??= new Intl.Segmenter('en', { granularity: 'word' });
  const out: string[] = [];
  for (let from = 0; from < text.length;) {
    const to = segmentPieceEnd(text, from);
    pieceTokens(segmenter, from === 0 && to === text.length ? text : text.slice(from, to), out);
    from = to;
  }
  return out;
}

function pieceTokens(seg: Intl.Segmenter, text: string, out: string[]): void {
  for (const s of seg.segment(text)) {
    const w = s.segment;
    if (!s.isWordLike) {
      // Lucene keeps emoji and other pictographs (®, ™, ©) as tokens; ICU does not call them words.
      if (PICTOGRAPH.test(w)) out.push(w);
      continue;
    }
    if (SPLIT_CHARS.test(w)) {
      // Lucene emits each ideograph and hiragana character alone; other runs stay whole.
      let run = '';
      for (const ch of w) {
        if (SPLIT_CHARS.test(ch)) {
          if (run) out.push(run);
          run = '';
          out.push(ch);
        } else run += ch;
      }
      if (run) out.push(run);
      continue;
    }
    if (w.length <= MAX_TOKEN) out.push(w);
    else for (let i = 0; i < w.length; i += MAX_TOKEN) out.push(w.slice(i, i + MAX_TOKEN));
  }
}

/** EnglishPossessiveFilter: a trailing apostrophe (', U+2019 or U+FF07) + s/S removed. */
export function dropPossessive(w: string): string {
  const n = w.length;
  if (n >= 2) {
    const a = w.charCodeAt(n - 2);
    const s = w.charCodeAt(n - 1);
    if ((a === 0x27 || a === 0x2019 || a === 0xff07) && (s === 0x73 || s === 0x53)) return w.slice(0, n - 2);
  }
  return w;
}

/** Porter's (v1) stem of a lower-case word. */
export const porterStem: (w: string) => string = boundedMemo((w: string) => stemmer(w), 1 << 18);

/** Lucene's EnglishAnalyzer tokens of running text (see the file comment). */
export function luceneEnglishTokens(text: string): string[] {
  const out: string[] = [];
  for (const t of standardTokens(text)) {
    const w = dropPossessive(t).toLowerCase();
    if (w.length === 0 || LUCENE_ENGLISH_STOP_WORDS.has(w)) continue;
    out.push(porterStem(w));
  }
  return out;
}
