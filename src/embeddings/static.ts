/**
 * The built-in encoder (`--embeddings static`): all-MiniLM-L6-v2 distilled into a table of
 * one vector per WordPiece token (scripts/distil-static-minilm.py, the model2vec recipe),
 * shipped in `data/embeddings/minilm-static/`. A text's vector is the sum of its tokens'
 * rows, normalised: no Python, no model runtime, about 6 MB, every text encoded in
 * microseconds. It approximates MiniLM's cosines; it is not MiniLM (docs/embeddings.md gives
 * how closely, measured against the model).
 *
 * The tokenizer is BERT's, as the model's tokenizer.json configures it (BertNormalizer with
 * lower case, BertPreTokenizer, WordPiece with "##" continuations and at most 100 characters a
 * word), written here from that description; a fast-tier test holds it to the Python
 * tokenizer's ids on a fixture.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cogrError } from '../../index/core/errors.ts';
import { packageRoot } from '../../index/core/paths.ts';

/** The model name the built-in encoder answers to. */
export const STATIC_MODEL = 'all-MiniLM-L6-v2-static';

const ManifestSchema = z.object({
  format: z.literal(1),
  model: z.string(),
  rows: z.number().int().positive(),
  dims: z.number().int().positive(),
  lowercase: z.literal(true),
  maxTokens: z.number().int().positive(),
  sha256: z.object({ 'vectors.bin': z.string(), 'vocab.txt': z.string() }),
});

export function staticModelDir(): string {
  return join(packageRoot(), 'data', 'embeddings', 'minilm-static');
}

/** Characters BERT treats as punctuation: ASCII's non-alphanumeric printables and Unicode's P* categories. */
function isPunctuation(ch: string, cp: number): boolean {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) return true;
  return /^\p{P}$/u.test(ch);
}

function isWhitespace(ch: string): boolean {
  return ch === ' ' || ch === '\t' || ch === '\n' || ch === '\r' || /^\p{Zs}$/u.test(ch);
}

function isControl(ch: string): boolean {
  if (ch === '\t' || ch === '\n' || ch === '\r') return false;
  return /^[\p{Cc}\p{Cf}\p{Cn}\p{Co}\p{Cs}]$/u.test(ch);
}

function isCjk(cp: number): boolean {
  return (
    (cp >= 0x4e00 && cp <= 0x9fff) ||
    (cp >= 0x3400 && cp <= 0x4dbf) ||
    (cp >= 0x20000 && cp <= 0x2a6df) ||
    (cp >= 0x2a700 && cp <= 0x2b73f) ||
    (cp >= 0x2b740 && cp <= 0x2b81f) ||
    (cp >= 0x2b820 && cp <= 0x2ceaf) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0x2f800 && cp <= 0x2fa1f)
  );
}

/** BertNormalizer (clean text, CJK characters apart, accents stripped, lower case) and BertPreTokenizer: the words. */
export function bertWords(text: string): string[] {
  let clean = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (cp === 0 || cp === 0xfffd || isControl(ch)) continue;
    if (isWhitespace(ch)) clean += ' ';
    else if (isCjk(cp)) clean += ` ${ch} `;
    else clean += ch;
  }
  const folded = clean
    .normalize('NFD')
    .replace(/\p{Mn}/gu, '')
    .toLowerCase();
  const words: string[] = [];
  let cur = '';
  for (const ch of folded) {
    if (isWhitespace(ch)) {
      if (cur) words.push(cur);
      cur = '';
    } else if (isPunctuation(ch, ch.codePointAt(0)!)) {
      if (cur) words.push(cur);
      words.push(ch);
      cur = '';
    } else cur += ch;
  }
  if (cur) words.push(cur);
  return words;
}

export class StaticEncoder {
  readonly model = STATIC_MODEL;
  readonly dims: number;
  readonly maxTokens: number;
  private readonly vocab = new Map<string, number>();
  private readonly unk: number;
  private readonly rows: Int8Array;
  private readonly scales: Float32Array;

  private constructor(dir: string) {
    const at = (f: string) => join(dir, f);
    let manifest: z.infer<typeof ManifestSchema>;
    let vectors: Buffer;
    let vocabText: string;
    try {
      manifest = ManifestSchema.parse(JSON.parse(readFileSync(at('manifest.json'), 'utf8')));
      vectors = readFileSync(at('vectors.bin'));
      vocabText = readFileSync(at('vocab.txt'), 'utf8');
    } catch (e) {
      throw cogrError('DATA_MISSING', `the built-in encoder's files in ${dir} cannot be read: ${(e as Error).message}`, { path: dir });
    }
    for (const [file, body] of [
      ['vectors.bin', vectors],
      ['vocab.txt', Buffer.from(vocabText, 'utf8')],
    ] as const) {
      const sum = createHash('sha256').update(body).digest('hex');
      if (sum !== manifest.sha256[file])
        throw cogrError('DATA_FORMAT', `${at(file)}: SHA-256 ${sum} is not the manifest's ${manifest.sha256[file]}`, { path: at(file) });
    }
    const tokens = vocabText.split('\n');
    if (tokens[tokens.length - 1] === '') tokens.pop();
    if (tokens.length !== manifest.rows)
      throw cogrError('DATA_FORMAT', `${at('vocab.txt')}: ${tokens.length} tokens, the manifest says ${manifest.rows}`, { path: dir });
    if (vectors.length !== manifest.rows * manifest.dims + manifest.rows * 4)
      throw cogrError('DATA_FORMAT', `${at('vectors.bin')}: ${vectors.length} bytes, not ${manifest.rows} × ${manifest.dims} + scales`, {
        path: dir,
      });
    tokens.forEach((t, i) => this.vocab.set(t, i));
    this.unk = this.vocab.get('[UNK]') ?? 0;
    this.dims = manifest.dims;
    this.maxTokens = manifest.maxTokens;
    const q = manifest.rows * manifest.dims;
    this.rows = new Int8Array(vectors.buffer, vectors.byteOffset, q);
    this.scales = new Float32Array(manifest.rows);
    for (let i = 0; i < manifest.rows; i++) this.scales[i] = vectors.readFloatLE(q + 4 * i);
  }

  private static cache = new Map<string, StaticEncoder>();

  /** The shipped table (or another folder written by scripts/distil-static-minilm.py), loaded and checked once a process. */
  static load(dir = staticModelDir()): StaticEncoder {
    let e = StaticEncoder.cache.get(dir);
    if (!e) {
      e = new StaticEncoder(dir);
      StaticEncoder.cache.set(dir, e);
    }
    return e;
  }

  /** WordPiece: greedy longest match, "##" continuations; a word that cannot be cut (or over 100 characters) is [UNK]. */
  private wordPieces(word: string, out: number[]): void {
    const chars = Array.from(word);
    if (chars.length > 100) {
      out.push(this.unk);
      return;
    }
    const pieces: number[] = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found = -1;
      while (start < end) {
        const sub = (start > 0 ? '##' : '') + chars.slice(start, end).join('');
        const id = this.vocab.get(sub);
        if (id !== undefined) {
          found = id;
          break;
        }
        end--;
      }
      if (found < 0) {
        out.push(this.unk);
        return;
      }
      pieces.push(found);
      start = end;
    }
    out.push(...pieces);
  }

  /** The token ids the model's tokenizer gives a text, without [CLS] and [SEP], cut where the model cuts. */
  tokenize(text: string): number[] {
    const ids: number[] = [];
    for (const w of bertWords(text)) {
      this.wordPieces(w, ids);
      if (ids.length >= this.maxTokens) break;
    }
    return ids.length > this.maxTokens ? ids.slice(0, this.maxTokens) : ids;
  }

  /** A text's unit vector: the sum of its tokens' rows, normalised (a text without tokens: the zero vector). */
  encode(text: string): Float32Array {
    const v = new Float32Array(this.dims);
    const d = this.dims;
    for (const id of this.tokenize(text)) {
      const s = this.scales[id];
      const o = id * d;
      for (let j = 0; j < d; j++) v[j] += s * this.rows[o + j];
    }
    let n = 0;
    for (let j = 0; j < d; j++) n += v[j] * v[j];
    n = Math.sqrt(n);
    if (n > 0) for (let j = 0; j < d; j++) v[j] /= n;
    return v;
  }
}
