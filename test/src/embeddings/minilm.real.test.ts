/**
 * The shipped embeddings server with the real model: `cogr embeddings serve --port 0`
 * (all-MiniLM-L6-v2 from the venv `cogr embeddings install` made; npm test installs it
 * first) answering cogr's client for a handful of texts — a text's cosine with itself in
 * another request ≈ 1, a paraphrase nearer than an unrelated text — its /health and
 * /v1/models, its request bounds (400 naming the limit, turned into EMBEDDINGS_ERROR), and
 * `cogr baseline dense` on a six-item collection written here. Loose assertions, no timing.
 * Without the venv the test FAILS naming what to run; skipped only when
 * COGR_SKIP_REAL_EMBEDDINGS=1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../../index/store/db.ts';
import { isCogrError } from '../../../index/core/errors.ts';
import { EmbeddingsClient, embedTexts } from '../../../src/embeddings/client.ts';
import { cosine } from '../_oracles.ts';
import { writeSynthDataset } from '../../fixtures/synthDataset.ts';

const BIN = fileURLToPath(new URL('../../../bin/cogr.mjs', import.meta.url));
const run = promisify(execFile);
const skip = process.env.COGR_SKIP_REAL_EMBEDDINGS === '1';

describe.skipIf(skip)('the shipped embeddings server with all-MiniLM-L6-v2', () => {
  let child: ChildProcess | undefined;
  let url = '';
  let stderr = '';
  let dir = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cogr-real-emb-'));
    child = spawn(process.execPath, [BIN, 'embeddings', 'serve', '--port', '0', '--max-inputs', '8', '--max-chars', '2000'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, COGR_HOME: dir },
    });
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child!.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /^(http:\/\/\S+\/v1)$/m.exec(out);
        if (m) resolve(m[1]);
      });
      child!.once('exit', (code) =>
        reject(new Error(`cogr embeddings serve exited (code ${code}) before listening: ${stderr} (run: npx cogr embeddings install)`)),
      );
    });
  }, 600_000);

  afterAll(async () => {
    if (child && child.exitCode === null) {
      const done = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await done;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('answers /health and /v1/models on loopback', async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const h = (await (await fetch(url.replace(/\/v1$/, '/health'))).json()) as { status: string; dimension: number };
    expect(h.status).toBe('ok');
    expect(h.dimension).toBe(384);
    const m = (await (await fetch(`${url}/models`)).json()) as { data: { id: string }[] };
    expect(m.data[0].id).toBe('all-MiniLM-L6-v2');
  });

  it('embeds through cogr: a text with itself ≈ 1, a paraphrase nearer than an unrelated text, cached in the database', async () => {
    const db = await openDb(join(dir, 'db'));
    try {
      const c = new EmbeddingsClient({ baseURL: url, batchSize: 2, timeoutMs: 300_000 });
      const texts = [
        'A man is eating a piece of bread.',
        'Someone is having a meal.',
        'The stock market fell sharply on Tuesday.',
        'Heart attacks are prevented by aspirin.',
      ];
      const r = await embedTexts(texts, c, { db });
      expect(r.model).toBe('all-MiniLM-L6-v2');
      expect(r.dim).toBe(384);
      // The same text again, in another request (not from the cache: no db).
      const again = await embedTexts([texts[0]], new EmbeddingsClient({ baseURL: url, timeoutMs: 300_000 }));
      expect(cosine(r.vectors[0], again.vectors[0])).toBeGreaterThan(0.999);
      const para = cosine(r.vectors[0], r.vectors[1]);
      const unrelated = cosine(r.vectors[0], r.vectors[2]);
      expect(para).toBeGreaterThan(unrelated + 0.1);
      const cached = await embedTexts(texts, new EmbeddingsClient({ baseURL: url, timeoutMs: 300_000 }), { db });
      expect(cached.encoded).toBe(0);
      expect(cached.cached).toBe(4);
    } finally {
      await db.close();
    }
  }, 300_000);

  it('refuses requests over its bounds with a 400 naming the limit', async () => {
    const c = new EmbeddingsClient({ baseURL: url, model: 'all-MiniLM-L6-v2', batchSize: 9, maxRetries: 0, timeoutMs: 300_000 });
    const many = await embedTexts(
      Array.from({ length: 9 }, (_, i) => `text ${i}`),
      c,
    ).catch((e: unknown) => e);
    expect(isCogrError(many, 'EMBEDDINGS_ERROR')).toBe(true);
    expect((many as Error).message).toMatch(/HTTP 400.*over the limit of 8/);
    const long = await embedTexts(['x'.repeat(2001)], c).catch((e: unknown) => e);
    expect((long as Error).message).toMatch(/HTTP 400.*2001 characters, over the limit of 2000/);
    const other = await embedTexts(['a'], new EmbeddingsClient({ baseURL: url, model: 'no-such-model', maxRetries: 0 })).catch(
      (e: unknown) => e,
    );
    expect((other as Error).message).toMatch(/HTTP 404/);
  }, 300_000);

  it('cogr baseline dense ranks a six-item collection by meaning', async () => {
    const ds = join(dir, 'tiny');
    mkdirSync(join(ds, 'qrels'), { recursive: true });
    const items = [
      ['d1', 'Aspirin and the heart', 'Daily aspirin lowers the risk of a heart attack in older adults.'],
      ['d2', 'Cholesterol drugs', 'Statins reduce blood cholesterol and cardiovascular events.'],
      ['d3', 'Football', 'The striker scored twice in the second half of the match.'],
      ['d4', 'Tennis', 'She won the final in straight sets at the championship.'],
      ['d5', 'Volcanoes', 'Lava flows followed the eruption of the mountain.'],
      ['d6', 'Earthquakes', 'The tremor shook buildings and caused landslides.'],
    ];
    writeFileSync(join(ds, 'corpus.jsonl'), items.map(([id, title, text]) => JSON.stringify({ _id: id, title, text })).join('\n') + '\n');
    const queries = [
      ['q1', 'medicine preventing myocardial infarction', ['d1']],
      ['q2', 'lipid lowering medication', ['d2']],
      ['q3', 'soccer game goals', ['d3']],
      ['q4', 'racket sport tournament', ['d4']],
      ['q5', 'magma and eruptions', ['d5']],
      ['q6', 'seismic shaking damage', ['d6']],
    ] as const;
    writeFileSync(join(ds, 'queries.jsonl'), queries.map(([id, text]) => JSON.stringify({ _id: id, text })).join('\n') + '\n');
    writeFileSync(
      join(ds, 'qrels', 'test.tsv'),
      'query-id\tcorpus-id\tscore\n' + queries.map(([id, , rel]) => rel.map((d) => `${id}\t${d}\t1`).join('\n')).join('\n') + '\n',
    );
    const { stdout } = await run(
      process.execPath,
      [BIN, 'baseline', 'dense', '--dataset', ds, '--embeddings', url, '--folds', '2', '--json'],
      { env: { ...process.env, COGR_HOME: dir }, timeout: 300_000 },
    );
    const r = JSON.parse(stdout) as { model: string; dim: number; ndcg10: number; perFold: unknown[]; cutoffs: number[] };
    expect(r.model).toBe('all-MiniLM-L6-v2');
    expect(r.perFold).toHaveLength(2);
    // Every query shares almost no words with its item: the ranking comes from the vectors.
    expect(r.ndcg10).toBeGreaterThan(0.7);

    // --embeddings auto: the shipped server started for the command (its own cache, so every text is
    // encoded again), the same result, and no server left behind once the command has exited.
    const child = execFile(
      process.execPath,
      [BIN, 'baseline', 'dense', '--dataset', ds, '--embeddings', 'auto', '--folds', '2', '--json'],
      {
        env: { ...process.env, COGR_HOME: join(dir, 'auto-home') },
        timeout: 600_000,
      },
    );
    let autoOut = '';
    let autoErr = '';
    child.stdout!.on('data', (d: Buffer) => (autoOut += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (autoErr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, autoErr).toBe(0);
    expect(autoErr).toMatch(
      /--embeddings auto: all-MiniLM-L6-v2 served for this command at http:\/\/127\.0\.0\.1:\d+\/v1 \(numpy backend, \d+ threads\)/,
    );
    const a = JSON.parse(autoOut) as typeof r;
    expect(a.model).toBe('all-MiniLM-L6-v2');
    expect(a.ndcg10).toBeCloseTo(r.ndcg10, 6);
    // The server is tied to the command's process: gone within a few seconds of its exit.
    const left = async () =>
      (await run('ps', ['-eo', 'args'], { encoding: 'utf8' })).stdout.split('\n').filter((l) => l.includes(`--parent-pid ${child.pid}`));
    let rest = await left();
    for (let i = 0; i < 20 && rest.length > 0; i++) {
      await new Promise((res) => setTimeout(res, 500));
      rest = await left();
    }
    expect(rest).toEqual([]);
  }, 900_000);

  it('cogr demo without --embeddings has MiniLM judge the keywords, and a command reading the run starts it itself', async () => {
    // The real tier sets $COGR_EMBEDDINGS=none for the runs its tests make (vitest.real.config.ts): unset here, the default.
    const { COGR_EMBEDDINGS: _, ...env } = process.env;
    const home = join(dir, 'default-home');
    const ds = writeSynthDataset(join(dir, 'default-ds'));
    const opts = { env: { ...env, COGR_HOME: home }, timeout: 600_000, maxBuffer: 1 << 26 };
    const demo = await run(
      process.execPath,
      [BIN, 'demo', '--dataset', ds, '--rounds', '0', '--sft-epochs', '1', '--workers', '1', '--quiet', '--json'],
      opts,
    );
    expect((JSON.parse(demo.stdout) as { config: object }).config).toMatchObject({
      embeddingsModel: 'all-MiniLM-L6-v2',
      embeddingsFeatures: false,
      keywordCosine: 0.3,
    });
    expect(demo.stderr).toMatch(/--embeddings auto: all-MiniLM-L6-v2 served for this command/);
    const queries = join(dir, 'default-q.jsonl');
    writeFileSync(queries, '{"id": "x1", "text": "t0w0 study"}\n');
    const audit = await run(process.execPath, [BIN, 'audit', '--queries', queries, '--json'], opts);
    expect(audit.stderr).toMatch(/--embeddings auto: all-MiniLM-L6-v2 served for this command/);
    expect(JSON.parse(audit.stdout)).toHaveProperty('query');
  }, 900_000);
});
