import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRng } from '../../index/core/random.ts';
import type { Item, Query } from '../../index/core/types.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { listPolicyRounds, loadPolicy, savePolicy } from '../../src/run/policies.ts';
import { buildQueryTargets, exportTrl, itemInput, queryInput, runSft } from '../../generators/sft.ts';
import { setF1 } from '../../generators/planner/training.ts';
import { memoryStore } from '../fixtures/memory.ts';

// A synthetic corpus: each topic has its own vocabulary; items mix their topic's words with
// noise; queries use a few topic words and are relevant to their topic's items.
function corpus(seed: number) {
  const rng = createRng(seed);
  const topics = Array.from({ length: 8 }, (_, t) => Array.from({ length: 6 }, (_, j) => `t${t}w${j}`));
  const noise = Array.from({ length: 40 }, (_, j) => `noise${j}`);
  const pick = (a: string[]) => a[Math.floor(rng() * a.length)];
  const items: Item[] = [];
  const byTopic: string[][] = topics.map(() => []);
  for (let i = 0; i < 160; i++) {
    const t = i % topics.length;
    const words = Array.from({ length: 30 }, () => (rng() < 0.5 ? pick(topics[t]) : pick(noise)));
    items.push({ id: `i${i}`, title: `${pick(topics[t])} ${pick(topics[t])}`, text: words.join(' ') });
    byTopic[t].push(`i${i}`);
  }
  const queries: Query[] = [];
  const relevant = new Map<string, Set<string>>();
  for (let q = 0; q < 64; q++) {
    const t = q % topics.length;
    queries.push({ id: `q${q}`, text: `${pick(topics[t])} ${pick(noise)} ${pick(topics[t])}` });
    relevant.set(`q${q}`, new Set(byTopic[t]));
  }
  return { items, queries, relevant };
}

/** The base generator's M keywords per item: the policy's deterministic candidate ranking. */
function baseItemKeywords(policy: EmbeddedPolicy, items: readonly Item[], M: number): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const it of items) out.set(it.id, policy.rank(itemInput(it), M));
  return out;
}

describe('SFT (Algorithm 1)', () => {
  it('pools the N most frequent keywords of the relevant items as the query target', () => {
    const kw = new Map([
      ['a', ['x', 'y', 'z']],
      ['b', ['y', 'z']],
      ['c', ['z', 'w']],
      ['d', ['v']],
    ]);
    const rel = new Map([['q', new Set(['a', 'b', 'c'])]]);
    const t = buildQueryTargets(
      [
        { id: 'q', text: 'q' },
        { id: 'empty', text: '' },
      ],
      rel,
      kw,
      3,
    );
    expect(t.get('q')).toEqual(['z', 'y', 'w']); // z:3, y:2, then w and x (1 each) by keyword order
    expect(t.has('empty')).toBe(false);
  });

  it('base item keywords are the untrained policy’s deterministic ranking', () => {
    const { items } = corpus(1);
    const p = new EmbeddedPolicy('item');
    p.fitStats(items);
    const a = baseItemKeywords(p, items.slice(0, 10), 10);
    const b = baseItemKeywords(p, items.slice(0, 10), 10);
    expect(a).toEqual(b);
    for (const k of a.values()) {
      expect(k).toHaveLength(10);
      expect(new Set(k).size).toBe(10);
    }
  });

  it('fits the planner and the item policy; M is chosen on training F1; the planner generalises to held-out queries', () => {
    const c = corpus(2);
    // Every topic keeps six training queries; the last two of each are held out.
    const trainQueries = c.queries.slice(0, 48);
    const held = c.queries.slice(48);
    const relevant = new Map(trainQueries.map((q) => [q.id, c.relevant.get(q.id)!]));
    const r = runSft({ items: c.items, trainQueries, relevant, M: [3, 6], epochs: 4, seed: 3 });
    expect(r.mCurve.map(([m]) => m)).toEqual([3, 6]);
    const bestF1 = Math.max(...r.mCurve.map(([, f]) => f));
    expect(r.mCurve.find(([m]) => m === r.M)![1]).toBe(bestF1);
    for (const k of r.itemKeywords.values()) expect(k.length).toBeLessThanOrEqual(r.M);
    expect(r.itemReport.coverage).toBe(1);
    expect(r.itemReport.epochLoss.at(-1)!).toBeLessThan(r.itemReport.epochLoss[0]);
    expect(r.relevanceFit.pairs).toBe(trainQueries.length * c.items.length);
    expect(r.queryTargets.size).toBe(trainQueries.length);
    // Held-out queries (never seen by SFT): the planner's matched sets beat the raw query's.
    const view = r.planner.attached!;
    let planned = 0;
    let raw = 0;
    for (const q of held) {
      const rel = new Set([...c.relevant.get(q.id)!].map((id) => view.ordinalOf(id)));
      planned += setF1(r.planner.plan(queryInput(q)).matched, rel);
      raw += setF1(view.match({ self: q.text, keywords: [] }), rel);
    }
    expect(planned / held.length).toBeGreaterThan(0.3);
    expect(planned).toBeGreaterThan(raw);
  });

  it('exports TRL conversational prompt–completion JSONL with the LLM prompts', () => {
    const c = corpus(3);
    const dir = mkdtempSync(join(tmpdir(), 'cogr-trl-'));
    try {
      const itemKeywords = new Map([['i0', ['alpha', 'beta']]]);
      const queryTargets = new Map([['q1', ['gamma']]]);
      const n = exportTrl(dir, { items: c.items, itemKeywords, queries: c.queries, queryTargets });
      expect(n).toEqual({ item: 1, query: 1, pseudo: 0 });
      const item = readFileSync(join(dir, 'item.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      // The system message, the prompt file's worked example (a user and an assistant turn), then the item.
      expect(item[0].prompt.map((m: { role: string }) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
      expect(item[0].prompt.at(-1).content).toContain(c.items[0].title);
      expect(item[0].completion).toEqual([{ role: 'assistant', content: '{"keywords":["alpha","beta"]}' }]);
      // The entity's id, so a trainer can keep to a run's core training queries.
      expect(item[0].id).toBe('i0');
      const query = JSON.parse(readFileSync(join(dir, 'query.jsonl'), 'utf8'));
      expect(query.id).toBe('q1');
      expect(query.prompt.at(-1).content).toContain(c.queries[1].text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the exported prompts and targets keep to the LLM path's keyword limit (what the TRL grammar enforces)", () => {
    const c = corpus(3);
    const dir = mkdtempSync(join(tmpdir(), 'cogr-trl-'));
    try {
      const many = Array.from({ length: 20 }, (_, i) => `kw${i}`);
      exportTrl(dir, { items: c.items, itemKeywords: new Map([['i0', many]]), queries: c.queries, queryTargets: new Map() });
      const row = JSON.parse(readFileSync(join(dir, 'item.jsonl'), 'utf8'));
      // min(K_max 30, llm.maxKeywords 12): the first 12 of the target, and the prompt says 12.
      expect(JSON.parse(row.completion[0].content).keywords).toEqual(many.slice(0, 12));
      const text = row.prompt.map((m: { content: string }) => m.content).join('\n');
      expect(text).toContain('12');
      expect(text).not.toMatch(/\b30\b/);
      exportTrl(dir, {
        items: c.items,
        itemKeywords: new Map([['i0', many]]),
        queries: c.queries,
        queryTargets: new Map(),
        keywordLimit: 5,
      });
      expect(JSON.parse(JSON.parse(readFileSync(join(dir, 'item.jsonl'), 'utf8')).completion[0].content).keywords).toEqual(
        many.slice(0, 5),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('saves and loads policies per round', async () => {
    const store = memoryStore();
    const p = new EmbeddedPolicy('item');
    p.setParam('idf', 7);
    await savePolicy(store, 0, p);
    p.setParam('idf', 8);
    await savePolicy(store, 2, p);
    expect(await listPolicyRounds(store, 'item')).toEqual([0, 2]);
    expect((await loadPolicy(store, 'item', 0)).getParam('idf')).toBe(7);
    expect((await loadPolicy(store, 'item', 'latest')).getParam('idf')).toBe(8);
    await expect(loadPolicy(store, 'item', 1)).rejects.toThrow(/round 1.*0, 2/);
    await expect(loadPolicy(store, 'query', 'latest')).rejects.toThrow(/no query policy/);
  });
});
