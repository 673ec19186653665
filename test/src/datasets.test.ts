import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { firstInvalidUtf8 } from '../../src/datasets/common.ts';
import { isCogrError, type ErrorCode } from '../../index/core/errors.ts';
import { memoryLogger } from '../fixtures/memory.ts';
import { listDatasets, loadDataset, registerDataset } from '../../src/datasets/index.ts';
import { detectFormat } from '../../src/datasets/detect.ts';
import { parseTsv } from '../../src/datasets/wands.ts';
import { mergedTitle } from '../../src/datasets/trec.ts';
import { firstSentence } from '../../src/datasets/smart.ts';

const FIX = resolve(__dirname, '../fixtures/datasets');
const fx = (name: string): string => join(FIX, name);
const ROOT = resolve(__dirname, '../..');

async function failure(p: Promise<unknown>): Promise<{ code: ErrorCode; message: string }> {
  try {
    await p;
  } catch (e) {
    if (isCogrError(e)) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('expected a CogrError');
}

let home: string;
let prevHome: string | undefined;
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'cogr-ds-'));
  prevHome = process.env.COGR_HOME;
  process.env.COGR_HOME = home;
});
afterEach(() => {
  if (prevHome === undefined) delete process.env.COGR_HOME;
  else process.env.COGR_HOME = prevHome;
  rmSync(home, { recursive: true, force: true });
});

describe('format detection', () => {
  it.each([
    ['smart', 'smart'],
    ['trec', 'trec'],
    ['beir', 'beir'],
    ['wands', 'wands'],
    ['jsonl', 'jsonl'],
  ])('%s folder is detected as %s', (dir, format) => {
    expect(detectFormat(fx(dir))).toBe(format);
  });
  it('an empty folder cannot be detected and the message says so', () => {
    const empty = mkdtempSync(join(tmpdir(), 'cogr-empty-'));
    try {
      expect(() => detectFormat(empty)).toThrow(/cannot detect the dataset format/);
    } finally {
      rmSync(empty, { recursive: true });
    }
  });
});

describe('SMART', () => {
  it('loads items, titles, queries and relevance, counting unknown ids', async () => {
    const log = memoryLogger();
    const d = await loadDataset(fx('smart'), { logger: log });
    expect(d.format).toBe('smart');
    const c = d.corpus;
    expect(c.name).toBe('smart');
    expect(c.items.map((i) => i.id)).toEqual(['1', '2', '3']);
    // MED style: title = first sentence up to " ."
    expect(c.items[0].title).toBe('heart attack risk in adults');
    expect(c.items[0].text).toBe('heart attack risk in adults . a study of heart disease .');
    // CISI style: .T title, .A in fields, .X dropped
    expect(c.items[1]).toEqual({
      id: '2',
      title: 'Lung Cancer Survival',
      text: 'Survival of lung cancer patients after surgery.',
      fields: { authors: 'Smith, J.' },
    });
    expect(c.items[2].title).toBe('no full stop here at all');
    expect(c.queries).toEqual([
      { id: '1', text: 'heart disease' },
      { id: '2', text: 'lung cancer' },
      { id: '3', text: 'unjudged query' },
    ]);
    // every REL line is relevant (grade 1), whatever its extra columns say
    expect([...c.relevant.get('2')!]).toEqual(['2', '3']);
    expect(c.qrels.get('2')!.get('3')).toBe(1);
    expect(d.warnings).toEqual({
      unknownQueryIds: 1,
      unknownItemIds: 1,
      unjudgedQueries: 1,
      examples: [`${fx('smart/TINY.REL')}:4: unknown item id "99"`, `${fx('smart/TINY.REL')}:5: unknown query id "7"`],
    });
    expect(log.lines.join('\n')).toMatch(/unknown ids/);
  });
  it('a malformed .I line names file and line', async () => {
    const f = await failure(loadDataset(fx('smart-bad')));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toContain(`${fx('smart-bad/BAD.ALL')}:4:`);
  });
  it('a duplicate id names both places', async () => {
    const f = await failure(loadDataset(fx('smart-dup')));
    expect(f.code).toBe('DUPLICATE_ID');
    expect(f.message).toContain(`${fx('smart-dup/DUP.ALL')}:7: duplicate item id "1" (first at ${fx('smart-dup/DUP.ALL')}:1)`);
  });
  it('firstSentence cuts at the first " ."', () => {
    expect(firstSentence('a b . c d .')).toBe('a b');
  });
});

describe('TREC / NFCorpus', () => {
  it('loads docs (2 and 3 columns), merges identical queries, keeps grades >= 1', async () => {
    const d = await loadDataset(fx('trec'));
    const c = d.corpus;
    expect(d.format).toBe('trec');
    expect(c.items[0]).toEqual({
      id: 'D-1',
      title: 'statin breast cancer',
      text: 'statin breast cancer abstract recent studies suggested statins',
    });
    expect(c.items[1]).toEqual({ id: 'D-2', title: 'Vitamin D', text: 'vitamin d supplements and bone health' });
    expect(c.items[2].title).toBe('one two three four five six seven eight nine ten eleven twelve');
    expect(c.queries.map((q) => q.id)).toEqual(['P-1', 'P-2', 'P-3']);
    expect([...c.qrels.get('P-1')!]).toEqual([
      ['D-1', 2],
      ['D-3', 1],
    ]);
    // grade 0 is judged not relevant
    expect([...c.relevant.get('P-2')!]).toEqual(['D-2']);
    expect(d.warnings.unknownItemIds).toBe(1);
    expect(d.warnings.unknownQueryIds).toBe(1);
    expect(d.warnings.unjudgedQueries).toBe(1);
  });
  it('a qrel line with the wrong number of columns names file and line', async () => {
    const f = await failure(loadDataset(fx('trec-bad')));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toContain(`${fx('trec-bad/x.qrel')}:3: expected "qid 0 docid grade"`);
  });
  it('mergedTitle stops at the abstract marker', () => {
    expect(mergedTitle('a b c abstract d e')).toBe('a b c');
  });
});

describe('BEIR', () => {
  it('reads corpus, queries and the union of qrels/*.tsv', async () => {
    const d = await loadDataset(fx('beir'));
    const c = d.corpus;
    expect(d.format).toBe('beir');
    expect(c.items.map((i) => [i.id, i.title])).toEqual([
      ['d1', 'Aspirin'],
      ['d2', ''],
      ['3', 'Exercise'],
    ]);
    expect([...c.qrels.get('q1')!]).toEqual([
      ['d1', 2],
      ['3', 1],
    ]);
    expect([...c.relevant.get('q2')!]).toEqual(['d2']);
    expect(d.warnings.unknownQueryIds).toBe(1);
    expect(d.warnings.examples[0]).toBe(`${fx('beir/qrels/train.tsv')}:3: unknown query id "q3"`);
  });
  it('a corpus line without text names file, line and field', async () => {
    const f = await failure(loadDataset(fx('beir-bad')));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toMatch(new RegExp(`^${fx('beir-bad/corpus.jsonl')}:2: text: `));
  });
});

describe('WANDS', () => {
  it('reads products, queries and labels: Exact and Partial are relevant', async () => {
    const d = await loadDataset(fx('wands'));
    const c = d.corpus;
    expect(d.format).toBe('wands');
    expect(c.items[0]).toEqual({
      id: '0',
      title: 'solid wood coffee table',
      text: 'a sturdy "farmhouse" table\twith a tab',
      fields: { class: 'Coffee Tables', category: 'Furniture / Living Room', features: 'color:brown' },
    });
    expect(c.items[2].text).toBe('a long\nhose');
    expect([...c.qrels.get('0')!]).toEqual([['0', 2]]);
    expect([...c.qrels.get('1')!]).toEqual([['1', 1]]);
    expect(d.warnings.unknownItemIds).toBe(1);
    expect(d.warnings.examples[0]).toBe(`${fx('wands/label.csv')}:5: unknown item id "77"`);
  });
  it('a missing column is DATA_MISSING naming file and column', async () => {
    const f = await failure(loadDataset(fx('wands-nocol')));
    expect(f.code).toBe('DATA_MISSING');
    expect(f.message).toBe(`${fx('wands-nocol/label.csv')}:1: missing column(s) label`);
  });
  it('an unknown label names file and line', async () => {
    const f = await failure(loadDataset(fx('wands-badlabel')));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toContain(`${fx('wands-badlabel/label.csv')}:3: label must be Exact, Partial or Irrelevant`);
  });
  it('parseTsv counts lines through quoted new lines', () => {
    const rows = parseTsv('a\tb\n"x\ny"\tz\nlast\t1\n', 'f');
    expect(rows).toEqual([
      { cells: ['a', 'b'], line: 1 },
      { cells: ['x\ny', 'z'], line: 2 },
      { cells: ['last', '1'], line: 4 },
    ]);
    expect(() => parseTsv('a\n"open\n', 'f')).toThrow(/^f:2: unterminated quoted field/);
  });
});

describe('JSONL (cogr format)', () => {
  it('reads items with fields, numeric ids as strings, default grade 1', async () => {
    const d = await loadDataset(fx('jsonl'));
    const c = d.corpus;
    expect(d.format).toBe('jsonl');
    expect(c.items).toHaveLength(6);
    expect(c.items[3].fields).toEqual({ category: 'bikes' });
    expect(c.items[5].id).toBe('6');
    expect(c.qrels.get('q2')!.get('i2')).toBe(1);
    expect([...c.relevant.get('q4')!]).toEqual(['i4']);
    expect(d.warnings).toMatchObject({ unknownItemIds: 1, unknownQueryIds: 0, unjudgedQueries: 1 });
  });
  it('a duplicate item id is DUPLICATE_ID', async () => {
    const f = await failure(loadDataset(fx('jsonl-dup')));
    expect(f.code).toBe('DUPLICATE_ID');
    expect(f.message).toContain(`${fx('jsonl-dup/items.jsonl')}:3:`);
  });
  it('a line that is not JSON names file and line', async () => {
    const f = await failure(loadDataset(fx('jsonl-badline')));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toContain(`${fx('jsonl-badline/items.jsonl')}:2: not valid JSON`);
  });
  it('missing files are DATA_MISSING naming them', async () => {
    const f = await failure(loadDataset(fx('missing')));
    expect(f.code).toBe('DATA_MISSING');
    expect(f.message).toContain('queries.jsonl, qrels.jsonl');
  });
  it('a forced format that does not fit reports the missing files', async () => {
    const f = await failure(loadDataset(fx('jsonl'), { format: 'beir' }));
    expect(f.code).toBe('DATA_MISSING');
    expect(f.message).toContain('corpus.jsonl');
  });
  it('an invalid format option is INVALID_ARGUMENT naming the field', async () => {
    const f = await failure(loadDataset(fx('jsonl'), { format: 'csv' as never }));
    expect(f.code).toBe('INVALID_ARGUMENT');
    expect(f.message).toMatch(/^format:/);
  });
});

describe('strict UTF-8', () => {
  /** A JSONL dataset folder in the temp home whose items.jsonl has the given bytes. */
  function jsonlWithItems(items: Buffer): string {
    const d = join(home, 'enc');
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'items.jsonl'), items);
    writeFileSync(join(d, 'queries.jsonl'), '{"id": "q1", "text": "cafe"}\n');
    writeFileSync(join(d, 'qrels.jsonl'), '{"query_id": "q1", "item_id": "i1"}\n');
    return d;
  }
  it('the first byte that is not UTF-8 is DATA_FORMAT naming file:line:column; no Latin-1 guess', async () => {
    const latin1 = Buffer.concat([
      Buffer.from(
        '{"id": "i1", "title": "café au lait", "text": "x"}\n{"id": "i2", "title": "ok", "text": "y"}\n{"id": "i3", "title": "caf',
        'utf8',
      ),
      Buffer.from([0xe9]),
      Buffer.from('", "text": "z"}\n', 'utf8'),
    ]);
    const d = jsonlWithItems(latin1);
    const f = await failure(loadDataset(d));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toBe(
      `${join(d, 'items.jsonl')}:3:27: not valid UTF-8 (byte 0xE9 at offset ${latin1.indexOf(0xe9)}); data files must be UTF-8 (convert it, e.g. iconv -f latin1 -t utf-8)`,
    );
    // The column counts characters: "é" before the bad byte on the same line is one.
    const d2 = jsonlWithItems(Buffer.concat([Buffer.from('{"id": "i1", "title": "é', 'utf8'), Buffer.from([0xff]), Buffer.from('"}\n')]));
    expect((await failure(loadDataset(d2))).message).toMatch(/items\.jsonl:1:25: not valid UTF-8 \(byte 0xFF/);
    // Valid UTF-8 (with a BOM and CRLF) reads as it is.
    const ok = jsonlWithItems(Buffer.from('\uFEFF{"id": "i1", "title": "café", "text": "x"}\r\n', 'utf8'));
    expect((await loadDataset(ok)).corpus.items[0].title).toBe('café');
  });
  it('SMART and TREC files are strict too', async () => {
    const d = join(home, 'trec');
    mkdirSync(d);
    writeFileSync(join(d, 'd-collection.docs'), Buffer.concat([Buffer.from('D1\tcaf'), Buffer.from([0xe9]), Buffer.from('\n')]));
    writeFileSync(join(d, 'q-titles.queries'), 'Q1\tcafe\n');
    writeFileSync(join(d, 's-3.qrel'), 'Q1 0 D1 1\n');
    const f = await failure(loadDataset(d));
    expect(f).toMatchObject({
      code: 'DATA_FORMAT',
      message: expect.stringContaining(`${join(d, 'd-collection.docs')}:1:7: not valid UTF-8 (byte 0xE9`),
    });
  });
  it('firstInvalidUtf8 agrees with a fatal TextDecoder on random bytes', () => {
    const dec = new TextDecoder('utf-8', { fatal: true });
    const ok = (b: Uint8Array) => {
      try {
        dec.decode(b);
        return true;
      } catch {
        return false;
      }
    };
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.integer({ min: 0, max: 0x7f }),
            fc.integer({ min: 0x80, max: 0xff }),
            fc.constantFrom(0xc2, 0xe0, 0xed, 0xf0, 0xf4, 0x80, 0xbf, 0x9f, 0xa0, 0x90, 0x8f),
          ),
          { maxLength: 24 },
        ),
        (bytes) => {
          const b = Uint8Array.from(bytes);
          const at = firstInvalidUtf8(b);
          expect(at === -1).toBe(ok(b));
          if (at >= 0) expect(ok(b.subarray(0, at))).toBe(true);
        },
      ),
      { numRuns: 2000 },
    );
    expect(firstInvalidUtf8(Buffer.from('a\u{10FFFF}é\uFFFD', 'utf8'))).toBe(-1);
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0xed, 0xa0, 0x80]))).toBe(1); // a surrogate
    expect(firstInvalidUtf8(Uint8Array.from([0x61, 0x62, 0xe2, 0x82]))).toBe(2); // cut short
  });
});

describe('shipped and registered datasets', () => {
  it('the shipped collections load with the documented sizes', async () => {
    const sizes: Record<string, [number, number, number]> = { med: [1033, 30, 30], cisi: [1460, 112, 76], nfcorpus: [3162, 325, 323] };
    for (const [name, [items, queries, judged]] of Object.entries(sizes)) {
      const d = await loadDataset(name);
      expect([d.corpus.items.length, d.corpus.queries.length, d.corpus.relevant.size]).toEqual([items, queries, judged]);
      expect(d.warnings.unknownItemIds + d.warnings.unknownQueryIds).toBe(0);
    }
    const cisi = await loadDataset('cisi');
    expect(cisi.corpus.items[0].title).toBe('18 Editions of the Dewey Decimal Classifications');
    const nf = await loadDataset('nfcorpus');
    expect(nf.corpus.items[0].title).toBe('statin breast cancer survival nationwide cohort study finland');
  });
  it('an unknown name is DATA_MISSING listing the known names', async () => {
    const f = await failure(loadDataset('no-such-dataset'));
    expect(f.code).toBe('DATA_MISSING');
    expect(f.message).toContain('med, cisi, nfcorpus');
  });
  it('registers a folder in $COGR_HOME/datasets.json and loads it by name', async () => {
    registerDataset('tiny', fx('beir'), 'beir');
    const saved = JSON.parse(readFileSync(join(home, 'datasets.json'), 'utf8'));
    expect(saved).toEqual({ version: 1, datasets: { tiny: { path: fx('beir'), format: 'beir' } } });
    expect(listDatasets().map((d) => d.name)).toEqual(['med', 'cisi', 'nfcorpus', 'tiny']);
    const d = await loadDataset('tiny');
    expect(d.corpus.name).toBe('tiny');
    expect(d.corpus.items).toHaveLength(3);
    expect(() => registerDataset('med', fx('beir'))).toThrow(/shipped/);
  });
  it('a corrupt registry is reported with its file name', async () => {
    writeFileSync(join(home, 'datasets.json'), '{"version": 1, "datasets": {"x": {"path": 3}}}');
    const f = await failure(loadDataset('x'));
    expect(f.code).toBe('DATA_FORMAT');
    expect(f.message).toContain(`${join(home, 'datasets.json')}: datasets.x.path: `);
  });
});

describe('cogr datasets (CLI)', () => {
  const cli = (args: string[], env: Record<string, string>) =>
    spawnSync(process.execPath, [join(ROOT, 'bin/cogr.mjs'), ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  it('adds a dataset and lists it with its counts as JSON', () => {
    const add = cli(['datasets', 'add', 'tinyw', fx('wands')], { COGR_HOME: home });
    expect(add.status).toBe(0);
    expect(add.stdout).toContain('registered tinyw (wands)');
    const ls = cli(['datasets', '--json'], { COGR_HOME: home });
    expect(ls.status).toBe(0);
    const out = JSON.parse(ls.stdout) as { datasets: { name: string; items: number; judgedQueries: number; meanRelevant: number }[] };
    const w = out.datasets.find((d) => d.name === 'tinyw')!;
    expect(w).toMatchObject({ items: 3, judgedQueries: 2, meanRelevant: 1 });
    expect(out.datasets.find((d) => d.name === 'med')).toMatchObject({ items: 1033, judgedQueries: 30 });
  });
  it('a file that is not UTF-8 is one error line naming file:line:column, and is not registered', () => {
    const d = join(home, 'latin1');
    mkdirSync(d);
    writeFileSync(
      join(d, 'items.jsonl'),
      Buffer.concat([Buffer.from('{"id": "i1", "title": "caf'), Buffer.from([0xe9]), Buffer.from('", "text": "x"}\n')]),
    );
    writeFileSync(join(d, 'queries.jsonl'), '{"id": "q1", "text": "cafe"}\n');
    writeFileSync(join(d, 'qrels.jsonl'), '{"query_id": "q1", "item_id": "i1"}\n');
    const r = cli(['datasets', 'add', 'lat', d], { COGR_HOME: home });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `error[DATA_FORMAT]: ${join(d, 'items.jsonl')}:1:27: not valid UTF-8 (byte 0xE9 at offset 26); data files must be UTF-8 (convert it, e.g. iconv -f latin1 -t utf-8)\n`,
    );
    expect(JSON.parse(cli(['datasets', '--json'], { COGR_HOME: home }).stdout).datasets.map((x: { name: string }) => x.name)).not.toContain(
      'lat',
    );
  });
  it('an item field named __proto__ is refused naming file:line (never dropped); constructor and toString are kept', async () => {
    const d = join(home, 'proto-fields');
    mkdirSync(d);
    writeFileSync(join(d, 'queries.jsonl'), '{"id": "q1", "text": "cafe"}\n');
    writeFileSync(join(d, 'qrels.jsonl'), '{"query_id": "q1", "item_id": "i1"}\n');
    writeFileSync(join(d, 'items.jsonl'), '{"id": "i1", "title": "a", "text": "x", "fields": {"constructor": "y", "toString": "z"}}\n');
    const { corpus } = await loadDataset(d);
    expect(Object.entries(corpus.items[0].fields!)).toEqual([
      ['constructor', 'y'],
      ['toString', 'z'],
    ]);
    writeFileSync(
      join(d, 'items.jsonl'),
      '{"id": "i1", "title": "a", "text": "x"}\n{"id": "i2", "title": "b", "text": "x", "fields": {"__proto__": "x", "brand": "Acme"}}\n',
    );
    const r = cli(['datasets', 'add', 'proto', d], { COGR_HOME: home });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `error[DATA_FORMAT]: ${join(d, 'items.jsonl')}:2: fields.__proto__: a field may not be named "__proto__" (rename it)\n`,
    );
    expect(JSON.parse(cli(['datasets', '--json'], { COGR_HOME: home }).stdout).datasets.map((x: { name: string }) => x.name)).not.toContain(
      'proto',
    );
  });
  it('malformed data exits non-zero with error[CODE] and file:line', () => {
    mkdirSync(join(home, 'x'));
    const r = cli(['baseline', 'bm25', '--dataset', fx('trec-bad')], { COGR_HOME: home });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`error[DATA_FORMAT]: ${fx('trec-bad/x.qrel')}:3:`);
  });
});
