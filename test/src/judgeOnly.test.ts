/**
 * `--embeddings-features no`: the encoder judges the planned keywords only. A demo against a
 * fake embeddings endpoint on loopback never sends it an item's text (only query texts and
 * keywords), records the choice in its config, and plans only keywords at the rule's cosine
 * to their query under that encoder; without --embeddings the flag is refused. The run
 * option maps onto the planner's rule (plannerVocabulary: the judge's model named apart
 * from the relevance model's).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRunConfig, parseStoredConfig, plannerVocabulary } from '../../src/run/config.ts';
import { denseItemText } from '../../src/embeddings/dense.ts';
import { runCogr, smallDemo, smallDemoIn } from '../fixtures/cogrChild.ts';
import { startFakeEmbeddings } from '../fixtures/fakeEmbeddings.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

describe('the encoder as a judge only (--embeddings-features no)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'cogr-judge-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("names the judge's model for the planner, a judge only by default, and a stored run without the field had the features", () => {
    const base = parseRunConfig({ dataset: 'med', embeddingsModel: 'm' });
    expect(base.embeddingsFeatures).toBe(false);
    expect(plannerVocabulary(base)).toMatchObject({ keywordCosine: 0.3, keywordModel: 'm' });
    expect(plannerVocabulary({ ...base, keywordCosine: -1 })).toMatchObject({ keywordCosine: null, keywordModel: null });
    expect(plannerVocabulary({ ...base, embeddingsModel: null })).toMatchObject({ keywordCosine: null, keywordModel: null });
    const { embeddingsFeatures: _, ...before } = base;
    const stored = parseStoredConfig(before);
    expect(stored.success && stored.data.embeddingsFeatures).toBe(true);
  });

  it('sends the endpoint query texts and keywords, never an item, and plans only keywords at the cosine to their query', async () => {
    const seen: string[] = [];
    const emb = await startFakeEmbeddings(
      () => 'fake-judge',
      (input) => seen.push(...input),
    );
    const home = join(dir, 'home');
    try {
      const dataset = writeSynthDataset(join(dir, 'ds'));
      // No lexical relatedness rule (--relatedness -1) and a strict cosine (0.6): the judge alone holds the keywords to their query.
      const rule = ['--embeddings', emb.url, '--embeddings-features', 'no', '--relatedness', '-1'];
      const demo = await smallDemo(home, dataset, ...rule, '--keyword-cosine', '0.6', '--json');
      expect(demo.status, demo.stderr).toBe(0);
      const out = JSON.parse(demo.stdout) as { config: { embeddingsModel: string | null; embeddingsFeatures: boolean } };
      expect(out.config).toMatchObject({ embeddingsModel: 'fake-judge', embeddingsFeatures: false });
      const corpus = synthCorpus();
      const asked = new Set(seen);
      // the query texts were embedded, and keywords beside them; no item's text was
      expect(corpus.queries.some((q) => asked.has(q.text))).toBe(true);
      expect(seen.length).toBeGreaterThan(new Set(corpus.queries.map((q) => q.text)).size);
      for (const it of corpus.items) expect(asked.has(denseItemText(it)), it.id).toBe(false);
      // every planned keyword of the served run is at cosine ≥ 0.6 to its query under the judge;
      // the same run without the rule plans some that are not
      const queries = join(dir, 'q.jsonl');
      writeFileSync(queries, corpus.queries.map((q) => JSON.stringify({ id: q.id, text: q.text })).join('\n') + '\n');
      const cosines = async (h: string) => {
        const a = await runCogr(h, 'audit', '--queries', queries, '--embeddings', emb.url, '--json', '--examples', '1000');
        expect(a.status, a.stderr).toBe(0);
        const ex = (JSON.parse(a.stdout) as { examples: { keywords: { cosine: number }[] }[] }).examples;
        return ex.flatMap((e) => e.keywords.map((k) => k.cosine));
      };
      const judged = await cosines(home);
      expect(judged.length).toBeGreaterThan(0);
      // a command loading the run (audit) embedded no item either
      const afterAudit = new Set(seen);
      for (const it of corpus.items) expect(afterAudit.has(denseItemText(it)), it.id).toBe(false);
      for (const c of judged) expect(c).toBeGreaterThanOrEqual(0.6 - 1e-6);
      const open = join(dir, 'home-open');
      const demo2 = await smallDemo(open, dataset, ...rule, '--keyword-cosine', '-1');
      expect(demo2.status, demo2.stderr).toBe(0);
      expect((await cosines(open)).some((c) => c < 0.6)).toBe(true);
    } finally {
      await emb.close();
    }
  }, 300_000);

  it('features without an encoder (--embeddings none, as the fast tier sets $COGR_EMBEDDINGS) are refused, naming the flags', async () => {
    const ds = writeSynthDataset(join(dir, 'ds-none'));
    for (const extra of [[], ['--embeddings', 'none']]) {
      const r = await smallDemo(join(dir, 'home-none'), ds, ...extra, '--embeddings-features', 'yes');
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/--embeddings-features yes: .*--embeddings/);
    }
  }, 300_000);

  it('the default encoder that cannot be installed: the run goes on without one, says why, and records none', async () => {
    // $COGR_EMBEDDINGS unset: the default, auto; the fast tier's venv path is where nothing can be made (vitest.config.ts).
    const { COGR_EMBEDDINGS: _, ...env } = process.env;
    const home = join(dir, 'home-default');
    const r = await smallDemoIn(env, home, writeSynthDataset(join(dir, 'ds-default')), '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/all-MiniLM-L6-v2 is not installed: installing it once/);
    expect(r.stderr).toMatch(/no encoder for this run \(.*no embeddings venv at .*installing it failed.*\)/);
    expect((JSON.parse(r.stdout) as { config: { embeddingsModel: string | null } }).config.embeddingsModel).toBeNull();
  }, 300_000);
});
