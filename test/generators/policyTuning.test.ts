/**
 * The embedded (item) policy's options and speed changes: the greedy stop rules, GRPO
 * restricted to some parameters, the n-gram fast path, the id-keyed candidate cache and the
 * keywords offered by the query side.
 */
import { describe, expect, it } from 'vitest';
import { normalizeKeyword, normalizeSelf } from '../../index/text/normalize.ts';
import { createRng } from '../../index/core/random.ts';
import { KeywordView } from '../../index/view/view.ts';
import { DI, DEFAULT_CANDIDATES, textCandidates, withQuerySide } from '../../generators/policy/candidates.ts';
import { EmbeddedPolicy, type GrpoSample } from '../../generators/policy/model.ts';

const view = KeywordView.build('item', 0, [
  { id: 'a', self: 'aspirin trial', keywords: ['myocardial infarction', 'antiplatelet therapy'] },
  { id: 'b', self: 'statin study', keywords: ['cholesterol lowering', 'myocardial infarction'] },
  { id: 'c', self: 'heart attack registry', keywords: ['myocardial infarction', 'registry'] },
  { id: 'd', self: 'bone density', keywords: ['osteoporosis', 'antiplatelet therapy'] },
  { id: 'e', self: 'fracture risk', keywords: ['osteoporosis'] },
]);

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

  it('trains only the query-side weights by default; there is no embedded query policy (the planner is the query side)', () => {
    expect(new EmbeddedPolicy('item').config.grpoParams).toBe('query');
    expect(() => new EmbeddedPolicy('query')).toThrow(/query keywords come from the query planner/);
    // without keyword features, candidates number no sparse parameters
    const p = new EmbeddedPolicy('item', { keywordFeatures: false });
    p.attachOpposite(view);
    p.candidateKeywords(x);
    expect(p.parameterCount).toBe(new EmbeddedPolicy('item').parameterCount);
  });
});

describe('candidate extraction fast path', () => {
  it('n-grams equal the normalised joins of the input words, including odd Unicode', () => {
    const rng = createRng(5);
    const words = [
      'Heart',
      'ﬁbrosis',
      'İstanbul',
      'the',
      'of',
      'co-op',
      '(renal)',
      'ÅNGSTRÖM',
      'x'.repeat(60),
      'ｆｕｌｌ',
      'α-helix',
      'data',
    ];
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

describe('item side: keywords offered by the query side', () => {
  const input = { id: 'i1', title: 'statin therapy', text: 'statin therapy lowers cholesterol in older patients' };
  const offers = new Map([
    [
      'i1',
      [
        { keyword: 'statin breast cancer', judged: 2, ranked: 0, precision: 1 },
        { keyword: 'heart disease', judged: 0, ranked: 3, precision: 0 },
      ],
    ],
  ]);

  it('are candidates with their query-side features', () => {
    const p = new EmbeddedPolicy('item');
    expect(p.candidateKeywords(input)).not.toContain('statin breast cancer');
    p.attachQuerySide({ offers: (id) => offers.get(id) ?? [] });
    const raw = withQuerySide(textCandidates(input, DEFAULT_CANDIDATES, null, null), input, DEFAULT_CANDIDATES, {
      offers: (id) => offers.get(id) ?? [],
    });
    const by = new Map(raw.map((r) => [r.keyword, r.dense]));
    expect(by.get('statin breast cancer')![DI.qJudged]).toBeCloseTo(Math.log1p(2), 12);
    expect(by.get('statin breast cancer')![DI.qPrec]).toBe(1);
    expect(by.get('statin breast cancer')![DI.fromQuery]).toBe(1);
    expect(by.get('heart disease')![DI.qRanked]).toBeCloseTo(Math.log1p(3), 12);
    expect(by.get('statin therapy')![DI.fromQuery]).toBe(0);
    // an offer that is not an n-gram of the item is 'borrowed'; the item's own n-grams are not
    expect(by.get('statin breast cancer')![DI.borrowed]).toBe(1);
    expect(by.get('statin therapy')![DI.borrowed]).toBe(0);
    expect(p.candidateKeywords(input)).toContain('statin breast cancer');
  });

  it('a policy that keeps its text candidates across query sides scores as one that never saw the earlier side', () => {
    const other = new Map([['i1', [{ keyword: 'older patients', judged: 5, ranked: 1, precision: 0.5 }]]]);
    const sideA = { offers: (id: string) => other.get(id) ?? [] };
    const sideB = { offers: (id: string) => offers.get(id) ?? [] };
    const p = new EmbeddedPolicy('item', { kMax: 4 });
    for (const [i, n] of ['idf', 'logTf', 'len2', 'qJudged', 'qPrec', 'fromQuery', 'borrowed', 'stopBias'].entries())
      p.setParam(n, ((i % 3) - 1) * 0.7);
    // Sample under side A (its text candidates are cached), then under B, then under none.
    p.attachQuerySide(sideA);
    const underA = p.candidateKeywords(input);
    p.sample(input, { temperature: 1, rng: createRng(1) });
    p.attachQuerySide(sideB);
    const fresh = EmbeddedPolicy.fromJSON(p.toJSON());
    fresh.attachQuerySide(sideB);
    expect(p.candidateKeywords(input)).toEqual(fresh.candidateKeywords(input));
    for (const seq of [['statin breast cancer'], ['statin therapy', 'heart disease'], []])
      expect(p.logProb(input, seq, 1)).toBeCloseTo(fresh.logProb(input, seq, 1), 12);
    // The offer side A made was not written into the kept text candidates.
    expect(underA).toContain('older patients');
    p.attachQuerySide(null);
    const bare = EmbeddedPolicy.fromJSON(p.toJSON());
    expect(p.candidateKeywords(input)).toEqual(bare.candidateKeywords(input));
    expect(p.logProb(input, ['older patients'], 1)).toBeCloseTo(bare.logProb(input, ['older patients'], 1), 12);
  });

  it("GRPO with grpoParams 'query' moves only the query-side weights, towards adopting a rewarded offer", () => {
    const p = new EmbeddedPolicy('item', { kMax: 6 });
    p.attachQuerySide({ offers: (id) => offers.get(id) ?? [] });
    const before = p.denseWeights();
    const rng = createRng(5);
    const group = Array.from({ length: 16 }, () => p.sample(input, { temperature: 1, rng }));
    // reward: 1 when the set adopts the judged offer
    const r: number[] = group.map((g) => (g.keywords.includes('statin breast cancer') ? 1 : 0));
    const mean = r.reduce((a, b) => a + b, 0) / r.length;
    expect(r.some((x) => x === 1)).toBe(true);
    const lpBefore = p.logProb(input, ['statin breast cancer']);
    p.grpoUpdate(
      group.map((g, i) => ({ input, keywords: g.keywords, oldLogProb: g.logProb, advantage: r[i] - mean })),
      { lr: 0.5 },
    );
    const after = p.denseWeights();
    for (const [k, v] of Object.entries(after)) {
      if (['qJudged', 'qRanked', 'qPrec', 'fromQuery'].includes(k)) continue;
      expect(v).toBe(before[k]);
    }
    expect(after.qJudged).toBeGreaterThan(before.qJudged);
    // no per-keyword weight moved (only non-zero sparse weights are listed)
    expect(p.params.sparse().length).toBe(0);
    expect(p.logProb(input, ['statin breast cancer'])).toBeGreaterThan(lpBefore);
  });
});
