import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeKeywordNormalizer } from '../../index/text/normalize.ts';
import { KeywordView } from '../../index/view/view.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { Vocabulary, carriedOnly, carriedTopM } from '../../generators/policy/vocabulary.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { DenseVectors, RelevanceModel, registerDenseVectors } from '../../generators/planner/relevance.ts';
import { Relatedness } from '../../generators/planner/related.ts';
import { oracleQuery, plannableOracle } from '../../src/evolve/oracle.ts';

const item = (id: string, title: string, text: string) => ({ id, title, text });
const key = makeKeywordNormalizer({ analyzer: 'english' }).key;

describe('the shared vocabulary', () => {
  const items = [
    item('a', 'heart disease in children', 'coronary heart disease and diet. item 1752 num num'),
    item('b', 'heart disease risk', 'heart disease risk factors: smoking and diet. review summarizes current work'),
    item('c', 'diet and heart disease', 'a low fat diet lowers the risk of heart disease. review summarizes current'),
    item('d', 'dental x-rays', 'dental x-rays and thyroid cancer'),
    item('e', 'x-ray safety', 'dental x-ray exposure, the thyroid and cancer risk'),
    item('f', 'thyroid cancer', 'thyroid cancer after dental x-rays'),
    item('g', 'breast cancer', 'breast cancer risk and diet'),
    ...Array.from({ length: 30 }, (_, i) => item(`z${i}`, `filler ${i}`, `unrelated words number ${i} about gardening and weather`)),
  ];

  it('holds phrases several items share, by match key, and nothing one item has, no number, no placeholder', () => {
    const v = Vocabulary.build(items, 'english', { minItems: 3, maxShare: 0.2, cohesion: 0.15 });
    expect(v.has('heart disease')).toBe(true); // a, b, c
    expect(v.has('dental x-rays')).toBe(true); // d, f ("dental x-ray" in e is the same key)
    expect(v.has('dental x-ray')).toBe(true);
    expect(v.has('thyroid')).toBe(true);
    expect(v.has('1752')).toBe(false); // a number, and one item
    expect(v.has('num')).toBe(false); // the placeholder
    expect(v.has('smoking')).toBe(false); // one item
    expect(v.has('gardening')).toBe(false); // 30 of 37 items: over maxShare
  });

  it('keeps a phrase only when it is cohesive: it holds a fair share of the items of its rarest word', () => {
    const loose = Vocabulary.build(items, 'english', { minItems: 2, maxShare: 0.5, cohesion: 0 });
    const strict = Vocabulary.build(items, 'english', { minItems: 2, maxShare: 0.5, cohesion: 0.9 });
    // "review summarizes current" is in 2 items, as are its rarest words: cohesive by this measure
    expect(loose.has('review summarizes current')).toBe(true);
    // "cancer risk" is in 2 items (e, g: "breast cancer risk"), "cancer" in 4: 0.5 < 0.9
    expect(loose.has('cancer risk')).toBe(true);
    expect(strict.has('cancer risk')).toBe(false);
  });

  it('round-trips through JSON and through the item policy document', () => {
    const v = Vocabulary.build(items, 'english', { minItems: 3, maxShare: 0.2 });
    const back = Vocabulary.fromJSON(JSON.parse(JSON.stringify(v.toJSON())));
    expect(back.size).toBe(v.size);
    expect(back.has('heart disease')).toBe(true);
    const p = new EmbeddedPolicy('item');
    p.fitStats(items);
    p.fitVocabulary(items, 'english', { minItems: 3, maxShare: 0.2 });
    const q = EmbeddedPolicy.fromJSON(JSON.parse(JSON.stringify(p.toJSON())));
    expect(q.vocabulary?.size).toBe(v.size);
    expect(q.candidateKeywords(items[0])).toEqual(p.candidateKeywords(items[0]));
  });

  it("draws an item's candidates from it only, without the title (unless the title is a phrase of it)", () => {
    const p = new EmbeddedPolicy('item');
    p.fitStats(items);
    const v = p.fitVocabulary(items, 'english', { minItems: 3, maxShare: 0.2 });
    for (const it of items.slice(0, 7)) {
      const cands = p.candidateKeywords(it);
      expect(cands.length).toBeGreaterThan(0);
      for (const k of cands) expect(v.has(k)).toBe(true);
      if (!v.has(it.title)) expect(cands).not.toContain(it.title);
    }
  });
});

describe('carried keywords', () => {
  it('carriedOnly drops what fewer items carry, counting an existing index', () => {
    const entries = [
      { id: 'a', keywords: ['diet', 'statins', 'finland'] },
      { id: 'b', keywords: ['diet', 'statin'] },
      { id: 'c', keywords: ['diet', 'x'] },
    ];
    const out = carriedOnly(entries, 2, key);
    expect(out.map((e) => e.keywords)).toEqual([['diet', 'statins'], ['diet', 'statin'], ['diet']]);
    const withIndex = carriedOnly(entries, 2, key, (k) => (k === key('finland') ? 1 : 0));
    expect(withIndex[0].keywords).toEqual(['diet', 'statins', 'finland']);
  });

  it('carriedTopM gives every item up to M keywords, each carried by at least the minimum (random lists)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), { maxLength: 8 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 2, max: 4 }),
        (lists, M, min) => {
          const ranked = new Map(lists.map((l, i) => [`i${i}`, l]));
          const out = carriedTopM(ranked, M, min, (k) => k);
          const count = new Map<string, number>();
          for (const ks of out.values()) {
            expect(ks.length).toBeLessThanOrEqual(M);
            expect(new Set(ks).size).toBe(ks.length);
            for (const k of ks) count.set(k, (count.get(k) ?? 0) + 1);
          }
          for (const [id, ks] of out) for (const k of ks) expect(ranked.get(id)).toContain(k);
          for (const c of count.values()) expect(c).toBeGreaterThanOrEqual(min);
        },
      ),
    );
  });
});

// A small collection: topics shared by several items, plus one item with a unique phrase that
// the relevance model will like for its query, and item titles a query can name.
function collection() {
  const topics = [
    ['deafness', 'hearing loss', 'noise exposure', 'cochlear implants'],
    ['dental x-rays', 'thyroid cancer', 'radiation dose', 'ionizing radiation'],
    ['heart disease', 'blood pressure', 'cholesterol levels', 'saturated fat'],
    ['autophagy', 'caloric restriction', 'lifespan extension', 'ageing cells'],
  ];
  const items = [];
  for (let t = 0; t < topics.length; t++)
    for (let i = 0; i < 8; i++) {
      const ws = topics[t];
      items.push(
        item(
          `t${t}-${i}`,
          `${ws[i % 4]} study ${String.fromCharCode(97 + i)}${t}`,
          `${ws[i % 4]} and ${ws[(i + 1) % 4]}; ${ws[(i + 2) % 4]} in adults. ${ws[0]} ${ws[1]}. unique${t}x${i} marker${t * 10 + i}`,
        ),
      );
    }
  items.push(item('named', 'the zebra protocol', 'the zebra protocol for hearing loss and deafness in adults'));
  const queries = [
    { id: 'q0', text: 'deafness and hearing loss', rel: ['t0-0', 't0-1', 't0-2', 't0-3'] },
    { id: 'q1', text: 'are dental x-rays safe', rel: ['t1-0', 't1-1', 't1-4'] },
    { id: 'q2', text: 'heart disease and cholesterol', rel: ['t2-0', 't2-2', 't2-3'] },
    { id: 'q3', text: 'autophagy to live longer', rel: ['t3-0', 't3-1'] },
    { id: 'q4', text: 'noise and hearing', rel: ['t0-4', 't0-5'] },
    { id: 'q5', text: 'radiation dose of x-rays', rel: ['t1-2', 't1-3'] },
  ];
  return { items, queries };
}

function sharedSetup(minCarriers: number) {
  const { items, queries } = collection();
  const policy = new EmbeddedPolicy('item');
  policy.fitStats(items);
  policy.fitVocabulary(items, 'english', { minItems: 3, maxShare: 0.5 });
  const ranked = new Map(items.map((it) => [it.id, policy.rank(it, 20)]));
  const assigned = carriedTopM(ranked, 10, minCarriers, key);
  const view = KeywordView.build(
    'item',
    0,
    items.map((it) => ({ id: it.id, self: it.title, keywords: assigned.get(it.id)! })),
    { analyzer: 'english' },
  );
  const model = RelevanceModel.fit(
    items,
    queries.map((q) => [{ id: q.id, text: q.text }, q.rel] as const),
    { analyzer: 'english', rm3: false },
  );
  const planner = new KeywordPlanner(model, { minCarriers, relatedness: 0.7, labels: false, names: true });
  planner.attachOpposite(view);
  return { items, queries, view, planner };
}

describe('the query planner under the shared vocabulary', () => {
  it('never plans a keyword that fewer than the minimum of items carry (several minimums, sampled plans too)', () => {
    for (const min of [2, 3, 4]) {
      const { view, planner } = sharedSetup(min);
      const texts = [
        'deafness and hearing loss',
        'are dental x-rays safe',
        'unique1x2 marker12',
        'heart disease',
        'lifespan of ageing cells',
      ];
      let planned = 0;
      for (const text of texts)
        for (let s = 0; s < 5; s++) {
          const rng = (() => {
            let x = s + 1;
            return () => (x = (x * 48271) % 2147483647) / 2147483647;
          })();
          const r = planner.plan({ id: `h-${text}`, text }, s === 0 ? {} : { temperature: 1, rng });
          for (const k of r.keywords) {
            planned++;
            const o = view.ordinalOfKeyword(k);
            expect(o, k).toBeGreaterThanOrEqual(0);
            expect(view.keywordDf(o), `${k} for ${text}`).toBeGreaterThanOrEqual(min);
          }
        }
      expect(planned).toBeGreaterThan(0);
    }
  });

  it('plans no item title and no keyword unrelated to the query', () => {
    const { items, planner } = sharedSetup(3);
    const titles = new Set(items.map((it) => key(it.title)));
    for (const text of ['deafness and hearing loss', 'are dental x-rays safe', 'heart disease and cholesterol']) {
      const r = planner.plan({ id: `h-${text}`, text });
      expect(r.keywords.length).toBeGreaterThan(0);
      for (const k of r.keywords) expect(titles.has(key(k))).toBe(false);
      const rel = new Relatedness(planner.relevance as RelevanceModel, (planner.relevance as RelevanceModel).size).forQuery(text);
      for (const k of r.keywords) expect(rel(k), `${k} for ${text}`).toBeGreaterThanOrEqual(0.7);
    }
  });

  it('gives a query that names an item by its title that title, and so the item', () => {
    const { view, planner } = sharedSetup(3);
    const r = planner.plan({ id: 'h-named', text: 'what is the zebra protocol for deafness' });
    expect(r.keywords[0]).toBe('the zebra protocol');
    expect([...r.matched].map((e) => view.id(e))).toContain('named');
    // and a query that does not name it does not get it
    const s = planner.plan({ id: 'h-other', text: 'zebra' });
    expect(s.keywords).not.toContain('the zebra protocol');
  });
});

describe('the oracle among what the planner may plan (cogr oracle, oracle SFT targets)', () => {
  it('takes only keywords carried by the minimum and related to the query, and its F1 is that of their matched set', () => {
    const { queries, view, planner } = sharedSetup(3);
    const model = planner.relevance as RelevanceModel;
    const oracle = plannableOracle({ minCarriers: 3, relatedness: 0.7 }, view, model, 30);
    let planned = 0;
    for (const q of queries) {
      const rel = new Set(q.rel.map((id) => view.ordinalOf(id)));
      const r = oracle(q.text, rel);
      const related = new Relatedness(model, model.size).forQuery(q.text);
      for (const k of r.keywords) {
        planned++;
        expect(view.keywordDf(k), view.surface(k)).toBeGreaterThanOrEqual(3);
        expect(related(view.surface(k)), `${view.surface(k)} for ${q.text}`).toBeGreaterThanOrEqual(0.7);
        expect([...view.postings(k)].some((e) => rel.has(e))).toBe(true);
      }
      // F1 of the union of the chosen keywords' postings, counted here
      const union = new Set(r.keywords.flatMap((k) => [...view.postings(k)]));
      const tp = [...union].filter((e) => rel.has(e)).length;
      expect(r.f1).toBeCloseTo(union.size + rel.size > 0 ? (2 * tp) / (union.size + rel.size) : 0, 12);
      // without the relatedness rule it is the shared-vocabulary oracle
      expect(plannableOracle({ minCarriers: 3, relatedness: null }, view, model, 30)(q.text, rel)).toEqual(oracleQuery(view, rel, 30, 3));
    }
    expect(planned).toBeGreaterThan(0);
  });
});

describe('relatedness', () => {
  const { items, queries } = collection();
  const model = RelevanceModel.fit(
    items,
    queries.map((q) => [{ id: q.id, text: q.text }, q.rel] as const),
    { analyzer: 'english', rm3: false },
  );
  const rel = new Relatedness(model, model.size);

  it('is 1 for a keyword sharing a word with the query', () => {
    expect(rel.forQuery('are dental x-rays safe')('dental')).toBe(1);
    expect(rel.forQuery('deafness')('deafness in adults')).toBe(1);
  });

  /** NPMI from the counts, by hand: the items holding every word of `k` against those holding `w`. */
  function npmi(k: string, w: string): number {
    const n = model.size;
    const holds = (word: string) => new Set(model.wordItems(model.textWords(word)[0]));
    const ks = model.textWords(k).map((x) => new Set(model.wordItems(x)));
    const kItems = [...ks[0]].filter((e) => ks.every((s) => s.has(e)));
    const wItems = holds(w);
    const both = kItems.filter((e) => wItems.has(e)).length;
    if (both < 2) return -1;
    const pab = both / n;
    return Math.log(pab / ((kItems.length / n) * (wItems.size / n))) / -Math.log(pab);
  }

  it("is the best NPMI of the keyword's items with a query word's items, from the texts", () => {
    expect(npmi('radiation dose', 'thyroid')).toBeGreaterThan(0.3); // the same topic
    expect(rel.forQuery('thyroid')('radiation dose')).toBeCloseTo(npmi('radiation dose', 'thyroid'), 12);
    expect(rel.forQuery('deafness')('cochlear')).toBeCloseTo(npmi('cochlear', 'deafness'), 12);
    // the best over the query's words
    expect(rel.forQuery('thyroid gardening')('radiation dose')).toBeCloseTo(npmi('radiation dose', 'thyroid'), 12);
    // never together: −1; together in fewer than two items: −1
    expect(rel.forQuery('cholesterol')('hearing')).toBe(-1);
    expect(rel.forQuery('zebra')('adults')).toBe(-1);
  });
});

describe("the query planner's encoder rule (keywordCosine)", () => {
  // A bag of the topics' words, one dimension each: a keyword sharing no such word with its
  // query sits near cosine 0, one sharing most of its words above 0.5.
  const vocab =
    'deafness hearing loss noise exposure cochlear implants dental x-rays thyroid cancer radiation dose ionizing heart disease blood pressure cholesterol levels saturated fat autophagy caloric restriction lifespan extension ageing cells'.split(
      ' ',
    );
  const DIM = vocab.length + 1;
  const vec = (text: string): Float32Array => {
    const v = new Float32Array(DIM).fill(0);
    for (const w of text.toLowerCase().split(/[^a-z-]+/)) {
      const j = vocab.indexOf(w);
      if (j >= 0) v[j] += 1;
    }
    v[DIM - 1] = 0.05; // never the zero vector
    return v;
  };
  const cos = (a: Float32Array, b: Float32Array) => {
    let d = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) ((d += a[i] * b[i]), (na += a[i] * a[i]), (nb += b[i] * b[i]));
    return d / Math.sqrt(na * nb);
  };

  function gatedSetup(keywordCosine: number | null, fetched: string[][] | null, name = `topic-vectors-${keywordCosine}`) {
    const { items, queries } = collection();
    const policy = new EmbeddedPolicy('item');
    policy.fitStats(items);
    policy.fitVocabulary(items, 'english', { minItems: 3, maxShare: 0.5 });
    const ranked = new Map(items.map((it) => [it.id, policy.rank(it, 20)]));
    const assigned = carriedTopM(ranked, 10, 3, key);
    const view = KeywordView.build(
      'item',
      0,
      items.map((it) => ({ id: it.id, self: it.title, keywords: assigned.get(it.id)! })),
      { analyzer: 'english' },
    );
    const model = name;
    const dense = new DenseVectors(
      model,
      DIM,
      new Map(items.map((it) => [it.id, vec(`${it.title} ${it.text}`)])),
      new Map(queries.map((q) => [q.text, vec(q.text)])),
    );
    if (fetched)
      dense.setFetcher((texts) => {
        fetched.push([...texts]);
        return texts.map(vec);
      });
    registerDenseVectors(dense);
    const relevance = RelevanceModel.fit(
      items,
      queries.map((q) => [{ id: q.id, text: q.text }, q.rel] as const),
      { analyzer: 'english', rm3: false, embeddings: model },
    );
    const planner = new KeywordPlanner(relevance, { minCarriers: 3, relatedness: -1, keywordCosine, labels: false, names: true });
    planner.attachOpposite(view);
    return Object.assign(planner, { view });
  }

  const texts = ['deafness and hearing loss', 'are dental x-rays safe', 'heart disease and cholesterol', 'autophagy to live longer'];

  it('plans only keywords at or above the cosine to their query, asking the endpoint once per keyword', () => {
    const fetched: string[][] = [];
    const gated = gatedSetup(0.5, fetched);
    const open = gatedSetup(null, []);
    let below = 0;
    let planned = 0;
    for (const text of texts) {
      const q = vec(text);
      // without the rule, some planned keyword is off the query's topic: the rule has work to do
      for (const k of open.plan({ id: `h-${text}`, text }).keywords) if (cos(vec(k), q) < 0.5) below++;
      const r = gated.plan({ id: `h-${text}`, text });
      for (const k of r.keywords) {
        planned++;
        expect(cos(vec(k), q), `${k} for ${text}`).toBeGreaterThanOrEqual(0.5);
      }
    }
    expect(below).toBeGreaterThan(0);
    expect(planned).toBeGreaterThan(0);
    // the query texts were known; every keyword was asked for once
    const asked = fetched.flat();
    expect(asked.length).toBeGreaterThan(0);
    expect(new Set(asked).size).toBe(asked.length);
    for (const text of texts) expect(asked).not.toContain(text);
  });

  it('fetches the vectors a pass over many queries needs in one call, ahead, and plans them as one by one', () => {
    const inputs = texts.map((text) => ({ id: `h-${text}`, text }));
    const oneByOne: string[][] = [];
    const alone = gatedSetup(0.5, oneByOne, 'topic-vectors-alone');
    const plansAlone = inputs.map((q) => alone.plan(q).keywords);
    const ahead: string[][] = [];
    const batched = gatedSetup(0.5, ahead, 'topic-vectors-ahead');
    batched.prefetch(inputs);
    expect(ahead.length).toBe(1);
    const plans = inputs.map((q) => batched.plan(q).keywords);
    // one call for the whole pass (the plans asked for nothing more), the texts the plans one by one asked for, the same plans
    expect(ahead.length).toBe(1);
    expect(oneByOne.length).toBeGreaterThan(0);
    expect(new Set(ahead[0])).toEqual(new Set(oneByOne.flat()));
    expect(plans).toEqual(plansAlone);
    // nothing to fetch without the rule, nor for a planner not attached to an item index (one loaded for its relevance model only)
    const none: string[][] = [];
    const open = gatedSetup(null, none, 'topic-vectors-open-ahead');
    open.prefetch(inputs);
    expect(none).toEqual([]);
    const unattached = new KeywordPlanner(batched.relevance, { minCarriers: 3, relatedness: -1, keywordCosine: 0.5, labels: false });
    expect(() => unattached.prefetch(inputs)).not.toThrow();
    expect(ahead.length).toBe(1);
  });

  it("bounds the oracle the same way: SFT's oracle targets and cogr oracle keep only keywords at or above the cosine", () => {
    const { queries } = collection();
    const gated = gatedSetup(0.5, [], 'topic-vectors-oracle');
    const view = gated.view;
    let below = 0;
    let kept = 0;
    for (const q of queries) {
      const rel = new Set(q.rel.map((id) => view.ordinalOf(id)).filter((o) => o >= 0));
      const qv = vec(q.text);
      for (const k of plannableOracle({ minCarriers: 3, relatedness: -1 }, view, gated.relevance, 30)(q.text, rel).keywords)
        if (cos(vec(view.surface(k)), qv) < 0.5) below++;
      for (const k of plannableOracle({ minCarriers: 3, relatedness: -1, keywordCosine: 0.5 }, view, gated.relevance, 30)(q.text, rel)
        .keywords) {
        kept++;
        expect(cos(vec(view.surface(k)), qv), `${view.surface(k)} for ${q.text}`).toBeGreaterThanOrEqual(0.5);
      }
    }
    expect(below).toBeGreaterThan(0);
    expect(kept).toBeGreaterThan(0);
  });

  it('is DATA_MISSING naming the model when a keyword has no vector and no endpoint is set to ask, and refused without an embeddings model', () => {
    const noEndpoint = gatedSetup(0.5, null, 'topic-vectors-no-endpoint');
    expect(() => noEndpoint.plan({ id: 'h', text: 'deafness and hearing loss' })).toThrow(
      /no topic-vectors-no-endpoint vector for .* and no embeddings endpoint to ask/,
    );
    const { items, queries } = collection();
    const relevance = RelevanceModel.fit(
      items,
      queries.map((q) => [{ id: q.id, text: q.text }, q.rel] as const),
      { analyzer: 'english', rm3: false },
    );
    const view = KeywordView.build(
      'item',
      0,
      items.map((it) => ({ id: it.id, self: it.title, keywords: ['hearing loss'] })),
      {
        analyzer: 'english',
      },
    );
    const planner = new KeywordPlanner(relevance, { minCarriers: 3, relatedness: -1, keywordCosine: 0.3, labels: false, names: true });
    planner.attachOpposite(view);
    expect(() => planner.plan({ id: 'h', text: 'deafness and hearing loss' })).toThrow(
      /keywordCosine rule needs a relevance model with embeddings/,
    );
  });
});
