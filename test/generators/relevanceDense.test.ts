/**
 * The relevance model's dense features (cos, cosNorm, cosLogRank) over registered vectors:
 * on a corpus whose text words say nothing about relevance but whose vectors do, the
 * fitted model ranks by the vectors; a saved model keeps its embeddings model and
 * reloads to the same probabilities; without registered vectors it is DATA_MISSING
 * naming the model; a model saved before the field has no dense features.
 */
import { describe, expect, it } from 'vitest';
import { DENSE_FEATURES, DenseVectors, RelevanceModel, registerDenseVectors } from '../../generators/planner/relevance.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { createRng } from '../../index/core/random.ts';

// 40 items in 4 groups; the text is random filler shared by all groups; the vector says the group.
const rng = createRng(3);
const filler = ['study', 'results', 'effect', 'method', 'analysis', 'patients', 'cells', 'level'];
const items = Array.from({ length: 40 }, (_, i) => ({
  id: `d${String(i).padStart(2, '0')}`,
  title: '',
  text: Array.from({ length: 8 }, () => filler[Math.floor(rng() * filler.length)]).join(' '),
}));
const group = (i: number) => i % 4;
const oneHot = (g: number, noise: number) => Float32Array.from({ length: 8 }, (_, j) => (j === g ? 1 : 0) + noise * (rng() - 0.5));
const queries = Array.from({ length: 16 }, (_, q) => ({
  id: `q${q}`,
  text: `${filler[q % filler.length]} ${filler[(q * 3) % filler.length]} query ${q}`,
}));
const relevant = (q: number) => items.filter((_, i) => group(i) === q % 4).map((it) => it.id);
const training = queries.map((q, k) => [q, relevant(k)] as const);
const model = 'fake-embed';
registerDenseVectors(
  new DenseVectors(
    model,
    8,
    new Map(items.map((it, i) => [it.id, oneHot(group(i), 0.3)])),
    new Map(queries.map((q, k) => [q.text, oneHot(k % 4, 0.3)])),
  ),
);

describe('dense relevance features', () => {
  it('are fitted and rank by the vectors when the text does not tell', () => {
    const m = RelevanceModel.fit(items, training, { embeddings: model, judgements: false });
    expect(m.featureNames.slice(-3)).toEqual([...DENSE_FEATURES]);
    const w = m.lastFit!.weights;
    expect(w.cos + w.cosNorm).toBeGreaterThan(0);
    const plain = RelevanceModel.fit(items, training, { judgements: false });
    // Precision at 10 of the dense model vs the text-only model, over the training queries.
    const p10 = (mm: RelevanceModel) => {
      let s = 0;
      queries.forEach((q, k) => {
        const p = mm.probabilities(q);
        const order = Array.from(p.keys())
          .sort((a, b) => p[b] - p[a] || a - b)
          .slice(0, 10);
        const rel = new Set(relevant(k));
        s += order.filter((o) => rel.has(mm.itemIds[o])).length / 10;
      });
      return s / queries.length;
    };
    expect(p10(m)).toBeGreaterThan(0.9);
    expect(p10(m)).toBeGreaterThan(p10(plain) + 0.3);
  });

  it('a saved model keeps its embeddings model and reloads to the same probabilities', () => {
    const m = RelevanceModel.fit(items, training, { embeddings: model });
    const j = JSON.parse(JSON.stringify(m.toJSON()));
    expect(j.options.embeddings).toBe(model);
    const back = RelevanceModel.fromJSON(j, items);
    expect(back.embeddingsModel).toBe(model);
    expect(Array.from(back.probabilities(queries[3]))).toEqual(Array.from(m.probabilities(queries[3])));
  });

  it('without the vectors (or a query text without one) it is DATA_MISSING naming the model', () => {
    const e = (() => {
      try {
        RelevanceModel.fit(items, training, { embeddings: 'other-model' });
      } catch (x) {
        return x;
      }
    })();
    expect(isCogrError(e, 'DATA_MISSING')).toBe(true);
    expect((e as Error).message).toMatch(/uses other-model embeddings: give --embeddings URL/);
    const m = RelevanceModel.fit(items, training, { embeddings: model });
    expect(() => m.probabilities({ id: 'x', text: 'a text never embedded' })).toThrow(/no fake-embed embedding for the query text/);
  });

  it('a model saved before the field has no dense features', () => {
    const m = RelevanceModel.fit(items, training, {});
    const j = JSON.parse(JSON.stringify(m.toJSON()));
    delete j.options.embeddings;
    const back = RelevanceModel.fromJSON(j, items);
    expect(back.embeddingsModel).toBeNull();
    expect(back.featureNames).not.toContain('cos');
  });
});
