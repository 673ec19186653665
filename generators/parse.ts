/**
 * Tolerant parsing of a model's keyword output. Reasoning comes out first: every
 * `<think>…</think>` (or `<thinking>…</thinking>`) block, whatever precedes a closing tag
 * whose opening tag was in the prompt, and an opening tag never closed (reasoning cut off)
 * with all after it. Then accepted, in order:
 * 1. JSON: an object with a `keywords` array (the structured-output schema), or any
 *    array of strings, possibly inside a ```json fence or surrounded by prose;
 * 2. bullet (`-`, `*`, `•`) or numbered (`1.`, `1)`) lines;
 * 3. comma- or semicolon-separated text; 4. one keyword per line.
 * Every keyword is normalised (index/text/normalize.ts) and de-duplicated. Output with no
 * usable keyword, or that looks like prose (long lines), is a format failure.
 */
import { z } from 'zod';
import { normalizeKeywordSet } from '../index/text/normalize.ts';

/** What the parser accepts: a keyword list of any size (the limits are the normaliser's and the layered reward's). */
export const KeywordListSchema = z.object({
  keywords: z.array(z.string().describe('one keyword or short phrase')).describe('the keyword set'),
});

/**
 * What a server is asked for (`response_format: json_schema`): at most `maxItems`
 * keywords of at most `maxLength` characters each. A grammar built from an unbounded
 * schema lets a small model write one string until max_tokens; with the bounds the
 * answer always closes. Lower case and distinct keywords are the client's work (the
 * normaliser), as grammars such as llama.cpp's have no `pattern` or `uniqueItems`.
 */
export function boundedKeywordListSchema(maxItems: number, maxLength: number) {
  if (!(Number.isInteger(maxItems) && maxItems >= 1) || !(Number.isInteger(maxLength) && maxLength >= 1)) {
    throw new RangeError(`keyword schema bounds must be positive integers, got ${maxItems} items of ${maxLength} characters`);
  }
  return z.object({
    keywords: z
      .array(z.string().min(1).max(maxLength).describe('one keyword or short phrase, lower case'))
      .min(1)
      .max(maxItems)
      .describe('the keyword set'),
  });
}

export interface ParsedKeywords {
  ok: boolean;
  keywords: string[];
  /** How the output was read. */
  via: 'json' | 'list' | 'separated' | 'lines' | 'none';
}

function stringsFromJson(v: unknown): string[] | null {
  if (Array.isArray(v)) return v.every((x) => typeof x === 'string') ? (v as string[]) : null;
  if (v && typeof v === 'object') {
    const parsed = KeywordListSchema.safeParse(v);
    if (parsed.success) return parsed.data.keywords;
    for (const val of Object.values(v)) {
      if (Array.isArray(val) && val.length > 0 && val.every((x) => typeof x === 'string')) return val as string[];
    }
  }
  return null;
}

function tryJson(s: string): string[] | null {
  const candidates: string[] = [s];
  const fence = /```(?:json)?\s*([\s\S]*?)```/i.exec(s);
  if (fence) candidates.push(fence[1]);
  const ob = s.indexOf('{');
  const oe = s.lastIndexOf('}');
  if (ob >= 0 && oe > ob) candidates.push(s.slice(ob, oe + 1));
  const ab = s.indexOf('[');
  const ae = s.lastIndexOf(']');
  if (ab >= 0 && ae > ab) candidates.push(s.slice(ab, ae + 1));
  for (const c of candidates) {
    try {
      const r = stringsFromJson(JSON.parse(c.trim()));
      if (r) return r;
    } catch {
      /* not JSON */
    }
  }
  return null;
}

const BULLET = /^\s*(?:[-*•·]|\d{1,3}[.)]|\(\d{1,3}\))\s+(.+)$/;
/** A keyword line longer than this many words is prose, not a keyword. */
const MAX_LINE_WORDS = 8;
/** Sentence punctuation followed by a space or the end: with a longer segment, the text is prose. */
const SENTENCE_END = /[.!?](\s|$)/;
const PROSE_SEGMENT_WORDS = 4;
function looksLikeProse(text: string, items: readonly string[]): boolean {
  return SENTENCE_END.test(text) && items.some((x) => x.split(/\s+/).length >= PROSE_SEGMENT_WORDS);
}

function finish(list: string[], via: ParsedKeywords['via']): ParsedKeywords {
  const { keywords } = normalizeKeywordSet(list);
  return keywords.length > 0 ? { ok: true, keywords, via } : { ok: false, keywords: [], via: 'none' };
}

const THINK_BLOCK = /<(think|thinking)>[\s\S]*?<\/\1>/gi;
const THINK_CLOSE = /<\/(think|thinking)>/gi;
const THINK_OPEN = /<(think|thinking)>/i;

/** The output without its reasoning (see the top of this file). */
export function stripReasoning(raw: string): string {
  let s = raw.replace(THINK_BLOCK, '\n');
  let end = -1;
  for (const m of s.matchAll(THINK_CLOSE)) end = m.index + m[0].length;
  if (end >= 0) s = s.slice(end);
  const open = THINK_OPEN.exec(s);
  return open ? s.slice(0, open.index) : s;
}

export function parseKeywordOutput(raw: string): ParsedKeywords {
  const s = stripReasoning(raw).trim();
  if (s.length === 0) return { ok: false, keywords: [], via: 'none' };
  const json = tryJson(s);
  if (json) return finish(json, 'json');
  if (/^\s*[[{]/.test(s)) return { ok: false, keywords: [], via: 'none' }; // broken JSON
  const lines = s
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  const bullets = lines.map((l) => BULLET.exec(l)?.[1]).filter((x): x is string => x !== undefined);
  if (bullets.length > 0 && bullets.length >= lines.length / 2) {
    const items = bullets.flatMap((b) => b.split(/[;,]/)).map((x) => x.trim());
    if (items.every((x) => x.split(/\s+/).length <= MAX_LINE_WORDS)) return finish(items, 'list');
    return { ok: false, keywords: [], via: 'none' };
  }
  const body = lines.filter((l) => !/^(keywords?|here (are|is)\b.*):?$/i.test(l) && !/:$/.test(l));
  const joined = body.join('\n');
  if (looksLikeProse(joined, joined.split(/[,;\n]/))) return { ok: false, keywords: [], via: 'none' };
  if (/[,;]/.test(joined)) {
    const items = joined
      .split(/[,;\n]/)
      .map((x) => x.replace(/^keywords?:\s*/i, '').trim())
      .filter((x) => x.length > 0);
    if (items.length >= 2 && items.every((x) => x.split(/\s+/).length <= MAX_LINE_WORDS)) return finish(items, 'separated');
    return { ok: false, keywords: [], via: 'none' };
  }
  if (body.length > 0 && body.every((l) => l.split(/\s+/).length <= MAX_LINE_WORDS)) return finish(body, 'lines');
  return { ok: false, keywords: [], via: 'none' };
}
