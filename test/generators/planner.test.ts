import { describe, expect, it } from 'vitest';
import { getAnalyzer } from '../../index/text/analyzer.ts';
import { createRng } from '../../index/core/random.ts';
import { KeywordView } from '../../index/view/view.ts';
import type { RelevanceSource } from '../../generators/planner/config.ts';
import { KeywordPlanner } from '../../generators/planner/planner.ts';
import { topByP } from '../../generators/planner/queryContext.ts';
import { setF1 } from '../../generators/planner/training.ts';
import { RelevanceModel } from '../../generators/planner/relevance.ts';

/** A relevance source with fixed probabilities: one feature x = logit(p), weight w0 = 1. */
class FixedP implements RelevanceSource {
  readonly analyzer = getAnalyzer('english');
  readonly dim = 2;
  weightsVersion = 0;
  private w = Float64Array.from([0, 1]);
  constructor(
    private readonly ids: string[],
    private readonly p: Record<string, number[]>,
  ) {}
  itemOrdinal(id: string): number {
    return this.ids.indexOf(id);
  }
  features(q: { id: string }): Float64Array {
    const ps = this.p[q.id];
    const x = new Float64Array(ps.length * 2);
    ps.forEach((v, i) => {
      x[2 * i] = 1;
      x[2 * i + 1] = Math.log(v / (1 - v));
    });
    return x;
  }
  probabilities(_q: unknown, x: Float64Array): Float64Array {
    const out = new Float64Array(x.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = 1 / (1 + Math.exp(-(this.w[0] * x[2 * i] + this.w[1] * x[2 * i + 1])));
    return out;
  }
  getWeights(): Float64Array {
    return Float64Array.from(this.w);
  }
  setWeights(w: ArrayLike<number>): void {
    this.w = Float64Array.from(w);
    this.weightsVersion++;
  }
  wordIdf(): number {
    return 1;
  }
  toJSON(): unknown {
    return null;
  }
}

// Items A..E; keywords: k1 → {A, B}, k2 → {C, D}, k3 → {A, E}, k4 → {C}.
const entries = [
  { id: 'A', self: '', keywords: ['kone', 'kthree'] },
  { id: 'B', self: '', keywords: ['kone'] },
  { id: 'C', self: '', keywords: ['ktwo', 'kfour'] },
  { id: 'F', self: '', keywords: [] },
  { id: 'D', self: '', keywords: ['ktwo'] },
  { id: 'E', self: '', keywords: ['kthree'] },
];
const view = KeywordView.build('item', 0, entries, { analyzer: 'english' });
const P = { q: [0.9, 0.8, 0.7, 0.1, 0.05, 1e-12] };
const query = { id: 'q', text: 'unrelated words' };

describe('KeywordPlanner: the greedy expected-F1 choice, by hand', () => {
  it('adds the keyword that most raises G = 2Σp/(|U| + αE) and stops when nothing raises it', () => {
    // E = 2.55. Step 1: kone 2·1.7/(2 + 2.55) = 0.7473 beats kfour 1.4/3.55, ktwo 1.6/4.55, kthree 1.9/4.55.
    // Step 2: kfour 2·2.4/(3 + 2.55) = 0.8649 > 0.7473; ktwo 5/6.55 = 0.7634; kthree 3.5/5.55 = 0.6306.
    // Step 3: ktwo adds D: 5/6.55 = 0.7634 < 0.8649; kthree adds E: 4.9/6.55 = 0.7481 → stop.
    const planner = new KeywordPlanner(new FixedP(['A', 'B', 'C', 'D', 'E', 'F'], P), { topItems: 5 });
    planner.attachOpposite(view);
    const r = planner.plan(query);
    expect(r.keywords).toEqual(['kone', 'kfour']);
    expect([...r.matched].map((e) => view.id(e))).toEqual(['A', 'B', 'C']);
    expect(r.expectedRelevant).toBeCloseTo(2.55, 9);
    expect(r.expectedF1).toBeCloseTo(4.8 / 5.55, 9);
  });

  it('α trades precision for recall: small α keeps the precise set, large α adds lower-p postings', () => {
    // α = 0.1 (αE = 0.255): kone 3.4/2.255 = 1.508; then kfour 4.8/3.255 = 1.475 < 1.508 → stop.
    // α = 10 (αE = 25.5): kone 3.4/27.5; then ktwo (C and D) 5.0/29.5 = 0.1695 beats kfour (C) 4.8/28.5 = 0.1684;
    //   then kthree (E) 5.1/30.5 = 0.1672 < 0.1695 → stop (kfour adds nothing any more).
    // α = 100 (αE = 255): kone, ktwo (5.0/259 = 0.01931), then kthree 5.1/260 = 0.01962 > 0.01931.
    const planner = new KeywordPlanner(new FixedP(['A', 'B', 'C', 'D', 'E', 'F'], P), { topItems: 5 });
    planner.attachOpposite(view);
    planner.alpha = 0.1;
    expect(planner.plan(query).keywords).toEqual(['kone']);
    planner.alpha = 10;
    expect(planner.plan(query).keywords).toEqual(['kone', 'ktwo']);
    planner.alpha = 100;
    expect(planner.plan(query).keywords).toEqual(['kone', 'ktwo', 'kthree']);
  });

  it('starts from the items matched by the query string {q}', () => {
    const titled = KeywordView.build(
      'item',
      0,
      entries.map((e) => (e.id === 'C' ? { ...e, self: 'gamma title' } : e)),
      { analyzer: 'english' },
    );
    const planner = new KeywordPlanner(new FixedP(['A', 'B', 'C', 'D', 'E', 'F'], { q2: P.q }), { topItems: 5 });
    planner.attachOpposite(titled);
    // "gamma title" is C's title: U starts as {C} (p 0.7); kone then 2·(0.7+1.7)/(3 + 2.55) = 0.8649 …
    const r = planner.plan({ id: 'q2', text: 'gamma title' });
    expect([...r.matched].map((e) => titled.id(e))).toEqual(['A', 'B', 'C']);
    expect(r.keywords).toEqual(['kone']);
  });

  it('topByP keeps the k best by p, ties to the lower ordinal', () => {
    const p = Float64Array.from([0.1, 0.5, 0.5, 0.9, 0.2]);
    expect(topByP(p, 3)).toEqual([3, 1, 2]);
    expect(topByP(p, 10)).toEqual([3, 1, 2, 4, 0]);
  });
});

function* sequences(cands: string[], kMax: number, prefix: string[] = []): Generator<string[]> {
  yield prefix;
  if (prefix.length === kMax) return;
  for (const c of cands) if (!prefix.includes(c)) yield* sequences(cands, kMax, [...prefix, c]);
}

describe('KeywordPlanner: the stochastic policy', () => {
  const planner = new KeywordPlanner(new FixedP(['A', 'B', 'C', 'D', 'E', 'F'], P), { topItems: 5, maxKeywords: 3, grpoParams: 'all' });
  planner.attachOpposite(view);
  planner.alpha = 0.8;
  planner.stopBias = 0.3;
  planner.setTerm('ktwo', -0.4);
  planner.setTerm('kthree', 0.25);

  it('sums to 1 over every keyword sequence (exact log-probabilities, several temperatures)', () => {
    for (const T of [1, 0.5, 2]) {
      let total = 0;
      for (const seq of sequences(['kone', 'ktwo', 'kthree', 'kfour'], 3)) {
        const lp = planner.logProb(query, seq, T);
        if (Number.isFinite(lp)) total += Math.exp(lp);
      }
      expect(total).toBeCloseTo(1, 10);
    }
  });

  it('a sample reports the log-probability logProb() computes; impossible sequences have probability 0', () => {
    const rng = createRng(3);
    for (let i = 0; i < 30; i++) {
      const r = planner.plan(query, { temperature: 1, rng });
      expect(planner.logProb(query, r.keywords, 1)).toBeCloseTo(r.logProb, 12);
    }
    expect(planner.logProb(query, ['nokeyword'], 1)).toBe(-Infinity);
    expect(planner.logProb(query, ['kone', 'kone'], 1)).toBe(-Infinity);
  });

  it('its gradient matches finite differences for θ, θ_stop, ln α and the relevance weights', () => {
    const seq = ['kone', 'kthree'];
    const g = planner.gradLogProb(query, seq, 0.7);
    const h = 1e-6;
    const fd = (set: (d: number) => void) => {
      set(h);
      const a = planner.logProb(query, seq, 0.7);
      set(-2 * h);
      const b = planner.logProb(query, seq, 0.7);
      set(h);
      return (a - b) / (2 * h);
    };
    expect(g.stop).toBeCloseTo(
      fd((d) => (planner.stopBias += d)),
      5,
    );
    expect(g.terms.get('ktwo')).toBeCloseTo(
      fd((d) => planner.setTerm('ktwo', planner.term('ktwo') + d)),
      5,
    );
    expect(g.lnAlpha).toBeCloseTo(
      fd((d) => (planner.alpha *= Math.exp(d))),
      5,
    );
    const rel = planner.relevance;
    for (let j = 0; j < rel.dim; j++) {
      const num = fd((d) => {
        const w = rel.getWeights();
        w[j] += d;
        rel.setWeights(w);
      });
      expect(g.w[j]).toBeCloseTo(num, 5);
    }
  });
});

describe('KeywordPlanner: leave-one-out for training queries', () => {
  // Two training queries; their relevant items carry their own strings as keywords
  // (what the item side learns to do). Planned as held out, a query's own {q} cannot match.
  const items = [
    { id: 'i1', title: 'statin therapy', text: 'statins lower cholesterol in patients' },
    { id: 'i2', title: 'cholesterol diet', text: 'diet and cholesterol levels' },
    { id: 'i3', title: 'breast cancer', text: 'breast cancer screening with mammography' },
    { id: 'i4', title: 'cancer risk', text: 'statins and cancer risk' },
  ];
  const training = [
    [{ id: 'qa', text: 'statins cholesterol' }, ['i1', 'i2']],
    [{ id: 'qb', text: 'breast cancer statins' }, ['i3', 'i4']],
  ] as const;
  const rel = RelevanceModel.fit(items, training, { judgements: true, neighbours: 5 });
  const itemView = KeywordView.build(
    'item',
    0,
    items.map((it) => ({
      id: it.id,
      self: it.title,
      keywords: it.id === 'i1' || it.id === 'i2' ? ['statins cholesterol', 'lipid'] : ['breast cancer statins', 'tumour'],
    })),
    { analyzer: 'english' },
  );
  const relOrd = (ids: readonly string[]) => new Set(ids.map((id) => itemView.ordinalOf(id)));

  it('without removal a training query matches exactly its relevant items (F1 = 1); as held out its own string is gone', () => {
    const planner = new KeywordPlanner(rel);
    planner.attachOpposite(itemView);
    const q = training[0][0];
    expect(setF1(planner.plan(q).matched, relOrd(training[0][1]))).toBe(1);
    const held = planner.plan(q, { asHeldOut: true });
    expect(held.keywords.map((k) => getAnalyzer('english').key(k))).not.toContain('statin cholesterol');
    // α tuned on held-out style plans does not see F1 = 1 for every value
    const t = planner.tuneAlpha(
      training.map(([qq]) => qq),
      (id) => relOrd(training.find(([qq]) => qq.id === id)![1]),
    );
    expect(t.curve.some(([, f]) => f < 1)).toBe(true);
  });

  it("alphaCurves gives each query's F1 at every α, leaves α alone, and its column means are tuneAlpha's curve", () => {
    const planner = new KeywordPlanner(rel);
    planner.attachOpposite(itemView);
    planner.alpha = 0.777;
    const inputs = training.map(([qq]) => qq);
    const relOf = (id: string) => relOrd(training.find(([qq]) => qq.id === id)![1]);
    const grid = [0.125, 1, 4];
    const rows = planner.alphaCurves(inputs, relOf, grid);
    expect(planner.alpha).toBe(0.777);
    expect(rows.map((r) => r.length)).toEqual([3, 3]);
    // α matters here: some query's F1 differs across the grid.
    expect(rows.some((r) => new Set(r).size > 1)).toBe(true);
    // A row is the query's own F1 at that α, planned as held out.
    for (const [i, q] of inputs.entries())
      grid.forEach((a, g) => {
        planner.alpha = a;
        expect(rows[i][g]).toBe(setF1(planner.plan(q, { asHeldOut: true }).matched, relOf(q.id)));
      });
    const t = planner.tuneAlpha(inputs, relOf, grid);
    expect(t.curve).toEqual(grid.map((a, g) => [a, (rows[0][g] + rows[1][g]) / 2]));
    expect(planner.alpha).toBe(t.alpha);
  });

  it("a training query's own judgements cannot change its features (scrambled judgements, same features)", () => {
    const scrambled = [
      [{ id: 'qa', text: 'statins cholesterol' }, ['i3', 'i4']],
      [{ id: 'qb', text: 'breast cancer statins' }, ['i3', 'i4']],
    ] as const;
    const other = RelevanceModel.create(items, scrambled, { judgements: true, neighbours: 5 });
    const fa = rel.features(training[0][0]);
    const fb = other.features(scrambled[0][0]);
    expect(Array.from(fb)).toEqual(Array.from(fa));
  });
});
