/**
 * The built-in encoder (`--embeddings static`, src/embeddings/static.ts): its tokenizer gives
 * the Python tokenizer's ids on a fixture (test/fixtures/static-tokenizer.json, written by the
 * model's tokenizers package: queries and keywords of the shipped collections and edge cases),
 * its vectors are unit length and put related phrases nearer than unrelated ones, a changed
 * table file is refused naming it, its server answers OpenAI's embeddings API within its
 * bounds, and `cogr demo --embeddings static` fits a run with it from a child server that is
 * gone when the command ends.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../index/core/log.ts';
import { isCogrError } from '../../../index/core/errors.ts';
import { bertWords, STATIC_MODEL, StaticEncoder, staticModelDir } from '../../../src/embeddings/static.ts';
import { createStaticEmbeddingsServer } from '../../../src/embeddings/staticServer.ts';
import { defaultEmbeddings, storedRunEmbeddings } from '../../../src/embeddings/venv.ts';
import { embeddingsFromFlags } from '../../../src/embeddings/dense.ts';
import { runCogr, smallDemo } from '../../fixtures/cogrChild.ts';
import { writeSynthDataset } from '../../fixtures/synthDataset.ts';

const fixture = JSON.parse(readFileSync(join(import.meta.dirname, '../../fixtures/static-tokenizer.json'), 'utf8')) as {
  cases: { text: string; ids: number[] }[];
};
const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i], 0);

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-static-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the built-in encoder', () => {
  const enc = StaticEncoder.load();

  it("tokenizes as the model's own tokenizer does, edge cases included", () => {
    expect(fixture.cases.length).toBeGreaterThan(100);
    const wrong = fixture.cases.filter((c) => JSON.stringify(enc.tokenize(c.text)) !== JSON.stringify(c.ids)).map((c) => c.text);
    expect(wrong).toEqual([]);
    // The cut: 254 tokens between [CLS] and [SEP], as the model's 256.
    expect(fixture.cases.some((c) => c.ids.length === 254)).toBe(true);
    expect(bertWords("Don't  X-rays,café")).toEqual(['don', "'", 't', 'x', '-', 'rays', ',', 'cafe']);
  });

  it('gives unit vectors, the zero vector to a text without tokens, and puts related phrases nearer', () => {
    const v = enc.encode('dental x-rays and radiation');
    expect(v).toHaveLength(enc.dims);
    expect(Math.abs(dot(v, v) - 1)).toBeLessThan(1e-5);
    expect(Array.from(enc.encode('   '))).toEqual(new Array(enc.dims).fill(0));
    const q = enc.encode('are dental x-rays safe?');
    expect(dot(q, enc.encode('radiation exposure'))).toBeGreaterThan(dot(q, enc.encode('income tax law')));
    expect(dot(enc.encode('heart disease'), enc.encode('cardiac failure'))).toBeGreaterThan(
      dot(enc.encode('heart disease'), enc.encode('library catalogue')),
    );
  });

  it('refuses a table whose files are not the ones its manifest names', () => {
    const copy = join(dir, 'table');
    cpSync(staticModelDir(), copy, { recursive: true });
    const bin = readFileSync(join(copy, 'vectors.bin'));
    bin[1000] ^= 0x7f;
    writeFileSync(join(copy, 'vectors.bin'), bin);
    let err: unknown;
    try {
      StaticEncoder.load(copy);
    } catch (e) {
      err = e;
    }
    expect(isCogrError(err) && err.code).toBe('DATA_FORMAT');
    expect((err as Error).message).toContain(join(copy, 'vectors.bin'));
  });

  it("serves OpenAI's embeddings API within its bounds", async () => {
    const app = createStaticEmbeddingsServer(enc, silentLogger, {
      maxInputs: 3,
      maxChars: 50,
      bodyLimit: 1 << 20,
      requestTimeoutMs: 10_000,
    });
    try {
      const models = await app.inject({ method: 'GET', url: '/v1/models' });
      expect(models.json()).toMatchObject({ data: [{ id: STATIC_MODEL, dimension: enc.dims }] });
      const r = await app.inject({
        method: 'POST',
        url: '/v1/embeddings',
        payload: { input: ['heart disease', 'lens'], model: STATIC_MODEL },
      });
      expect(r.statusCode).toBe(200);
      const data = (r.json() as { data: { index: number; embedding: number[] }[] }).data;
      expect(data.map((d) => d.index)).toEqual([0, 1]);
      expect(data[0].embedding).toEqual(Array.from(enc.encode('heart disease')));
      const many = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: ['a', 'b', 'c', 'd'] } });
      expect(many.statusCode).toBe(400);
      expect(many.body).toMatch(/at most 3 inputs/);
      const long = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: ['x'.repeat(51)] } });
      expect(long.statusCode).toBe(400);
      expect(long.body).toMatch(/input\[0\]: at most 50 characters/);
      const other = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { input: 'a', model: 'all-MiniLM-L6-v2' } });
      expect(other.statusCode).toBe(400);
    } finally {
      await app.close();
    }
  });

  it('cogr demo --embeddings static fits the run with it, and its server is gone after the command', async () => {
    const dataset = writeSynthDataset(join(dir, 'ds'));
    const home = join(dir, 'home');
    const demo = await smallDemo(home, dataset, '--embeddings', 'static', '--json');
    expect(demo.status, demo.stderr).toBe(0);
    const out = JSON.parse(demo.stdout) as { config: { embeddingsModel: string | null } };
    expect(out.config.embeddingsModel).toBe(STATIC_MODEL);
    expect(demo.stderr).toMatch(/--embeddings static: the built-in encoder served for this command at http:\/\/127\.0\.0\.1:\d+\/v1/);
    // Stopped at the command's exit (SIGTERM), or within a second of it (it watches its parent): wait up to 30 s.
    // Only this demo's server counts (it names the demo as its parent): other cogr commands may run on the machine.
    const left = () =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .map((d) => {
          try {
            return readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ');
          } catch {
            return ''; // gone meanwhile
          }
        })
        .filter((l) => l.includes('--backend static --port 0') && l.includes(`--parent-pid ${demo.pid} `));
    for (let i = 0; i < 300 && left().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(left()).toEqual([]);
    // A command that reads the stored run starts the run's own encoder without being told (here audit).
    const queries = join(dir, 'q.jsonl');
    writeFileSync(queries, '{"id": "x1", "text": "t0w0 study"}\n');
    const audit = await runCogr(home, 'audit', '--queries', queries, '--json');
    expect(audit.status, audit.stderr).toBe(0);
    expect(audit.stderr).toMatch(/--embeddings static: the built-in encoder served for this command/);
  }, 300_000);

  it('which encoder a command uses when --embeddings is not given', () => {
    expect(defaultEmbeddings({})).toBe('auto');
    expect(defaultEmbeddings({ COGR_EMBEDDINGS: ' none ' })).toBe('none');
    expect(defaultEmbeddings({ COGR_EMBEDDINGS: '' })).toBe('auto');
    expect(storedRunEmbeddings(undefined, 'all-MiniLM-L6-v2')).toBe('auto');
    expect(storedRunEmbeddings(undefined, STATIC_MODEL)).toBe('static');
    expect(storedRunEmbeddings(undefined, 'another-model')).toBeUndefined();
    expect(storedRunEmbeddings(undefined, null)).toBeUndefined();
    expect(storedRunEmbeddings('http://127.0.0.1:1/v1', 'all-MiniLM-L6-v2')).toBe('http://127.0.0.1:1/v1');
    // none, said outright, is no endpoint on every command (round.sh passes it to each)
    expect(embeddingsFromFlags({ embeddings: 'none' })).toBeNull();
  });
});
