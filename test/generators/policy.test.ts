import { describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { createRng } from '../../index/core/random.ts';
import { EmbeddedPolicy } from '../../generators/policy/model.ts';
import { POLICY_VERSION } from '../../generators/policy/serialize.ts';
import type { GenerateInput } from '../../generators/types.ts';

function* sequences(cands: string[], kMax: number, prefix: string[] = []): Generator<string[]> {
  yield prefix;
  if (prefix.length === kMax) return;
  for (const c of cands) if (!prefix.includes(c)) yield* sequences(cands, kMax, [...prefix, c]);
}

function randomise(p: EmbeddedPolicy, input: GenerateInput, seed: number) {
  const rng = createRng(seed);
  for (const k of p.candidateKeywords(input)) p.setParam('k\u0001' + k, rng() * 2 - 1);
  for (const n of ['idf', 'logTf', 'len2', 'firstPos', 'stopBias', 'stopSlope']) p.setParam(n, rng() * 2 - 1);
}

const small: GenerateInput = { id: 'x', title: 'heart', text: 'heart attack risk' };

describe('EmbeddedPolicy: exact probabilities', () => {
  it('sums to 1 over every ordered sequence with stop (kMax 3, several temperatures)', () => {
    const p = new EmbeddedPolicy('item', { kMax: 3 });
    randomise(p, small, 1);
    const cands = p.candidateKeywords(small);
    expect(cands.length).toBeGreaterThanOrEqual(4);
    for (const T of [1, 0.7, 2]) {
      let total = 0;
      for (const seq of sequences(cands, 3)) total += Math.exp(p.logProb(small, seq, T));
      expect(total).toBeCloseTo(1, 10);
    }
  });

  it('a sampled set reports the log-probability logProb() computes, and unknown keywords have probability 0', () => {
    const p = new EmbeddedPolicy('item', { kMax: 4 });
    randomise(p, small, 2);
    const rng = createRng(5);
    for (let i = 0; i < 20; i++) {
      const s = p.sample(small, { temperature: 1, rng });
      expect(s.keywords.length).toBeLessThanOrEqual(4);
      expect(new Set(s.keywords).size).toBe(s.keywords.length);
      expect(s.logProb).toBeCloseTo(p.logProb(small, s.keywords), 10);
    }
    expect(p.logProb(small, ['not a candidate'])).toBe(-Infinity);
  });

  it('empirical sampling frequencies match the exact probabilities', () => {
    const p = new EmbeddedPolicy('item', { kMax: 2 });
    randomise(p, small, 3);
    const rng = createRng(9);
    const counts = new Map<string, number>();
    const N = 20000;
    for (let i = 0; i < N; i++) {
      const k = p.sample(small, { temperature: 1, rng }).keywords.join('|');
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    for (const seq of sequences(p.candidateKeywords(small), 2)) {
      const exact = Math.exp(p.logProb(small, seq));
      expect(Math.abs((counts.get(seq.join('|')) ?? 0) / N - exact)).toBeLessThan(0.015);
    }
  });

  it('analytic gradients match finite differences', () => {
    const p = new EmbeddedPolicy('item', { kMax: 3 });
    randomise(p, small, 4);
    const cands = p.candidateKeywords(small);
    for (const [seq, T] of [
      [[cands[0], cands[2]], 1],
      [[], 0.7],
      [[cands[1], cands[0], cands[3]], 1.3],
    ] as [string[], number][]) {
      const g = p.gradLogProb(small, seq, T);
      for (const name of ['idf', 'logTf', 'len2', 'stopBias', 'stopSlope', 'k\u0001' + cands[0], 'k\u0001' + cands[3]]) {
        const w0 = p.getParam(name);
        const h = 1e-6;
        p.setParam(name, w0 + h);
        const up = p.logProb(small, seq, T);
        p.setParam(name, w0 - h);
        const down = p.logProb(small, seq, T);
        p.setParam(name, w0);
        expect(g.get(name) ?? 0).toBeCloseTo((up - down) / (2 * h), 5);
      }
    }
  });
});

// Items whose target keywords are the two-word n-grams of their title: a pattern the dense
// features (len2, inTitle) can learn and carry to unseen items.
const vocab =
  'acute renal failure chronic heart disease lung cancer therapy blood pressure liver enzyme insulin glucose bone marrow stem cell immune response viral load'.split(
    ' ',
  );
function makeItems(n: number, seed: number): { input: GenerateInput; target: string[] }[] {
  const rng = createRng(seed);
  const pick = () => vocab[Math.floor(rng() * vocab.length)];
  const out: { input: GenerateInput; target: string[] }[] = [];
  for (let i = 0; i < n; i++) {
    const title = [pick(), pick(), pick()];
    const text = Array.from({ length: 25 }, pick).join(' ');
    out.push({
      input: { id: `i${seed}-${i}`, title: title.join(' '), text },
      target: [title.slice(0, 2).join(' '), title.slice(1).join(' ')],
    });
  }
  return out;
}

describe('EmbeddedPolicy: training', () => {
  it('SFT raises the targets’ likelihood on held-out items above the untrained policy', () => {
    const train = makeItems(120, 1);
    const held = makeItems(40, 2);
    const p = new EmbeddedPolicy('item');
    p.fitStats([...train, ...held].map((x) => x.input));
    const ll = () => held.reduce((a, x) => a + p.logProb(x.input, x.target), 0) / held.length;
    const before = ll();
    const report = p.trainSft(train, { epochs: 6, lr: 0.2, seed: 1 });
    const after = ll();
    expect(report.coverage).toBe(1);
    expect(report.epochLoss.at(-1)!).toBeLessThan(report.epochLoss[0]);
    expect(after).toBeGreaterThan(before + 1);
  });

  it('a GRPO update raises the probability of positive-advantage samples', () => {
    const p = new EmbeddedPolicy('item', { kMax: 5, grpoParams: 'all' });
    const x = makeItems(1, 7)[0].input;
    const rng = createRng(3);
    const group = Array.from({ length: 8 }, () => p.sample(x, { temperature: 1, rng }));
    const mean = group.reduce((a, s) => a + s.keywords.length, 0) / 8;
    const adv = group.map((s) => s.keywords.length - mean); // reward: more keywords
    const batch = group.map((s, i) => ({ input: x, keywords: s.keywords, oldLogProb: s.logProb, advantage: adv[i] }));
    const ref = p.clone();
    const stats = p.grpoUpdate(batch, { lr: 0.05, klCoef: 0.01, reference: ref });
    expect(stats.meanRatio).toBeCloseTo(1, 10);
    for (const b of batch) {
      const after = p.logProb(x, b.keywords);
      if (b.advantage > 0) expect(after).toBeGreaterThan(b.oldLogProb);
      if (b.advantage < 0) expect(after).toBeLessThan(b.oldLogProb);
    }
    // Repeated steps from stale old log-probs are clipped.
    const s2 = p.grpoUpdate(batch, { lr: 0.5, steps: 3 });
    expect(s2.meanRatio).not.toBeCloseTo(1, 3);
  });

  it('round-trips through JSON and refuses another format version', () => {
    const train = makeItems(30, 4);
    const p = new EmbeddedPolicy('item');
    p.fitStats(train.map((x) => x.input));
    p.trainSft(train, { epochs: 2, seed: 2 });
    const q = EmbeddedPolicy.fromJSON(JSON.parse(JSON.stringify(p.toJSON())));
    for (const x of train.slice(0, 5)) {
      expect(q.logProb(x.input, x.target)).toBeCloseTo(p.logProb(x.input, x.target), 12);
      expect(q.decode(x.input, { greedy: true })).toEqual(p.decode(x.input, { greedy: true }));
    }
    const old = { ...p.toJSON(), version: POLICY_VERSION + 1 };
    let err: unknown;
    try {
      EmbeddedPolicy.fromJSON(old);
    } catch (e) {
      err = e;
    }
    expect(isCogrError(err, 'DB_VERSION')).toBe(true);
    expect((err as Error).message).toMatch(/version/);
  });

  it('generate() is reproducible by seed and refuses the other side', async () => {
    const p = new EmbeddedPolicy('item');
    const xs = makeItems(3, 5).map((x) => x.input);
    const a = await p.generate('item', xs, { samples: 4, temperature: 1, seed: 11 });
    const b = await p.generate('item', xs, { samples: 4, temperature: 1, seed: 11 });
    expect(a).toEqual(b);
    expect(a[0]).toHaveLength(4);
    await expect(p.generate('query', xs, { samples: 1, temperature: 1 })).rejects.toThrow(/item/);
  });
});

describe('EmbeddedPolicy JSON round trip', () => {
  it('keeps every sparse weight, also those that make the weight array grow', () => {
    const j = new EmbeddedPolicy('item').toJSON();
    j.sparse = Array.from({ length: 3000 }, (_, i): [string, number] => [`k\u0001kw${i}`, 1 + i]);
    expect(EmbeddedPolicy.fromJSON(j).toJSON().sparse).toEqual(j.sparse);
  });
});

describe('EmbeddedPolicy nucleus sampling (topP)', () => {
  const policy = new EmbeddedPolicy('item');
  const input = {
    id: 'x',
    title: 'Soluble lens proteins',
    text: 'Soluble lens proteins of the bovine eye: crystallins, their structure and ageing of the lens.',
  };
  it('samples only from the nucleus and reports the untruncated log-probability', () => {
    const greedy = policy.decode(input, { greedy: true }).keywords;
    for (let seed = 1; seed <= 5; seed++) {
      // A tiny nucleus holds only the most probable choice of each step: the argmax sequence.
      const r = policy.sample(input, { temperature: 1, topP: 1e-9, rng: createRng(seed) });
      expect(r.keywords).toEqual(greedy);
      expect(r.logProb).toBeCloseTo(policy.logProb(input, r.keywords, 1), 12);
    }
    // topP 1 is plain sampling (same draws as without it).
    expect(policy.sample(input, { temperature: 1, topP: 1, rng: createRng(3) })).toEqual(
      policy.sample(input, { temperature: 1, rng: createRng(3) }),
    );
    // A nucleus below 1 leaves out the least probable choices: over many draws, fewer distinct first keywords.
    const distinct = (topP: number) =>
      new Set(Array.from({ length: 200 }, (_, s) => policy.sample(input, { temperature: 1, topP, rng: createRng(100 + s) }).keywords[0]))
        .size;
    expect(distinct(0.3)).toBeLessThan(distinct(1));
  });
});
