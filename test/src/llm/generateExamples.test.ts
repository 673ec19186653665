/**
 * `cogr generate --generator openai --side query` over a project database that holds a
 * co-evolution run (MED, one small round): the query prompts show two of the run's core
 * training queries with the planner's plans (keywords of at most four words), never a
 * held-out or dev query and never the input itself; inputs from another collection get
 * the prompt file's example instead.
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../../index/store/db.ts';
import { loadDataset } from '../../../src/datasets/index.ts';
import { runGenerate } from '../../../src/commands/generate.ts';
import { runCoevolution } from '../../../src/evolve/run.ts';
import type { Corpus } from '../../../index/core/types.ts';
import { LOOP_TEST_CONFIG } from '../../fixtures/loopConfig.ts';

let dir = '';
let server: Server;
let baseUrl = '';
let prompts: { role: string; content: string }[][] = [];
let corpus: Corpus;
let split: { train: string[]; eval: string[]; dev: string[] };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-gen-examples-'));
  corpus = (await loadDataset('med')).corpus;
  const db = await openDb(join(dir, 'db'));
  try {
    const r = await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: 'med', rounds: 1 });
    split = r.split;
  } finally {
    await db.close();
  }
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const b = JSON.parse(body) as { n?: number; messages: { role: string; content: string }[] };
      prompts.push(b.messages);
      const choices = Array.from({ length: b.n ?? 1 }, (_, i) => ({
        index: i,
        finish_reason: 'stop',
        message: { role: 'assistant', content: '{"keywords": ["lens"]}' },
      }));
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  baseUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1`;
}, 300_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

/** The query text of a user turn (`Query: <text>`, the search context, `Keywords:`). */
function queryOf(content: string): string {
  return /^Query: ([\s\S]*?)\n+Keywords:$/.exec(content)?.[1] ?? '';
}

describe('cogr generate --generator openai with a run in the database', () => {
  it("shows two core training queries with the planner's plans, never held-out or dev queries or the input", async () => {
    prompts = [];
    const from = join(dir, 'q.jsonl');
    // Held-out queries and one training query as inputs.
    const held = split.eval.slice(0, 3);
    const core = split.train.filter((id) => !split.dev.includes(id));
    const inputs = [...held, core[0]].map((id) => corpus.queries.find((q) => q.id === id)!);
    writeFileSync(from, inputs.map((q) => JSON.stringify({ id: q.id, text: q.text })).join('\n') + '\n');
    const out = await runGenerate({ side: 'query', generator: 'openai', from, baseUrl, model: 'm', db: join(dir, 'db'), cache: false });
    expect(Object.keys(out)).toHaveLength(4);
    const textToId = new Map(corpus.queries.map((q) => [q.text, q.id]));
    const shownIds = new Set<string>();
    for (const p of prompts) {
      const input = textToId.get(queryOf(p.at(-1)!.content))!;
      expect(input).toBeDefined();
      const shots = p.slice(1, -1);
      expect([2, 4]).toContain(shots.length);
      for (let i = 0; i < shots.length; i += 2) {
        const id = textToId.get(queryOf(shots[i].content))!;
        shownIds.add(id);
        expect(core).toContain(id);
        expect(split.eval).not.toContain(id);
        expect(split.dev).not.toContain(id);
        expect(id).not.toBe(input);
        const kws = JSON.parse(shots[i + 1].content).keywords as string[];
        expect(kws.length).toBeGreaterThan(0);
        expect(kws.every((k) => k.split(' ').length <= 4)).toBe(true);
      }
    }
    expect(shownIds.size).toBe(2);
    // The file's example is not among them.
    expect(prompts.some((p) => p.some((m) => m.content.includes('passive smoking')))).toBe(false);
  });

  it("inputs from another collection get the prompt file's example", async () => {
    prompts = [];
    const from = join(dir, 'other.jsonl');
    writeFileSync(from, JSON.stringify({ id: 'x1', text: 'waterproof hiking boots' }) + '\n');
    await runGenerate({ side: 'query', generator: 'openai', from, baseUrl, model: 'm', db: join(dir, 'db'), cache: false });
    expect(prompts).toHaveLength(1);
    expect(prompts[0][1].content).toContain('passive smoking');
  });
});
