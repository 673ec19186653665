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
 * complement within all items. Evaluation and ranking count their work (WorkMeter): they
 * yield to the event loop every slice of work and stop at a cap, so a program's cost is
 * bounded and other requests go on meanwhile. The result is ranked by BM25 of the words of the
 * positive keyword predicates (those under an even number of `not`s; `text` counts
 * its generated keywords and its raw query), ties by id; a program without positive
 * keywords ranks by id with score 0.
 *
 * `parseProgram` validates by hand so that every error names its JSON path, e.g.
 * `program.and[2].keyword: expected a string, got number`. `ProgramNodeSchema` is the
 * same grammar in zod, used for the OpenAPI document.
 */
import { z } from 'zod';
import { cogrError } from '../../index/core/errors.ts';
import { normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import type { Explanation, KeywordView } from '../../index/view/view.ts';

export type FieldPredicate = { name: string; equals: string } | { name: string; in: string[] } | { name: string; prefix: string };

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
      fail(
        p,
        `expected exactly one of ${OPERATORS.join(', ')}, got ${keys.length === 0 ? 'none' : keys.map((k) => JSON.stringify(k)).join(', ')}`,
      );
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

/**
 * The work of one program evaluation, counted in units (one unit ≈ one ordinal read in a
 * set operation, or one (item, word) pair scored): every `slice` units the evaluation
 * yields to the event loop, so one request never holds up the others (or `/health`) for
 * long; beyond `limit` units it stops with a 400 naming the node it was at.
 */
export class WorkMeter {
  spent = 0;
  private sinceYield = 0;
  constructor(
    readonly limit: number = DEFAULT_PROGRAM_WORK,
    readonly slice: number = 50_000,
  ) {}
  async add(units: number, path: string): Promise<void> {
    this.spent += units;
    this.sinceYield += units;
    if (this.spent > this.limit) {
      throw cogrError(
        'INVALID_BODY',
        `${path}: the program needs more than ${this.limit} units of work (set operations and scoring over the items it matches); narrow it`,
        {
          path,
          limit: this.limit,
        },
      );
    }
    if (this.sinceYield >= this.slice) {
      this.sinceYield = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}

/** Default cap of one program's work (units of WorkMeter). */
export const DEFAULT_PROGRAM_WORK = 20_000_000;

/**
 * Units charged per character of a `text` node (and of its generated keywords) for
 * normalising and analysing it (NFKC, stemming): about what a set operation over as many
 * ordinals costs, so that a program with many long texts yields between them.
 */
const TEXT_UNITS_PER_CHAR = 100;

export interface ProgramContext {
  view: KeywordView;
  fieldIndex: FieldIndex;
  /** Generated keywords per `text` value (normalised); absent → raw text only. */
  textKeywords: ReadonlyMap<string, readonly string[]>;
  /** `text` values with no searchable term (fallback no_terms): they match nothing. */
  noTerms?: ReadonlySet<string>;
}

/** A `text` node's probe in the view: its keyword ordinals (matching) and word ordinals (ranking). */
interface TextProbe {
  keywords: number[];
  words: number[];
}

/** The context of one evaluation: each text analysed once, for matching and ranking alike. */
interface EvalContext extends ProgramContext {
  probes: Map<string, TextProbe>;
}

async function textProbe(ctx: EvalContext, text: string, meter: WorkMeter, path: string): Promise<TextProbe> {
  let p = ctx.probes.get(text);
  if (p) return p;
  const keywords = ctx.textKeywords.get(text) ?? [];
  let chars = text.length;
  for (const k of keywords) chars += k.length;
  await meter.add(1 + chars * TEXT_UNITS_PER_CHAR, path);
  p = ctx.noTerms?.has(text) ? { keywords: [], words: [] } : ctx.view.probeOrdinals({ self: text, keywords });
  ctx.probes.set(text, p);
  return p;
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

async function unionAll(sets: Int32Array[], meter: WorkMeter, path: string): Promise<Int32Array> {
  let acc: Int32Array = EMPTY;
  for (const s of sets) {
    await meter.add(acc.length + s.length, path);
    acc = unionSorted(acc, s);
  }
  return acc;
}

export async function evaluate(node: ProgramNode, ctx: EvalContext, meter: WorkMeter, path: string): Promise<Int32Array> {
  const { view } = ctx;
  if ('keyword' in node) {
    const s = keywordSet(view, node.keyword);
    await meter.add(1 + s.length, `${path}.keyword`);
    return s;
  }
  if ('any_of' in node)
    return unionAll(
      node.any_of.map((k) => keywordSet(view, k)),
      meter,
      `${path}.any_of`,
    );
  if ('text' in node) {
    const probe = await textProbe(ctx, node.text, meter, `${path}.text`);
    let cost = 1;
    for (const o of probe.keywords) cost += view.keywordDf(o);
    await meter.add(cost, `${path}.text`);
    return view.matchOrdinals(probe.keywords);
  }
  if ('field' in node) {
    const { sets, scanned } = fieldSets(ctx.fieldIndex, node.field, path);
    if (scanned > 0) await meter.add(scanned, `${path}.field`);
    return sets.length === 1 ? sets[0] : unionAll(sets, meter, `${path}.field`);
  }
  if ('and' in node) {
    let acc: Int32Array | null = null;
    for (let i = 0; i < node.and.length; i++) {
      const s = await evaluate(node.and[i], ctx, meter, `${path}.and[${i}]`);
      if (acc !== null) await meter.add(acc.length + s.length, `${path}.and[${i}]`);
      acc = acc === null ? s : intersectSorted(acc, s);
    }
    return acc ?? EMPTY;
  }
  if ('or' in node) {
    const sets: Int32Array[] = [];
    for (let i = 0; i < node.or.length; i++) sets.push(await evaluate(node.or[i], ctx, meter, `${path}.or[${i}]`));
    return unionAll(sets, meter, `${path}.or`);
  }
  const inner = await evaluate(node.not, ctx, meter, `${path}.not`);
  await meter.add(view.size, `${path}.not`);
  return complementSorted(inner, view.size);
}

/**
 * The postings of a field predicate's values (their union is what it matches; values
 * compared after the project's normalisation) and how many values a prefix scanned; an
 * unknown field is a 400 naming `path`.field.name and the known fields.
 */
export function fieldSets(fieldIndex: FieldIndex, f: FieldPredicate, path: string): { sets: Int32Array[]; scanned: number } {
  const byValue = fieldIndex.get(f.name);
  if (!byValue) {
    const known = [...fieldIndex.keys()].sort();
    fail(
      `${path}.field.name`,
      `unknown field ${JSON.stringify(f.name)} (${known.length ? `known: ${known.join(', ')}` : 'the served dataset has no item fields'})`,
    );
  }
  if ('equals' in f) return { sets: [byValue.get(normalizeSelf(f.equals)) ?? EMPTY], scanned: 0 };
  if ('in' in f) return { sets: f.in.map((v) => byValue.get(normalizeSelf(v)) ?? EMPTY), scanned: 0 };
  const p = normalizeSelf(f.prefix);
  const sets: Int32Array[] = [];
  for (const [v, s] of byValue) if (v.startsWith(p)) sets.push(s);
  return { sets, scanned: byValue.size };
}

/** What a program's translation for another engine needs besides the program (src/opensearch/program.ts). */
export interface ProgramTerms {
  /** Generated keywords per `text` value. */
  textKeywords: ReadonlyMap<string, readonly string[]>;
  /** `text` values with no searchable term: they match nothing. */
  noTerms: ReadonlySet<string>;
  /** The ids of the items a field predicate selects (the server's field index). */
  fieldIds(field: FieldPredicate, path: string): string[];
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

/** Word ordinals of the positive keywords and texts (each text's probe analysed once per evaluation). */
async function rankingWords(ctx: EvalContext, keywords: readonly string[], texts: readonly string[], meter: WorkMeter): Promise<number[]> {
  let chars = 0;
  for (const k of keywords) chars += k.length;
  await meter.add(1 + chars * TEXT_UNITS_PER_CHAR, 'program (ranking)');
  const words = new Set<number>(ctx.view.probeWordOrdinals({ keywords }));
  for (const t of texts) for (const w of (await textProbe(ctx, t, meter, 'program (ranking)')).words) words.add(w);
  return [...words];
}

/** Positions of the best k of `scores` (score descending, then ordinal ascending), best first. */
function bestK(scores: Float64Array, matched: Int32Array, k: number): number[] {
  const better = (x: number, y: number) => scores[x] > scores[y] || (scores[x] === scores[y] && matched[x] < matched[y]);
  if (k >= scores.length) {
    const all = Array.from({ length: scores.length }, (_, i) => i);
    return all.sort((x, y) => (better(x, y) ? -1 : better(y, x) ? 1 : 0));
  }
  // A min-heap (by `better`) of the best k seen so far: the root is the worst of them.
  const heap: number[] = [];
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let w = i;
      if (l < heap.length && better(heap[w], heap[l])) w = l;
      if (r < heap.length && better(heap[w], heap[r])) w = r;
      if (w === i) return;
      [heap[i], heap[w]] = [heap[w], heap[i]];
      i = w;
    }
  };
  for (let i = 0; i < scores.length && k > 0; i++) {
    if (heap.length < k) {
      heap.push(i);
      for (let j = heap.length - 1; j > 0;) {
        const p = (j - 1) >> 1;
        if (!better(heap[p], heap[j])) break;
        [heap[p], heap[j]] = [heap[j], heap[p]];
        j = p;
      }
    } else if (better(i, heap[0])) {
      heap[0] = i;
      down(0);
    }
  }
  return heap.sort((x, y) => (better(x, y) ? -1 : better(y, x) ? 1 : 0));
}

/** Evaluate and rank: the matched set's size and the top k, best first, ties by id (cooperative and capped). */
export async function runProgram(
  node: ProgramNode,
  ctx: ProgramContext,
  k: number,
  meter: WorkMeter = new WorkMeter(),
): Promise<ProgramResult> {
  const { view } = ctx;
  const ectx: EvalContext = { ...ctx, probes: new Map() };
  const matched = await evaluate(node, ectx, meter, 'program');
  const { keywords, texts } = positiveTerms(node, ctx);
  const words = await rankingWords(ectx, keywords, texts, meter);
  const scores = new Float64Array(matched.length);
  if (words.length > 0) {
    // Scored in chunks of about one slice of the meter's work each (entities × words).
    const chunk = Math.max(1, Math.floor(meter.slice / words.length));
    for (let start = 0; start < matched.length; start += chunk) {
      const part = matched.subarray(start, Math.min(matched.length, start + chunk));
      await meter.add(part.length * words.length, 'program (ranking)');
      scores.set(view.score(words, part), start);
    }
  }
  await meter.add(matched.length * Math.max(1, Math.ceil(Math.log2(k + 1))), 'program (ranking)');
  const items: ProgramHit[] = bestK(scores, matched, k).map((j) => ({ id: view.id(matched[j]), ordinal: matched[j], score: scores[j] }));
  return { matched: matched.length, items, rankingKeywords: keywords, rankingTexts: texts };
}

/**
 * Explanations of every hit of a program, under the program's work meter: each costs
 * about its probe (the ranking keywords, and the texts normalised and analysed again),
 * so `explain: true` on a program with many long texts yields and stops at the cap like
 * the program itself.
 */
export async function explainProgramHits(view: KeywordView, result: ProgramResult, meter: WorkMeter): Promise<(Explanation | null)[]> {
  let chars = 0;
  for (const t of result.rankingTexts) chars += t.length;
  const perHit = result.rankingKeywords.length + TEXT_UNITS_PER_CHAR * chars + 1;
  const out: (Explanation | null)[] = [];
  for (const h of result.items) {
    await meter.add(perHit, 'explain');
    out.push(explainProgramHit(view, result, h.id));
  }
  return out;
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
