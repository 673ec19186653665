/**
 * Text analysis in linear time (issue 50): Node 20's `Intl.Segmenter` slows sharply with a
 * text's length (100 KB 0.44 s, 200 KB 9.6 s), so `standardTokens` segments in pieces cut
 * where UAX #29 always breaks. The pieces must give the whole text's tokens: checked on
 * every item and query of the shipped collections against the whole-text segmentation, and
 * on texts built to put every awkward character at a piece boundary.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { luceneEnglishTokens, standardTokens } from '../../index/text/english.ts';
import { textTokens } from '../../index/text/analyzer.ts';
import { capWords } from '../../src/datasets/common.ts';
import { loadDataset } from '../../src/datasets/index.ts';

const SPLIT_CHARS = /[\p{Script=Han}\p{Script=Hiragana}]/u;
const PICTOGRAPH = /\p{Extended_Pictographic}/u;
let seg: Intl.Segmenter | null = null;

/** The tokenizer as it was before issue 50: the whole text through one Segmenter call. */
function wholeTextTokens(text: string): string[] {
  seg ??= new Intl.Segmenter('en', { granularity: 'word' });
  const out: string[] = [];
  for (const s of seg.segment(text)) {
    const w = s.segment;
    if (!s.isWordLike) {
      if (PICTOGRAPH.test(w)) out.push(w);
      continue;
    }
    if (SPLIT_CHARS.test(w)) {
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
    if (w.length <= 255) out.push(w);
    else for (let i = 0; i < w.length; i += 255) out.push(w.slice(i, i + 255));
  }
  return out;
}

describe('standardTokens in pieces', () => {
  for (const name of ['med', 'cisi', 'nfcorpus']) {
    it(`gives the whole text's tokens for every item and query of ${name}`, async () => {
      const { corpus } = await loadDataset(name);
      let differing = 0;
      let long = 0;
      const texts = [...corpus.items.flatMap((i) => [i.title, i.text]), ...corpus.queries.map((q) => q.text)];
      for (const t of texts) {
        if (t.length > 512) long++;
        const a = standardTokens(t);
        const b = wholeTextTokens(t);
        if (a.length !== b.length || a.some((w, k) => w !== b[k])) differing++;
      }
      expect(long).toBeGreaterThan(100); // texts that are cut into pieces at all
      expect(differing).toBe(0);
    });
  }

  it('gives the whole text tokens where marks, joiners, CR LF, numbers and apostrophes sit at every offset of a piece boundary', () => {
    const parts = [
      'e\u0301t\u00e9 ',
      ' \u0301x ',
      '\r\n',
      '3.14 ',
      "can't ",
      'U.S.A. ',
      '\u{1F469}\u200d\u{1F4BB} ',
      ' \u200d\u{1F4BB} ',
      '\u{1F1EB}\u{1F1F7}\u{1F1E9}\u{1F1EA} ',
      '\u6f22\u5b57\u304b\u306a\u30ab\u30bf\u30ab\u30ca ',
      'word\u00a0word ',
      '  \t ',
      'x\u00ad y ',
      'a_b ',
      'http://example.com/a?b=c ',
    ];
    for (let shift = 0; shift < 40; shift++) {
      let t = 'a'.repeat(shift) + ' ';
      let k = shift;
      while (t.length < 6000) t += parts[k++ % parts.length];
      expect(standardTokens(t)).toEqual(wholeTextTokens(t));
    }
  });

  it('cuts a text without white space into pieces too, keeping every character', () => {
    const t = 'x'.repeat(20_000);
    const tokens = standardTokens(t);
    expect(tokens.join('')).toBe(t);
    expect(Math.max(...tokens.map((w) => w.length))).toBeLessThanOrEqual(255);
  });

  // Before pieces, 1 MB took minutes (quadratic); now well under a second. The time-out
  // is the test's own 120 s: about blocking, not speed.
  it('analyses a 1 MB text with every analyzer', { timeout: 120_000 }, () => {
    const words = 'heart cardiac blood pressure glucose fetal insulin kidney renal liver'.split(' ');
    const parts: string[] = [];
    let n = 0;
    for (let i = 0; n < 1 << 20; i++) {
      const w = words[(i * 7) % words.length];
      parts.push(w);
      n += w.length + 1;
    }
    const text = parts.join(' ');
    expect(standardTokens(text)).toHaveLength(parts.length);
    expect(luceneEnglishTokens(text)).toHaveLength(parts.length);
    expect(textTokens(text)).toHaveLength(parts.length);
  });
});

describe('the word cap per text', () => {
  it('cuts after the max-th white-space separated word and counts the rest', () => {
    expect(capWords('a  b\tc\n d ', 2)).toEqual({ text: 'a  b', dropped: 2 });
    expect(capWords(' a b ', 2)).toEqual({ text: ' a b ', dropped: 0 });
    expect(capWords('', 1)).toEqual({ text: '', dropped: 0 });
  });

  it('drops the words of an item beyond the cap at load, counts them and logs them with file and line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cogr-cap-'));
    try {
      mkdirSync(join(dir, 'qrels'));
      const max = DEFAULTS.text.maxWords;
      const long = Array.from({ length: max + 1234 }, (_, i) => `w${i % 97}`).join(' ');
      const docs = [
        { _id: 'a', title: 'alpha', text: 'heart blood' },
        { _id: 'b', title: 'beta', text: long },
        { _id: 'c', title: 'gamma', text: 'kidney renal' },
      ];
      writeFileSync(join(dir, 'corpus.jsonl'), docs.map((d) => JSON.stringify(d) + '\n').join(''));
      writeFileSync(join(dir, 'queries.jsonl'), JSON.stringify({ _id: 'q1', text: 'heart' }) + '\n');
      writeFileSync(join(dir, 'qrels', 'test.tsv'), 'query-id\tcorpus-id\tscore\nq1\ta\t1\n');
      const warned: { msg: string; fields?: Record<string, unknown> }[] = [];
      const logger = {
        info: () => {},
        debug: () => {},
        warn: (msg: string, fields?: Record<string, unknown>) => warned.push({ msg, fields }),
      };
      const { corpus, warnings } = await loadDataset(dir, { logger });
      const b = corpus.items.find((i) => i.id === 'b')!;
      expect(b.text.split(' ')).toHaveLength(max);
      expect(long.startsWith(b.text + ' ')).toBe(true);
      expect(warnings.cappedTexts).toBe(1);
      expect(warnings.droppedWords).toBe(1234);
      const w = warned.find((x) => x.msg.includes(`longer than ${max} words`));
      expect(w?.msg).toContain('1234 words dropped');
      expect(JSON.stringify(w?.fields)).toContain('corpus.jsonl:2: item \\"b\\" text: 1234 words dropped');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
