import { describe, expect, it } from 'vitest';
import { judgedCollection, pseudoWord } from '../../bench/judgedCollection.ts';
import { phaseOf } from '../../bench/evolve.ts';
import { phaseGroup, renderEvolveChart } from '../../bench/evolveChart.ts';

describe('judgedCollection (the evolve bench collection)', () => {
  it('has the asked shape: items, queries, relevant per query from the query topic', () => {
    const c = judgedCollection({ items: 600, queries: 40, relevant: 25, seed: 3 });
    expect(c.items).toHaveLength(600);
    expect(c.queries).toHaveLength(40);
    expect(new Set(c.items.map((i) => i.id)).size).toBe(600);
    expect(new Set(c.queries.map((q) => q.id)).size).toBe(40);
    for (const q of c.queries) {
      const rel = c.relevant.get(q.id)!;
      expect(rel.size).toBe(25);
      expect(c.qrels.get(q.id)!.size).toBe(25);
      const words = q.text.split(' ');
      expect(words.length).toBeGreaterThanOrEqual(2);
      expect(words.length).toBeLessThanOrEqual(4);
      // Most relevant items share a query word (the judgements follow the text).
      const sharing = [...rel].filter((id) => {
        const it = c.items.find((x) => x.id === id)!;
        return words.some((w) => it.text.split(' ').includes(w));
      }).length;
      expect(sharing).toBeGreaterThan(rel.size / 2);
    }
    for (const it of c.items) {
      expect(it.text.startsWith(it.title)).toBe(true);
      expect(it.title.split(' ').length).toBeGreaterThanOrEqual(3);
    }
  });

  it('is seeded and deterministic', () => {
    const a = judgedCollection({ items: 300, queries: 20, relevant: 10, seed: 5 });
    const b = judgedCollection({ items: 300, queries: 20, relevant: 10, seed: 5 });
    const c = judgedCollection({ items: 300, queries: 20, relevant: 10, seed: 6 });
    const dump = (x: typeof a) => JSON.stringify([x.items, x.queries, [...x.relevant].map(([k, v]) => [k, [...v].sort()])]);
    expect(dump(a)).toBe(dump(b));
    expect(dump(a)).not.toBe(dump(c));
  });

  it('caps the relevant items at the topic size', () => {
    const c = judgedCollection({ items: 50, queries: 5, relevant: 30, topics: 5 });
    for (const q of c.queries) expect(c.relevant.get(q.id)!.size).toBe(10);
  });

  it('makes distinct letter-only words', () => {
    const ws = new Set<string>();
    for (let ns = 0; ns < 40; ns++) for (let i = 0; i < 300; i++) ws.add(pseudoWord(ns, i));
    expect(ws.size).toBe(40 * 300);
    for (const w of ws) expect(w).toMatch(/^[a-z]{5,}$/);
  });
});

describe('the evolve bench phases and chart', () => {
  it('cuts phases at the run log and progress events', () => {
    expect(phaseOf('phase sft: floor choice')).toBe('sft: floor choice');
    expect(phaseOf('step r1-item: start')).toBe('r1-item: setup');
    expect(phaseOf('step r1-item: done in 3.0s  dev F1=…')).toBe('');
    expect(phaseOf('r2-query epoch 1/3')).toBe('r2-query: GRPO');
    expect(phaseOf('sft: indexing items')).toBe('sft: indexing');
    expect(phaseOf('sft: trying M = 5 keywords per item')).toBe('sft: M trials');
    expect(phaseOf('committed keyword index generation')).toBeNull();
    // The refit's set guard and test have their own bar segment, apart from setup.
    expect(phaseOf('phase refit: set guard')).toBe('refit: set guard');
    expect(phaseGroup('refit: set guard')).toBe(phaseGroup('refit: refit test'));
    expect(phaseGroup('refit: set guard')).not.toBe(phaseGroup('refit: setup'));
    expect(phaseGroup('refit: relevance fit')).toBe(phaseGroup('sft: relevance fit'));
  });

  it('draws one bar per size', () => {
    const r = {
      items: 10,
      queries: 5,
      relevant: 2,
      rounds: 1,
      seed: 1,
      split: { core: 3, dev: 1, eval: 1 },
      collectionSeconds: 0,
      phases: [
        { phase: 'sft: relevance fit', seconds: 3, cpuSeconds: 2, cores: 0.67 },
        { phase: 'r1-item: GRPO', seconds: 1, cpuSeconds: 2, cores: 2 },
      ],
      steps: [],
      wallSeconds: 3,
      cpuSeconds: 4,
      cores: 1.33,
      peakRssMiB: 100,
      loadBefore: [0],
      loadAfter: [0],
      node: 'v20',
      finishedAt: '',
    };
    const svg = renderEvolveChart([r, { ...r, items: 20 }]);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<title>relevance fit: 2\.0 s<\/title>/g)).toHaveLength(2);
  });
});
