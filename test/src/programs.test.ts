import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { normalizeSelf } from '../../index/text/normalize.ts';
import { KeywordView } from '../../index/view/view.ts';
import { buildSearchServer } from '../../src/server/app.ts';
import {
  buildFieldIndex,
  complementSorted,
  explainProgramHit,
  explainProgramHits,
  intersectSorted,
  parseProgram,
  runProgram,
  unionSorted,
  WorkMeter,
  type ProgramNode,
} from '../../src/server/program.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { catalogue, commitGeneration, fakeSource, listen, tempDir } from './_serverFixture.ts';
import { evaluateProgram } from './_oracles.ts';

const cat = catalogue(40, 2);
const view = KeywordView.build('item', 1, cat.generations[1]);
const fields = new Map(cat.items.map((i) => [i.id, i.fields!]));
const fieldIndex = buildFieldIndex(view, fields);

function parseError(program: unknown): string {
  try {
    parseProgram(program);
  } catch (e) {
    if (isCogrError(e, 'INVALID_BODY')) return e.message;
    throw e;
  }
  throw new Error('expected a validation error');
}

describe('parseProgram', () => {
  it('names the JSON path of the first error', () => {
    expect(parseError({ and: [{ keyword: 'a' }, { keyword: 'b' }, { keyword: 5 }] })).toBe(
      'program.and[2].keyword: expected a string, got number',
    );
    expect(parseError({ or: [{ not: { any_of: ['x', 7] } }] })).toBe('program.or[0].not.any_of[1]: expected a string, got number');
    expect(parseError({ and: [{ field: { name: 'brand', equals: 'x', prefix: 'y' } }] })).toBe(
      'program.and[0].field: expected exactly one of equals, in, prefix',
    );
    expect(parseError({ field: { name: 'brand', like: 'x' } })).toBe('program.field.like: unknown key (expected equals, in or prefix)');
    expect(parseError({ xor: [] })).toBe('program.xor: unknown operator (expected one of keyword, any_of, text, field, and, or, not)');
    expect(parseError({ keyword: 'a', text: 'b' })).toMatch(/^program: expected exactly one of/);
    expect(parseError([])).toMatch(/^program: expected an object .* got array$/);
    expect(parseError({ and: [] })).toBe('program.and: must not be empty');
    expect(parseError({ keyword: '   ' })).toBe('program.keyword: must not be empty');
    expect(parseError({ keyword: 'one two three four five six seven eight nine' })).toMatch(/^program.keyword: not a valid keyword/);
  });

  it('enforces depth and size limits', () => {
    let deep: ProgramNode = { keyword: 'a' };
    for (let i = 0; i < 10; i++) deep = { not: deep };
    expect(() => parseProgram(deep, { maxDepth: 8, maxNodes: 100, maxList: 10, maxText: 100 })).toThrow(/nesting deeper than 8/);
    const wide = { or: Array.from({ length: 11 }, () => ({ keyword: 'a' })) };
    expect(() => parseProgram(wide, { maxDepth: 8, maxNodes: 100, maxList: 10, maxText: 100 })).toThrow(
      /^program.or: more than 10 entries/,
    );
    const many = { or: Array.from({ length: 10 }, () => ({ and: [{ keyword: 'a' }, { keyword: 'b' }] })) };
    expect(() => parseProgram(many, { maxDepth: 8, maxNodes: 20, maxList: 10, maxText: 100 })).toThrow(/more than 20 nodes/);
  });

  it('normalises keywords', () => {
    expect(parseProgram({ any_of: ['  Running   SHOES ', '(Wool)'] })).toEqual({ any_of: ['running shoes', 'wool'] });
  });
});

describe('sorted set algebra', () => {
  const sortedSet = fc.uniqueArray(fc.integer({ min: 0, max: 60 })).map((a) => Int32Array.from(a.sort((x, y) => x - y)));
  it('matches Set semantics', () => {
    fc.assert(
      fc.property(sortedSet, sortedSet, (a, b) => {
        const A = new Set(a);
        const B = new Set(b);
        expect([...intersectSorted(a, b)]).toEqual([...A].filter((x) => B.has(x)));
        expect([...unionSorted(a, b)]).toEqual([...new Set([...A, ...B])].sort((x, y) => x - y));
        expect([...complementSorted(a, 61)]).toEqual(Array.from({ length: 61 }, (_, i) => i).filter((x) => !A.has(x)));
      }),
    );
  });
});

// A naive model: evaluate a program over the entries directly.
const entries = view.entries();
function naive(node: ProgramNode, textKw: Map<string, string[]>): Set<string> {
  const has = (id: string, k: string) => {
    const e = entries.find((x) => x.id === id)!;
    return e.keywords.includes(k) || e.self === k;
  };
  const all = entries.map((e) => e.id);
  if ('keyword' in node) return new Set(all.filter((id) => has(id, node.keyword)));
  if ('any_of' in node) return new Set(all.filter((id) => node.any_of.some((k) => has(id, k))));
  if ('text' in node) {
    const kws = [...(textKw.get(node.text) ?? []), normalizeSelf(node.text)];
    return new Set(all.filter((id) => kws.some((k) => has(id, k))));
  }
  if ('field' in node) {
    const f = node.field;
    return new Set(
      all.filter((id) => {
        const v = fields.get(id)?.[f.name];
        if (v === undefined) return false;
        const nv = normalizeSelf(v);
        if ('equals' in f) return nv === normalizeSelf(f.equals);
        if ('in' in f) return f.in.some((x) => normalizeSelf(x) === nv);
        return nv.startsWith(normalizeSelf(f.prefix));
      }),
    );
  }
  if ('and' in node) {
    const sets = node.and.map((c) => naive(c, textKw));
    return new Set(all.filter((id) => sets.every((s) => s.has(id))));
  }
  if ('or' in node) {
    const sets = node.or.map((c) => naive(c, textKw));
    return new Set(all.filter((id) => sets.some((s) => s.has(id))));
  }
  const inner = naive(node.not, textKw);
  return new Set(all.filter((id) => !inner.has(id)));
}

const KW = ['running shoes', 'wool hat', 'red', 'blue', 'sale', 'new season', 'hat', 'boots', 'red 0', 'nope'];
const arbLeaf: fc.Arbitrary<ProgramNode> = fc.oneof(
  fc.constantFrom(...KW).map((k): ProgramNode => ({ keyword: k })),
  fc.uniqueArray(fc.constantFrom(...KW), { minLength: 1, maxLength: 3 }).map((a): ProgramNode => ({ any_of: a })),
  fc.constantFrom('red running shoes', 'blue 3', 'wool hat sale').map((t): ProgramNode => ({ text: t })),
  fc.constantFrom('Acme', 'acme pro', 'Cobalt').map((v): ProgramNode => ({ field: { name: 'brand', equals: v } })),
  fc.constantFrom('ac', 'b').map((v): ProgramNode => ({ field: { name: 'brand', prefix: v } })),
  fc.constantFrom(['hat', 'shoes'], ['boots']).map((v): ProgramNode => ({ field: { name: 'category', in: [...v] } })),
);
const arbProgram: fc.Arbitrary<ProgramNode> = fc.letrec<{ node: ProgramNode }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    arbLeaf,
    fc.array(tie('node'), { minLength: 1, maxLength: 3 }).map((a) => ({ and: a })),
    fc.array(tie('node'), { minLength: 1, maxLength: 3 }).map((a) => ({ or: a })),
    tie('node').map((n) => ({ not: n })),
  ),
})).node;

describe('evaluateProgram', () => {
  it('equals a naive set model on random programs', async () => {
    const src = fakeSource();
    const textKw = new Map<string, string[]>();
    for (const t of ['red running shoes', 'blue 3', 'wool hat sale']) textKw.set(t, await src.keywords(t, new AbortController().signal));
    await fc.assert(
      fc.asyncProperty(arbProgram, async (p) => {
        const parsed = parseProgram(p, { maxDepth: 64, maxNodes: 10_000, maxList: 64, maxText: 512 });
        // A meter that yields after every step: the cooperative evaluation gives the same sets.
        const got = [...(await evaluateProgram(parsed, { view, fieldIndex, textKeywords: textKw }, new WorkMeter(1e9, 1)))].map((o) =>
          view.id(o),
        );
        expect(got).toEqual([...naive(parsed, textKw)].sort());
      }),
      { numRuns: 300 },
    );
  });

  it('ranks by BM25 of the positive keywords only; the top k is the head of the full ranking', async () => {
    const p = parseProgram({ and: [{ any_of: ['running shoes', 'red'] }, { not: { keyword: 'sale' } }] });
    const res = await runProgram(p, { view, fieldIndex, textKeywords: new Map() }, 100);
    expect(res.rankingKeywords).toEqual(['running shoes', 'red']);
    const words = view.probeWordOrdinals({ keywords: ['running shoes', 'red'] });
    const matched = await evaluateProgram(p, { view, fieldIndex, textKeywords: new Map() });
    const scores = view.score(words, matched);
    const expected = [...matched].map((o, i) => ({ id: view.id(o), score: scores[i], o })).sort((a, b) => b.score - a.score || a.o - b.o);
    expect(res.items.map((h) => [h.id, h.score])).toEqual(expected.map((h) => [h.id, h.score]));
    expect(res.matched).toBe(matched.length);
    for (const k of [1, 2, 3, 5, 8]) {
      expect((await runProgram(p, { view, fieldIndex, textKeywords: new Map() }, k)).items.map((h) => h.id)).toEqual(
        expected.slice(0, k).map((h) => h.id),
      );
    }
  });

  it('yields to the event loop while it works: other callbacks run before a long program ends', async () => {
    const texts = Array.from({ length: 16 }, (_, i) => `red running shoes number ${i} on sale`);
    const p = parseProgram({ or: [...texts.map((text) => ({ text })), { not: { keyword: 'sale' } }] });
    const textKeywords = new Map<string, string[]>(texts.map((t) => [t, ['running shoes', 'red']]));
    const ctx = { view, fieldIndex, textKeywords };
    const order = async (meter: WorkMeter) => {
      const ran: string[] = [];
      setImmediate(() => ran.push('other'));
      const result = await runProgram(p, ctx, 5, meter);
      ran.push('program');
      await new Promise((r) => setImmediate(r));
      return { ran, result };
    };
    // A meter whose slice is never reached runs the program in one go; a small slice lets the other callback in.
    const once = await order(new WorkMeter(1e12, 1e12));
    expect(once.ran).toEqual(['program', 'other']);
    const meter = new WorkMeter(1e9, 1_000);
    const sliced = await order(meter);
    expect(sliced.ran).toEqual(['other', 'program']);
    expect(sliced.result).toEqual(once.result);
    // Each text was analysed once (for matching and ranking alike), and charged for it.
    expect(meter.spent).toBeGreaterThan(texts.join('').length * 100);
  });

  it('stops a program past its work cap with a 400 naming the node', async () => {
    const p = parseProgram({ or: [{ keyword: 'red' }, { not: { not: { not: { keyword: 'sale' } } } }] });
    await expect(runProgram(p, { view, fieldIndex, textKeywords: new Map() }, 10, new WorkMeter(60))).rejects.toMatchObject({
      code: 'INVALID_BODY',
      message: expect.stringMatching(/^program\.or\[1\]\.not(\.not)*: the program needs more than 60 units of work/),
    });
  });

  it('charges explanations to the same meter: the same answers under it, a 400 past the cap', async () => {
    const texts = Array.from({ length: 8 }, (_, i) => `red running shoes number ${i} on sale`);
    const p = parseProgram({ or: texts.map((text) => ({ text })) });
    const ctx = { view, fieldIndex, textKeywords: new Map<string, string[]>(texts.map((t) => [t, ['running shoes', 'red']])) };
    const free = new WorkMeter(1e12);
    const result = await runProgram(p, ctx, 20, free);
    expect(result.items.length).toBeGreaterThan(5);
    const ran = free.spent;
    const explained = await explainProgramHits(view, result, free);
    expect(explained).toEqual(result.items.map((h) => explainProgramHit(view, result, h.id)));
    const perHit = (free.spent - ran) / result.items.length;
    expect(perHit).toBeGreaterThan(texts.join('').length * 100);
    // A cap the program fits under but its explanations do not.
    const capped = new WorkMeter(ran + perHit * 2);
    const again = await runProgram(p, ctx, 20, capped);
    expect(again).toEqual(result);
    await expect(explainProgramHits(view, again, capped)).rejects.toMatchObject({
      code: 'INVALID_BODY',
      message: expect.stringMatching(/^explain: the program needs more than \d+ units of work/),
    });
  });
});

describe('POST /v1/search over loopback', () => {
  let tmp: ReturnType<typeof tempDir>;
  let base: string;
  let close: () => Promise<unknown>;
  beforeAll(async () => {
    tmp = tempDir('cogr-programs-');
    const dbPath = join(tmp.dir, 'db');
    await commitGeneration(dbPath, 'item', cat.generations[1], 1);
    const live = new LiveSnapshot(
      storeSnapshotLoader({ dbPath, round: 'latest', corpus: { items: cat.items }, keywordSource: () => fakeSource() }),
    );
    await live.reload();
    const app = buildSearchServer({ live });
    close = () => app.close();
    base = await listen(app);
  });
  afterAll(async () => {
    await close();
    tmp.cleanup();
  });
  const post = async (body: unknown) => {
    const r = await fetch(`${base}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: r.status, body: (await r.json()) as any };
  };

  it('runs a program with keyword, text and field predicates', async () => {
    const program = { and: [{ text: 'wool hat sale' }, { field: { name: 'brand', prefix: 'acme' } }, { not: { keyword: 'red' } }] };
    const { status, body } = await post({ program, k: 50, explain: true });
    expect(status).toBe(200);
    const textKw = new Map([['wool hat sale', await fakeSource().keywords('wool hat sale', new AbortController().signal)]]);
    const expected = naive(parseProgram(program), textKw);
    expect(body.items.map((h: any) => h.id).sort()).toEqual([...expected].sort());
    expect(body.matched).toBe(expected.size);
    expect(body.texts[0]).toMatchObject({ text: 'wool hat sale', keywords: ['wool hat', 'sale'], source: 'test', fallback: null });
    for (const h of body.items) {
      expect(fields.get(h.id)!.brand.toLowerCase().startsWith('acme')).toBe(true);
      expect(h.explain.score).toBeCloseTo(h.score, 12);
    }
  });

  it('answers 400 with the path into the program', async () => {
    const bad = await post({ program: { and: [{ keyword: 'a' }, { or: [{ keyword: 'b' }, { any_of: 'c' }] }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({
      code: 'INVALID_BODY',
      message: 'program.and[1].or[1].any_of: expected an array of strings, got string',
      details: { path: 'program.and[1].or[1].any_of' },
    });
    const field = await post({ program: { or: [{ keyword: 'a' }, { field: { name: 'size', equals: 'xl' } }] } });
    expect(field.status).toBe(400);
    expect(field.body.error.message).toBe('program.or[1].field.name: unknown field "size" (known: brand, category, colour)');
    const k = await post({ program: { keyword: 'red' }, k: 0 });
    expect(k.body.error.message).toMatch(/^k:/);
    const extra = await post({ program: { keyword: 'red' }, limit: 3 });
    expect(extra.status).toBe(400);
    expect(extra.body.error.message).toMatch(/limit/);
    const missing = await post({ k: 3 });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/^q or program: one is required/);
    // A text and a program at once: the program's schema names the stray key.
    const both = await post({ program: { keyword: 'red' }, q: 'red' });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toMatch(/"q"/);
  });
});
