/**
 * Boolean retrieval programs (in the spirit of ProRetrieval) over one frozen item view.
 *
 *   node := {keyword: "breast cancer"}                 exact normalised keyword (self keywords included)
 *         | {any_of: ["statin", "cholesterol"]}        any of these keywords
 *         | {text: "does soy prevent cancer"}          generated keywords + the raw query, as GET /v1/search
 *         | {field: {name, equals | in | prefix}}      a structured item field from the dataset
 *         | {and: [node, ...]} | {or: [node, ...]} | {not: node}
 *
 * Keyword and field values are compared after the project's normalisation. Evaluation
 * works on sorted arrays of entity ordinals (postings are already sorted); `not` is the
 * complement within all items. The result is ranked by BM25 of the words of the
 * positive keyword predicates (those under an even number of `not`s; `text` counts
 * its generated keywords and its raw query), ties by id; a program without positive
 * keywords ranks by id with score 0.
 *
 * `parseProgram` validates by hand so that every error names its JSON path, e.g.
 * `program.and[2].keyword: expected a string, got number`. `ProgramNodeSchema` is the
 * same grammar in zod, used for the OpenAPI document.
 */
import { z } from 'zod';
import { cogrError } from '../../index/errors.ts';
import { normalizeKeyword, normalizeSelf } from '../../index/normalize.ts';
import type { Explanation, KeywordView } from '../../index/view.ts';

export type FieldPredicate =
  | { name: string; equals: string }
  | { name: string; in: string[] }
  | { name: string; prefix: string };

export type ProgramNode =
  | { keyword: string }
  | { any_of: string[] }
  | { text: string }
  | { field: FieldPredicate }
  | { and: ProgramNode[] }
  | { or: ProgramNode[] }
  | { not: ProgramNode };

export interface ProgramLimits {
  maxDepth: number;
  maxNodes: number;
  /** Longest `any_of` / `in` / `and` / `or` list. */
  maxList: number;
  /** Longest `text`, keyword or field value, in characters. */
  maxText: number;
}

export const DEFAULT_PROGRAM_LIMITS: Readonly<ProgramLimits> = Object.freeze({
  maxDepth: 8,
  maxNodes: 128,
  maxList: 64,
  maxText: 512,
});

const OPERATORS = ['keyword', 'any_of', 'text', 'field', 'and', 'or', 'not'] as const;

const fieldSchema = z.union([
  z.strictObject({ name: z.string().min(1), equals: z.string() }),
  z.strictObject({ name: z.string().min(1), in: z.array(z.string()).min(1) }),
  z.strictObject({ name: z.string().min(1), prefix: z.string().min(1) }),
]);

/** The grammar in zod (documentation; `parseProgram` is the validator). */
export const ProgramNodeSchema: z.ZodType<ProgramNode> = z.union([
  z.strictObject({ keyword: z.string().min(1).describe('an exact keyword, normalised') }),
  z.strictObject({ any_of: z.array(z.string().min(1)).min(1).describe('matches any of these keywords') }),
  z.strictObject({ text: z.string().min(1).describe('keywords generated from this text, plus the text itself') }),
  z.strictObject({ field: fieldSchema.describe('a structured item field: exactly one of equals, in, prefix') }),
  z.strictObject({
    get and() {
      return z.array(ProgramNodeSchema).min(1);
    },
  }),
  z.strictObject({
    get or() {
      return z.array(ProgramNodeSchema).min(1);
    },
  }),
  z.strictObject({
    get not() {
      return ProgramNodeSchema;
    },
  }),
]);

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function fail(path: string, message: string): never {
  throw cogrError('INVALID_BODY', `${path}: ${message}`, { path });
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown, path: string, limits: ProgramLimits): string {
  if (typeof v !== 'string') fail(path, `expected a string, got ${typeName(v)}`);
  if (v.trim().length === 0) fail(path, 'must not be empty');
  if (v.length > limits.maxText) fail(path, `longer than ${limits.maxText} characters`);
  return v;
}

function strList(v: unknown, path: string, limits: ProgramLimits): string[] {
  if (!Array.isArray(v)) fail(path, `expected an array of strings, got ${typeName(v)}`);
  if (v.length === 0) fail(path, 'must not be empty');
  if (v.length > limits.maxList) fail(path, `more than ${limits.maxList} entries`);
  return v.map((x, i) => str(x, `${path}[${i}]`, limits));
}

function keywordValue(v: unknown, path: string, limits: ProgramLimits): string {
  const s = str(v, path, limits);
  const k = normalizeKeyword(s);
  if (k === null) fail(path, `not a valid keyword after normalisation: ${JSON.stringify(s)}`);
  return k;
}

/** Validate a program; every error is a 400 INVALID_BODY naming the JSON path. */
export function parseProgram(input: unknown, limits: ProgramLimits = DEFAULT_PROGRAM_LIMITS, path = 'program'): ProgramNode {
  let nodes = 0;
  const walk = (v: unknown, p: string, depth: number): ProgramNode => {
    if (++nodes > limits.maxNodes) fail(p, `the program has more than ${limits.maxNodes} nodes`);
    if (depth > limits.maxDepth) fail(p, `nesting deeper than ${limits.maxDepth}`);
    if (!isPlainObject(v)) fail(p, `expected an object with one of ${OPERATORS.join(', ')}, got ${typeName(v)}`);
    const keys = Object.keys(v);
    if (keys.length !== 1) {
      fail(p, `expected exactly one of ${OPERATORS.join(', ')}, got ${keys.length === 0 ? 'none' : keys.map((k) => JSON.stringify(k)).join(', ')}`);
    }
    const op = keys[0];
    const arg = v[op];
    const q = `${p}.${op}`;
    switch (op) {
      case 'keyword':
        return { keyword: keywordValue(arg, q, limits) };
      case 'any_of': {
        if (!Array.isArray(arg)) fail(q, `expected an array of strings, got ${typeName(arg)}`);
        if (arg.length === 0) fail(q, 'must not be empty');
        if (arg.length > limits.maxList) fail(q, `more than ${limits.maxList} entries`);
        return { any_of: arg.map((x, i) => keywordValue(x, `${q}[${i}]`, limits)) };
      }
      case 'text':
        return { text: str(arg, q, limits) };
      case 'field': {
        if (!isPlainObject(arg)) fail(q, `expected an object {name, equals | in | prefix}, got ${typeName(arg)}`);
        const name = str(arg.name, `${q}.name`, limits);
        const ops = Object.keys(arg).filter((k) => k !== 'name');
        for (const k of ops) {
          if (k !== 'equals' && k !== 'in' && k !== 'prefix') fail(`${q}.${k}`, 'unknown key (expected equals, in or prefix)');
        }
        if (ops.length !== 1) fail(q, 'expected exactly one of equals, in, prefix');
        const k = ops[0];
        if (k === 'equals') {
          if (typeof arg.equals !== 'string') fail(`${q}.equals`, `expected a string, got ${typeName(arg.equals)}`);
          if (arg.equals.length > limits.maxText) fail(`${q}.equals`, `longer than ${limits.maxText} characters`);
          return { field: { name, equals: arg.equals } };
        }
        if (k === 'in') return { field: { name, in: strList(arg.in, `${q}.in`, limits) } };
        return { field: { name, prefix: str(arg.prefix, `${q}.prefix`, limits) } };
      }
      case 'and':
      case 'or': {
        if (!Array.isArray(arg)) fail(q, `expected an array of program nodes, got ${typeName(arg)}`);
        if (arg.length === 0) fail(q, 'must not be empty');
        if (arg.length > limits.maxList) fail(q, `more than ${limits.maxList} entries`);
        const children = arg.map((x, i) => walk(x, `${q}[${i}]`, depth + 1));
        return op === 'and' ? { and: children } : { or: children };
      }
      case 'not':
        return { not: walk(arg, q, depth + 1) };
      default:
        return fail(q, `unknown operator (expected one of ${OPERATORS.join(', ')})`);
    }
  };
  return walk(input, path, 1);
}

/** Every `text` of a program (to generate their keywords before evaluation). */
export function programTexts(node: ProgramNode): string[] {
  const out: string[] = [];
  const walk = (n: ProgramNode) => {
    if ('text' in n) out.push(n.text);
    else if ('and' in n) n.and.forEach(walk);
    else if ('or' in n) n.or.forEach(walk);
    else if ('not' in n) walk(n.not);
  };
  walk(node);
  return out;
}

// ---- sorted-set algebra over entity ordinals ----

export function intersectSorted(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(Math.min(a.length, b.length));
  let i = 0;
  let j = 0;
  let m = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out[m++] = a[i];
      i++;
      j++;
    } else if (a[i] < b[j]) i++;
    else j++;
  }
  return out.subarray(0, m);
}

export function unionSorted(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let m = 0;
  while (i < a.length || j < b.length) {
    if (j >= b.length || (i < a.length && a[i] < b[j])) out[m++] = a[i++];
    else if (i >= a.length || b[j] < a[i]) out[m++] = b[j++];
    else {
      out[m++] = a[i];
      i++;
      j++;
    }
  }
  return out.subarray(0, m);
}

export function complementSorted(a: Int32Array, n: number): Int32Array {
  const out = new Int32Array(n - a.length);
  let j = 0;
  let m = 0;
  for (let e = 0; e < n; e++) {
    if (j < a.length && a[j] === e) j++;
    else out[m++] = e;
  }
  return out.subarray(0, m);
}

// ---- field index ----

/** Per field name: normalised value → sorted entity ordinals of one view. */
export type FieldIndex = Map<string, Map<string, Int32Array>>;

export function buildFieldIndex(view: KeywordView, fields: ReadonlyMap<string, Readonly<Record<string, string>>>): FieldIndex {
  const tmp = new Map<string, Map<string, number[]>>();
  for (let e = 0; e < view.size; e++) {
    const f = fields.get(view.id(e));
    if (!f) continue;
    for (const [name, raw] of Object.entries(f)) {
      let byValue = tmp.get(name);
      if (!byValue) tmp.set(name, (byValue = new Map()));
      const v = normalizeSelf(raw);
      let list = byValue.get(v);
      if (!list) byValue.set(v, (list = []));
      list.push(e);
    }
  }
  const out: FieldIndex = new Map();
  for (const [name, byValue] of tmp) {
    const m = new Map<string, Int32Array>();
    for (const [v, list] of byValue) m.set(v, Int32Array.from(list));
    out.set(name, m);
  }
  return out;
}

// ---- evaluation ----

export interface ProgramContext {
  view: KeywordView;
  fieldIndex: FieldIndex;
  /** Generated keywords per `text` value (normalised); absent → raw text only. */
  textKeywords: ReadonlyMap<string, readonly string[]>;
}

export interface ProgramHit {
  id: string;
  ordinal: number;
  score: number;
}

export interface ProgramResult {
  matched: number;
  items: ProgramHit[];
  /** The keywords whose words rank the result (positive predicates). */
  rankingKeywords: string[];
  rankingTexts: string[];
}

const EMPTY = new Int32Array(0);

function keywordSet(view: KeywordView, k: string): Int32Array {
  const o = view.ordinalOfKeyword(k);
  return o < 0 ? EMPTY : view.postings(o);
}

function unionAll(sets: Int32Array[]): Int32Array {
  let acc: Int32Array = EMPTY;
  for (const s of sets) acc = unionSorted(acc, s);
  return acc;
}

/** The matched set of a validated program, as sorted ordinals. */
export function evaluateProgram(node: ProgramNode, ctx: ProgramContext, path = 'program'): Int32Array {
  const { view } = ctx;
  if ('keyword' in node) return keywordSet(view, node.keyword);
  if ('any_of' in node) return unionAll(node.any_of.map((k) => keywordSet(view, k)));
  if ('text' in node) {
    const kws = ctx.textKeywords.get(node.text) ?? [];
    return view.match({ self: node.text, keywords: kws });
  }
  if ('field' in node) {
    const f = node.field;
    const byValue = ctx.fieldIndex.get(f.name);
    if (!byValue) {
      const known = [...ctx.fieldIndex.keys()].sort();
      fail(
        `${path}.field.name`,
        `unknown field ${JSON.stringify(f.name)} (${known.length ? `known: ${known.join(', ')}` : 'the served dataset has no item fields'})`,
      );
    }
    if ('equals' in f) return byValue.get(normalizeSelf(f.equals)) ?? EMPTY;
    if ('in' in f) return unionAll(f.in.map((v) => byValue.get(normalizeSelf(v)) ?? EMPTY));
    const p = normalizeSelf(f.prefix);
    const sets: Int32Array[] = [];
    for (const [v, s] of byValue) if (v.startsWith(p)) sets.push(s);
    return unionAll(sets);
  }
  if ('and' in node) {
    let acc: Int32Array | null = null;
    for (let i = 0; i < node.and.length; i++) {
      const s = evaluateProgram(node.and[i], ctx, `${path}.and[${i}]`);
      acc = acc === null ? s : intersectSorted(acc, s);
    }
    return acc ?? EMPTY;
  }
  if ('or' in node) return unionAll(node.or.map((c, i) => evaluateProgram(c, ctx, `${path}.or[${i}]`)));
  return complementSorted(evaluateProgram(node.not, ctx, `${path}.not`), view.size);
}

/** Keywords and texts under an even number of `not`s. */
export function positiveTerms(node: ProgramNode, ctx: Pick<ProgramContext, 'textKeywords'>): { keywords: string[]; texts: string[] } {
  const keywords = new Set<string>();
  const texts: string[] = [];
  const walk = (n: ProgramNode, positive: boolean) => {
    if ('not' in n) return walk(n.not, !positive);
    if ('and' in n) return n.and.forEach((c) => walk(c, positive));
    if ('or' in n) return n.or.forEach((c) => walk(c, positive));
    if (!positive) return;
    if ('keyword' in n) keywords.add(n.keyword);
    else if ('any_of' in n) n.any_of.forEach((k) => keywords.add(k));
    else if ('text' in n) {
      texts.push(n.text);
      for (const k of ctx.textKeywords.get(n.text) ?? []) keywords.add(k);
    }
  };
  walk(node, true);
  return { keywords: [...keywords], texts };
}

function rankingWords(view: KeywordView, keywords: readonly string[], texts: readonly string[]): number[] {
  const words = new Set<number>(view.probeWordOrdinals({ keywords }));
  for (const t of texts) for (const w of view.probeWordOrdinals({ keywords: [], self: t })) words.add(w);
  return [...words];
}

/** Evaluate and rank: the matched set's size and the top k, best first, ties by id. */
export function runProgram(node: ProgramNode, ctx: ProgramContext, k: number): ProgramResult {
  const { view } = ctx;
  const matched = evaluateProgram(node, ctx);
  const { keywords, texts } = positiveTerms(node, ctx);
  const words = rankingWords(view, keywords, texts);
  const scores = words.length > 0 ? view.score(words, matched) : new Float64Array(matched.length);
  const order = Array.from({ length: matched.length }, (_, i) => i);
  order.sort((x, y) => scores[y] - scores[x] || matched[x] - matched[y]);
  const items: ProgramHit[] = [];
  for (let i = 0; i < Math.min(k, order.length); i++) {
    const j = order[i];
    items.push({ id: view.id(matched[j]), ordinal: matched[j], score: scores[j] });
  }
  return { matched: matched.length, items, rankingKeywords: keywords, rankingTexts: texts };
}

/** Explanation of one hit of a program: matched positive keywords and BM25 terms. */
export function explainProgramHit(view: KeywordView, result: ProgramResult, id: string): Explanation | null {
  const ex = view.explain({ keywords: result.rankingKeywords, self: result.rankingTexts.join(' ') }, id);
  if (!ex) return null;
  const e = view.ordinalOf(id);
  const own = new Set(view.keywordsOf(e));
  const self = view.selfOf(e);
  if (self) own.add(self);
  const probe = new Set(result.rankingKeywords);
  for (const t of result.rankingTexts) probe.add(normalizeSelf(t));
  const matchedKeywords = [...probe].filter((k) => own.has(k)).sort();
  return { ...ex, matched: matchedKeywords.length > 0, matchedKeywords };
}
