/**
 * A naive, string-level model of the CoGR item reward (no views, no cache, no
 * ordinals) and a fast-check arbitrary of small random corpora, shared by the reward
 * and worker tests.
 */
import fc from 'fast-check';
import { normalizeKeyword, normalizeKeywordSet, normalizeSelf } from '../../index/text/normalize.ts';
import type { IndexEntry } from '../../index/core/types.ts';
import { fBetaFromCounts } from '../../rewards/setMetrics.ts';

export interface SmallCorpus {
  items: IndexEntry[];
  queries: IndexEntry[];
  relevant: Map<string, Set<string>>;
  counted?: Set<string>;
}

function keySet(e: { self: string; keywords: readonly string[] }): Set<string> {
  const s = new Set<string>();
  for (const k of e.keywords) {
    const n = normalizeKeyword(k);
    if (n !== null) s.add(n);
  }
  const self = normalizeSelf(e.self);
  if (self.length > 0) s.add(self);
  return s;
}

function intersects(a: Set<string>, b: Set<string>): boolean {
  for (const x of a) if (b.has(x)) return true;
  return false;
}

/** Σ over counted queries of F_β, with optionally item `replaceId`'s keywords replaced. */
export function modelSumF(c: SmallCorpus, beta: number, replace?: { id: string; keywords: string[] }): number[] {
  const itemSets = new Map<string, Set<string>>();
  for (const it of c.items) {
    itemSets.set(it.id, keySet(replace && replace.id === it.id ? { self: it.self, keywords: replace.keywords } : it));
  }
  const qids = [...new Set(c.queries.map((q) => q.id))].sort();
  const counted = c.counted ?? new Set([...c.relevant].filter(([, s]) => s.size > 0).map(([q]) => q));
  const out: number[] = [];
  for (const qid of qids) {
    if (!counted.has(qid)) {
      out.push(0);
      continue;
    }
    const q = c.queries.find((x) => x.id === qid)!;
    const qs = keySet(q);
    const rel = c.relevant.get(qid) ?? new Set<string>();
    let nRet = 0;
    let tp = 0;
    for (const [id, s] of itemSets) {
      if (intersects(qs, s)) {
        nRet++;
        if (rel.has(id)) tp++;
      }
    }
    out.push(fBetaFromCounts(nRet, rel.size, tp, beta));
  }
  return out;
}

/** The model item reward: ΔΣF, −1 over budget. */
export function modelItemReward(c: SmallCorpus, itemId: string, candidate: string[], kMax: number, beta: number): number {
  const { keywords } = normalizeKeywordSet(candidate);
  if (keywords.length > kMax) return -1;
  const before = modelSumF(c, beta);
  const after = modelSumF(c, beta, { id: itemId, keywords });
  let s = 0;
  for (let q = 0; q < before.length; q++) s += after[q] - before[q];
  return s;
}

const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'red shoe', 'blue shoe', 'Alpha', 'GAMMA!', 'omega', 'x y z'];
const kw = fc.oneof(
  { arbitrary: fc.constantFrom(...VOCAB), weight: 6 },
  { arbitrary: fc.constantFrom('unseen', 'never', '   ', '!!!'), weight: 1 },
);

export const smallCorpusArb: fc.Arbitrary<SmallCorpus> = fc
  .record({
    nItems: fc.integer({ min: 1, max: 10 }),
    nQueries: fc.integer({ min: 1, max: 7 }),
    seedKw: fc.array(fc.array(kw, { minLength: 0, maxLength: 3 }), { minLength: 17, maxLength: 17 }),
    queryKw: fc.array(fc.array(kw, { minLength: 1, maxLength: 2 }), { minLength: 7, maxLength: 7 }),
    titles: fc.array(fc.oneof(fc.constantFrom('alpha', 'omega', ''), fc.string({ maxLength: 4 })), { minLength: 17, maxLength: 17 }),
    relMatrix: fc.array(fc.boolean(), { minLength: 77, maxLength: 77 }),
    countedMode: fc.constantFrom('default', 'subset'),
    countedPick: fc.array(fc.nat(7), { maxLength: 5 }),
  })
  .map((r) => {
    const items: IndexEntry[] = [];
    for (let i = 0; i < r.nItems; i++) items.push({ id: `i${i}`, self: r.titles[i], keywords: r.seedKw[i] });
    const queries: IndexEntry[] = [];
    for (let q = 0; q < r.nQueries; q++) queries.push({ id: `q${q}`, self: r.titles[16 - q], keywords: r.queryKw[q] });
    const relevant = new Map<string, Set<string>>();
    for (let cell = 0; cell < 77; cell++) {
      const q = cell % 7;
      const i = Math.floor(cell / 7);
      if (!r.relMatrix[cell] || q >= r.nQueries) continue;
      // i ≥ nItems names an item that is missing from the item view.
      const set = relevant.get(`q${q}`) ?? new Set<string>();
      set.add(`i${i}`);
      relevant.set(`q${q}`, set);
    }
    const counted = r.countedMode === 'subset' ? new Set(r.countedPick.filter((q) => q < r.nQueries).map((q) => `q${q}`)) : undefined;
    return { items, queries, relevant, counted };
  });

export const candidateArb = fc.array(kw, { maxLength: 7 });

/** Budgets: mostly generous, sometimes tight enough to make candidates over budget. */
export const kMaxArb = fc.oneof(fc.integer({ min: 0, max: 4 }), fc.constant(30));
