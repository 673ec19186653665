/**
 * The LLM half on a run fitted with embeddings (its cosines as relevance features and the
 * planner's keyword rule): `cogr generate`, `cogr sft --export`, `cogr rollouts` and `cogr
 * reward-server --half` need `--embeddings` naming the run's model (refused without it, naming
 * the model), and with it the reward server gives the rollouts' completions the rewards the
 * rollouts file holds. The fake
 * endpoint answers from this process, so every cogr command is a child process (a planner
 * waits for keyword vectors synchronously, src/embeddings/syncEmbedder.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeEmbeddings, type FakeEmbeddings } from '../fixtures/fakeEmbeddings.ts';
import { chatml, startRewardServer, type RolloutLine } from '../fixtures/rewardServerChild.ts';
import { runCogr, smallDemo } from '../fixtures/cogrChild.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';

let dir = '';
let emb: FakeEmbeddings;
const children: ChildProcess[] = [];
const run = (...args: string[]) => runCogr(join(dir, 'home'), ...args);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-dense-half-'));
  emb = await startFakeEmbeddings(() => 'fake-embed');
  const dataset = writeSynthDataset(join(dir, 'ds'));
  const demo = await smallDemo(join(dir, 'home'), dataset, '--embeddings', emb.url);
  expect(demo.status, demo.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await emb?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the LLM half on a run fitted with embeddings', () => {
  it("generate plans a new text with the run's planner only with --embeddings, fetching the text's vector", async () => {
    const from = join(dir, 'inputs.jsonl');
    writeFileSync(from, '{"id": "new1", "text": "t0w0 t0w1 study results"}\n');
    const without = await run('generate', '--side', 'query', '--from', from, '--policy', 'latest', '--json');
    expect(without.status).not.toBe(0);
    expect(without.stderr).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
    const r = await run('generate', '--side', 'query', '--from', from, '--policy', 'latest', '--json', '--embeddings', emb.url);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, string[][]>;
    expect(out.new1).toHaveLength(1);
    expect(out.new1[0].length).toBeGreaterThan(0);
  }, 300_000);

  it('--embeddings auto without the shipped venv, which cannot be installed here, stops naming the command that installs it', async () => {
    const from = join(dir, 'auto.jsonl');
    writeFileSync(from, '{"id": "a1", "text": "t0w0 study"}\n');
    // The fast tier points COGR_EMBEDDINGS_VENV where nothing is (vitest.config.ts).
    const r = await run('generate', '--side', 'query', '--from', from, '--policy', 'latest', '--json', '--embeddings', 'auto');
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(
      /error\[DATA_MISSING\]: no embeddings venv at .*, and installing it failed .*: run npx cogr embeddings install/,
    );
  }, 300_000);

  it('index search --rank model needs --embeddings, and then ranks the matched set the same one query at a time and in a batch', async () => {
    const text = 't0w0 t0w1 study results';
    const from = join(dir, 'probe.jsonl');
    writeFileSync(from, JSON.stringify({ id: 'p1', text }) + '\n');
    const gen = await run('generate', '--side', 'query', '--from', from, '--policy', 'latest', '--json', '--embeddings', emb.url);
    expect(gen.status, gen.stderr).toBe(0);
    const keywords = (JSON.parse(gen.stdout) as Record<string, string[][]>).p1[0];
    expect(keywords.length).toBeGreaterThan(0);
    const probe = ['index', 'search', '--query', text, '--keywords', keywords.join('|'), '--all', '--json'];
    const plain = await run(...probe);
    expect(plain.status, plain.stderr).toBe(0);
    const matched = (JSON.parse(plain.stdout) as { matched: number; items: { id: string }[] }).items.map((x) => x.id);
    expect(matched.length).toBeGreaterThan(1);
    const without = await run(...probe, '--rank', 'model');
    expect(without.status).not.toBe(0);
    expect(without.stderr).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
    const one = await run(...probe, '--rank', 'model', '--embeddings', emb.url);
    expect(one.status, one.stderr).toBe(0);
    const ranked = (JSON.parse(one.stdout) as { rank: string; items: { id: string }[] }).items.map((x) => x.id);
    expect([...ranked].sort()).toEqual([...matched].sort());
    const batch = join(dir, 'batch.jsonl');
    writeFileSync(batch, JSON.stringify({ id: 'b1', query: text, keywords }) + '\n');
    const runFile = join(dir, 'batch.run');
    const b = await run('index', 'search', '--batch', batch, '--run-file', runFile, '--all', '--rank', 'model', '--embeddings', emb.url);
    expect(b.status, b.stderr).toBe(0);
    const lines = readFileSync(runFile, 'utf8').trim().split('\n');
    // TREC order breaks score ties by docid: the same ids, and the same scores, as the one-query search.
    const scores = new Map((JSON.parse(one.stdout) as { items: { id: string; score: number }[] }).items.map((x) => [x.id, x.score]));
    expect(lines.map((l) => l.split(' ')[2]).sort()).toEqual([...ranked].sort());
    for (const l of lines) {
      const [, , id, , score] = l.split(' ');
      expect(Number(score)).toBeCloseTo(scores.get(id)!, 4);
    }
  }, 300_000);

  it("sft --export needs --embeddings, and then writes the oracle's targets under the run's keyword rule", async () => {
    const out = join(dir, 'sft');
    const without = await run('sft', '--export', out, '--query-targets', 'oracle', '--json');
    expect(without.status).not.toBe(0);
    expect(without.stderr).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
    const r = await run('sft', '--export', out, '--query-targets', 'oracle', '--json', '--embeddings', emb.url);
    expect(r.status, r.stderr).toBe(0);
    const lines = readFileSync(join(out, 'query.jsonl'), 'utf8').trim().split('\n');
    expect(lines.length).toBeGreaterThan(0);
  }, 300_000);

  it('rollouts and the reward server need --embeddings, and then give the same rewards', async () => {
    const out = join(dir, 'r1-query.jsonl');
    const without = await run('rollouts', '--side', 'query', '--round', '1', '--out', out, '--samples', '2', '--limit', '4', '--quiet');
    expect(without.status).not.toBe(0);
    expect(without.stderr).toMatch(/uses fake-embed embeddings: give --embeddings URL/);
    const r = await run(
      'rollouts',
      '--side',
      'query',
      '--round',
      '1',
      '--out',
      out,
      '--samples',
      '2',
      '--limit',
      '4',
      '--quiet',
      '--embeddings',
      emb.url,
    );
    expect(r.status, r.stderr).toBe(0);
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RolloutLine);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((l) => l.reward > 0)).toBe(true);
    const cache = ['--embeddings-cache', join(dir, 'home', 'db')];
    await expect(startRewardServer(join(dir, 'home', 'db'), ['--half', 'r1-query', ...cache], children)).rejects.toThrow(
      /uses fake-embed embeddings: give --embeddings URL/,
    );
    const url = await startRewardServer(join(dir, 'home', 'db'), ['--half', 'r1-query', '--embeddings', emb.url, ...cache], children);
    const res = await fetch(`${url}/get_reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: lines.map((l) => chatml(l.prompt) + l.completion[0].content + '<|im_end|>'),
        prompts: lines.map((l) => chatml(l.prompt)),
        labels: lines.map((l) => `query:${l.entity_id}`),
      }),
    });
    expect(res.status).toBe(200);
    const rewards = ((await res.json()) as { rewards: (number | null)[] }).rewards;
    expect(rewards).toEqual(lines.map((l) => l.reward));
  }, 300_000);
});
