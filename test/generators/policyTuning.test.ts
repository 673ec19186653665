/**
 * The embedded policy's generalisation and speed changes: precision-favouring SFT targets,
 * precision features of the expansion candidates, the greedy stop rules, item-side GRPO
 * restricted to sparse weights, the n-gram fast path and the id-keyed candidate cache.
 */
import { describe, expect, it } from 'vitest';
import { normalizeKeyword, normalizeSelf } from '../../index/normalize.ts';
import { createRng } from '../../index/random.ts';
import { KeywordView } from '../../index/view.ts';
import { DI, DEFAULT_CANDIDATES, extractCandidates } from '../../generators/policy/candidates.ts';
import { EmbeddedPolicy, type GrpoSample } from '../../generators/policy/model.ts';
import { greedyQueryTargets, queryInput, runSft } from '../../generators/sft.ts';

const view = KeywordView.build('item', 0, [
  { id: 'a', self: 'aspirin trial', keywords: ['myocardial infarction', 'antiplatelet therapy'] },
  { id: 'b', self: 'statin study', keywords: ['cholesterol lowering', 'myocardial infarction'] },
  { id: 'c', self: 'heart attack registry', keywords: ['myocardial infarction', 'registry'] },
  { id: 'd', self: 'bone density', keywords: ['osteoporosis', 'antiplatelet therapy'] },
  { id: 'e', self: 'fracture risk', keywords: ['osteoporosis'] },
]);

describe('SFT targets that favour precision', () => {
  it('greedy targets add candidates only while the F1 of the matched set rises, best first', () => {
    const p = new EmbeddedPolicy('query');
    p.fitStats([{ id: 'q', text: 'aspirin infarction' }]);
    p.attachOpposite(view);
    const q = { id: 'q', text: 'aspirin infarction' };
    // rel = {a, b}: 'myocardial infarction' matches a, b, c (F1 0.8), the best single step;
    // after it nothing raises F1 ('aspirin trial' and 'cholesterol lowering' add no new item).
    const t = greedyQueryTargets(p, view, [q], new Map([['q', new Set(['a', 'b'])]]));
    const target = t.get('q')!;
    const cands = new Set(p.candidateKeywords(queryInput(q)));
    for (const k of target) expect(cands.has(k)).toBe(true);
    const f1 = (kws: string[]) => {
      const m = view.match({ self: q.text, keywords: kws });
      let tp = 0;
      for (const e of m) if (e === view.ordinalOf('a') || e === view.ordinalOf('b')) tp++;
      return (2 * tp) / (m.length + 2);
    };
    for (let i = 1; i <= target.length; i++) expect(f1(target.slice(0, i))).toBeGreaterThan(f1(target.slice(0, i - 1)));
    expect(target).toEqual(['myocardial infarction']);
    expect(f1(target)).toBeCloseTo(0.8, 12);
    expect(target).not.toContain('osteoporosis');
    // No relevant item reachable: no target.
    const none = greedyQueryTargets(p, view, [q], new Map([['q', new Set(['zzz'])]]));
    expect(none.has('q')).toBe(false);
  });

  it("runSft's modes: 'greedy' and 'both' targets are all candidates (coverage 1)", () => {
    const items = ['a b', 'c d', 'a c', 'b d', 'e f'].map((t, i) => ({ id: `i${i}`, title: `t${i}`, text: `${t} common words here` }));
    const queries = [
      { id: 'q1', text: 'a b' },
      { id: 'q2', text: 'c d' },
      { id: 'q3', text: 'e f' },
    ];
    const relevant = new Map([
      ['q1', new Set(['i0', 'i2'])],
      ['q2', new Set(['i1'])],
      ['q3', new Set(['i4'])],
    ]);
    for (const mode of ['greedy', 'both'] as const) {
      const r = runSft({ corpus: { items, queries, relevant }, trainQueryIds: ['q1', 'q2', 'q3'], epochs: 2, seed: 1, queryTargets: mode });
      expect(r.queryReport.coverage).toBe(1);
      for (const t of r.queryTargets.values()) expect(t.length).toBeLessThanOrEqual(15);
    }
  });
});

describe('query candidates: precision features', () => {
  it('prec = carriers among the top-m / df; dfRel grows with df', () => {
    const p = new EmbeddedPolicy('query');
    p.attachOpposite(view);
    const raw = extractCandidates('query', { id: 'q', text: 'aspirin statin' }, { ...DEFAULT_CANDIDATES, topM: 2 }, null, p['opposite'] as never, null);
    const by = new Map(raw.map((r) => [r.keyword, r.dense]));
    // top-2 for "aspirin statin" are a and b; 'cholesterol lowering' (df 1) lives only in b.
    expect(by.get('cholesterol lowering')![DI.prec]).toBeCloseTo(1, 12);
    // 'myocardial infarction' has df 3, two carriers in the top-2.
    expect(by.get('myocardial infarction')![DI.prec]).toBeCloseTo(2 / 3, 12);
    expect(by.get('myocardial infarction')![DI.precSq]).toBeCloseTo(4 / 9, 12);
    expect(by.get('myocardial infarction')![DI.dfRel]).toBeGreaterThan(by.get('cholesterol lowering')![DI.dfRel]);
  });
});

describe('decoding and training options', () => {
  const x = { id: 'x', title: 'renal failure', text: 'acute renal failure chronic kidney disease dialysis outcome renal failure' };

  it("greedy stop 'mass' never emits fewer keywords than 'argmax'", () => {
    for (let seed = 1; seed <= 20; seed++) {
      const rng = createRng(seed);
      const a = new EmbeddedPolicy('item', { greedyStop: 'argmax' });
      const b = new EmbeddedPolicy('item', { greedyStop: 'mass' });
      for (const name of ['stopBias', 'idf', 'logTf', 'len2']) {
        const v = (rng() - 0.5) * 6;
        a.setParam(name, v);
        b.setParam(name, v);
      }
      const ka = a.decode(x, { greedy: true }).keywords;
      const kb = b.decode(x, { greedy: true }).keywords;
      expect(kb.length).toBeGreaterThanOrEqual(ka.length);
      expect(kb.slice(0, ka.length)).toEqual(ka);
    }
  });

  it("grpoParams 'sparse' changes only keyword weights; 'all' also moves dense and stop weights", () => {
    for (const mode of ['sparse', 'all'] as const) {
      const p = new EmbeddedPolicy('item', { grpoParams: mode });
      const before = p.denseWeights();
      const rng = createRng(3);
      const batch: GrpoSample[] = [];
      for (let s = 0; s < 8; s++) {
        const r = p.sample(x, { temperature: 1, rng });
        batch.push({ input: x, keywords: r.keywords, oldLogProb: r.logProb, advantage: s % 2 ? 1 : -1 });
      }
      const pos = batch.find((b) => b.advantage > 0 && b.keywords.length > 0)!;
      const lp0 = p.logProb(x, pos.keywords);
      p.grpoUpdate(batch, { lr: 0.1 });
      const after = p.denseWeights();
      if (mode === 'sparse') expect(after).toEqual(before);
      else expect(after).not.toEqual(before);
      expect(p.logProb(x, pos.keywords)).not.toBe(lp0);
    }
  });

  it('the default per side: sparse GRPO on items, all parameters on queries', () => {
    expect(new EmbeddedPolicy('item').config.grpoParams).toBe('sparse');
    expect(new EmbeddedPolicy('query').config.grpoParams).toBe('all');
    const p = new EmbeddedPolicy('query', { pairFeatures: false, keywordFeatures: false });
    p.attachOpposite(view);
    p.candidateKeywords({ id: 'q', text: 'aspirin statin' });
    expect(p.parameterCount).toBe(new EmbeddedPolicy('query').parameterCount);
  });
});

describe('candidate extraction fast path', () => {
  it('n-grams equal the normalised joins of the input words, including odd Unicode', () => {
    const rng = createRng(5);
    const words = ['Heart', 'ﬁbrosis', 'İstanbul', 'the', 'of', 'co-op', '(renal)', 'ÅNGSTRÖM', 'x'.repeat(60), 'ｆｕｌｌ', 'α-helix', 'data'];
    for (let t = 0; t < 30; t++) {
      const text = Array.from({ length: 12 }, () => words[Math.floor(rng() * words.length)]).join(' ');
      const p = new EmbeddedPolicy('item');
      const got = new Set(p.candidateKeywords({ id: `d${t}`, title: '', text }));
      const w = normalizeSelf(text).split(' ');
      const stop = new Set(['the', 'of']);
      const want = new Set<string>();
      for (let i = 0; i < w.length; i++) {
        if (stop.has(w[i])) continue;
        for (let n = 1; n <= 3 && i + n <= w.length; n++) {
          if (stop.has(w[i + n - 1])) continue;
          const k = normalizeKeyword(w.slice(i, i + n).join(' '));
          if (k !== null) want.add(k);
        }
      }
      // The item side keeps at most maxItemCandidates of them (plus the title, empty here).
      for (const k of got) expect(want.has(k)).toBe(true);
      expect(got.size).toBe(Math.min(want.size, DEFAULT_CANDIDATES.maxItemCandidates));
    }
  });

  it('the candidate cache is keyed by id but rebuilt when the text changes', () => {
    const p = new EmbeddedPolicy('item');
    const a = p.candidateKeywords({ id: 'same', title: 't', text: 'alpha beta' });
    const b = p.candidateKeywords({ id: 'same', title: 't', text: 'gamma delta' });
    expect(a).toContain('alpha beta');
    expect(b).toContain('gamma delta');
    expect(b).not.toContain('alpha beta');
    const c = p.candidateKeywords({ id: 'same', title: 'other', text: 'gamma delta' });
    expect(c).toContain('other');
  });
});
