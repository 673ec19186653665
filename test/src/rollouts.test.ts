import { createServer, type Server } from 'node:http';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { isCogrError } from '../../index/core/errors.ts';
import { KeywordIndexStore } from '../../index/store/store.ts';
import { getAnalyzer } from '../../index/text/analyzer.ts';
import { OpenAIGenerator } from '../../generators/llm.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { itemRewardFull } from '../../rewards/itemReward.ts';
import { fBetaFromCounts } from '../../rewards/setMetrics.ts';
import { runCoevolution } from '../../src/evolve/run.ts';
import { importGeneration } from '../../src/evolve/importGeneration.ts';
import { writeRollouts } from '../../src/evolve/rollouts.ts';
import { frozenFor, readStoredRun, RunState } from '../../src/run/state.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { synthCorpus } from '../fixtures/synthCorpus.ts';

const corpus = synthCorpus();
const en = getAnalyzer('english');
let dir = '';
let db: CogrDb;
let train: string[] = [];
let evalIds: string[] = [];
let server: Server;
let baseURL = '';
let llmCalls = 0;
/** Requests whose prompt contains this text are answered 503. */
let failText: string | null = null;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-rollouts-'));
  db = await openDb(join(dir, 'db'));
  const res = await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, rounds: 1 });
  // The training queries a run trains on: those outside its dev split.
  train = res.split.train.filter((id) => !res.split.dev.includes(id));
  evalIds = res.split.eval;
  // A chat-completions server whose answers are good JSON, a plain list, or prose.
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      llmCalls++;
      const b = JSON.parse(body) as { n?: number; messages: { content: string }[] };
      // The input is the last message (worked examples of other training queries come before it).
      if (failText !== null && b.messages.at(-1)!.content.includes(failText)) {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded"}}');
        return;
      }
      const n = b.n ?? 1;
      const contents = Array.from({ length: n }, (_, i) =>
        i % 3 === 0
          ? JSON.stringify({ keywords: ['t0w0', 'study'] })
          : i % 3 === 1
            ? '- t1w1\n- results'
            : 'I cannot help with that request, sorry.',
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          created: 0,
          model: 'm',
          choices: contents.map((c, i) => ({ index: i, finish_reason: 'stop', message: { role: 'assistant', content: c } })),
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address() as { port: number };
  baseURL = `http://127.0.0.1:${addr.port}/v1`;
}, 120_000);

afterAll(async () => {
  await db.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

function readLines(path: string): Record<string, any>[] {
  return readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

describe('rollouts', () => {
  it('query side: G completions per training query, scored by F1 against the frozen item generation, advantages per group', async () => {
    const out = join(dir, 'q.jsonl');
    const s = await writeRollouts(db, corpus, { side: 'query', round: 1, out, samples: 4 });
    const lines = readLines(out);
    expect(lines.length).toBe(train.length * 4);
    expect(s.lines).toBe(lines.length);
    const ids = new Set(lines.map((l) => l.entity_id));
    expect([...ids].sort()).toEqual([...train].sort());
    const items = await new KeywordIndexStore(db).entries('item', 0);
    for (const l of lines.slice(0, 12)) {
      expect(l.prompt[0].role).toBe('system');
      expect(l.prompt.at(-1).content).toContain(corpus.queries.find((q) => q.id === l.entity_id)!.text);
      expect(l.completion[0].role).toBe('assistant');
      if (l.reason !== 'ok') continue;
      // recompute F1 of the matched set naively from the stored item generation: a training
      // query is scored as held out — its own string neither matches as {q} nor as a keyword
      const q = corpus.queries.find((x) => x.id === l.entity_id)!;
      const key = (k: string) => en.key(k.toLowerCase());
      const own = key(q.text);
      const probe = new Set((l.keywords as string[]).map(key).filter((k) => k !== own));
      const matched = items.filter((e) => e.keywords.some((k) => probe.has(key(k))) || probe.has(key(e.self))).map((e) => e.id);
      const rel = corpus.relevant.get(q.id)!;
      const tp = matched.filter((m) => rel.has(m)).length;
      expect(l.reward).toBeCloseTo(fBetaFromCounts(matched.length, rel.size, tp), 12);
      expect(l.matched).toBe(matched.length);
    }
    for (const g of new Set(lines.map((l) => l.group_id))) {
      const adv = lines.filter((l) => l.group_id === g).map((l) => l.advantage as number);
      expect(Math.abs(adv.reduce((a, b) => a + b, 0))).toBeLessThan(1e-9);
    }
  });

  it('semantic grouping: near-identical queries share a group id and one normalisation of their pooled rewards', async () => {
    const out = join(dir, 'q-semantic.jsonl');
    const s = await writeRollouts(db, corpus, { side: 'query', round: 1, out, samples: 4, grouping: 'semantic', groupingDelta: 0.3 });
    const lines = readLines(out);
    expect(lines.length).toBe(train.length * 4);
    const members = new Map<string, Set<string>>();
    for (const l of lines) members.set(l.group_id, (members.get(l.group_id) ?? new Set()).add(l.entity_id));
    expect(s.groups).toBe(members.size);
    const pooled = [...members].filter(([, m]) => m.size > 1);
    expect(pooled.length).toBeGreaterThan(0);
    for (const [g, m] of pooled) {
      expect(m.size).toBeGreaterThanOrEqual(3);
      const rows = lines.filter((l) => l.group_id === g);
      const r = rows.map((l) => l.reward as number);
      const mean = r.reduce((a, b) => a + b, 0) / r.length;
      const std = Math.sqrt(r.reduce((a, b) => a + (b - mean) ** 2, 0) / r.length);
      rows.forEach((l) => expect(l.advantage).toBeCloseTo((l.reward - mean) / (std + 1e-6), 9));
    }
    // Exact grouping: one group per query.
    const exact = await writeRollouts(db, corpus, { side: 'query', round: 1, out: join(dir, 'q-exact.jsonl'), samples: 4 });
    expect(exact.groups).toBe(train.length);
  });

  it('item side: rewards equal the full counterfactual recompute against the generations the half-round builds on', async () => {
    const out = join(dir, 'i.jsonl');
    await writeRollouts(db, corpus, { side: 'item', round: 1, out, samples: 3, limit: 10 });
    const lines = readLines(out);
    expect(lines.length).toBe(30);
    const store = new KeywordIndexStore(db);
    const frozen = frozenFor(await readStoredRun(db), 'item', 1);
    const itemView = await store.openView('item', frozen.itemGeneration);
    const queryView = await store.openView('query', frozen.queryGeneration!);
    const trainRel = new Map(train.map((id) => [id, corpus.relevant.get(id)!]));
    const ctx = { itemView, queryView, relevance: buildRelevance(queryView, itemView, trainRel, new Set(train)), kMax: 30, beta: 1 };
    for (const l of lines) {
      if (l.reason !== 'ok') continue;
      expect(l.reward).toBeCloseTo(itemRewardFull(ctx, itemView.ordinalOf(l.entity_id), l.keywords), 12);
    }
  });

  it('through the openai client: malformed completions are invalid_format lines, never a crash', async () => {
    const out = join(dir, 'llm.jsonl');
    const gen = new OpenAIGenerator({ baseURL, model: 'm', apiKey: 'k', retryBaseMs: 1, retryMaxMs: 2, timeoutMs: 5000 });
    const s = await writeRollouts(db, corpus, { side: 'query', round: 1, out, samples: 3, limit: 4, generator: gen });
    const lines = readLines(out);
    expect(llmCalls).toBeGreaterThan(0);
    expect(lines.length).toBe(12);
    expect(s.reasons.invalid_format).toBe(4);
    expect(s.reasons.ok).toBe(8);
    for (const l of lines.filter((x) => x.reason === 'invalid_format')) {
      expect(l.reward).toBe(-1);
      expect(l.completion[0].content).toContain('cannot help');
    }
  });

  it("through the openai client: the prompts (recorded as sent) show two training queries with the planner's plans, never a held-out, dev query or the input itself", async () => {
    const out = join(dir, 'llm-examples.jsonl');
    const gen = new OpenAIGenerator({ baseURL, model: 'm', apiKey: 'k', retryBaseMs: 1, retryMaxMs: 2, timeoutMs: 5000 });
    await writeRollouts(db, corpus, { side: 'query', round: 1, out, samples: 1, limit: 6, generator: gen });
    const textToId = new Map(corpus.queries.map((q) => [q.text, q.id]));
    const lines = readLines(out);
    expect(lines.length).toBeGreaterThan(0);
    const shown = new Set<string>();
    for (const l of lines) {
      const turns = l.prompt as { role: string; content: string }[];
      const examples = turns.slice(1, -1);
      // Two examples (user + assistant each), unless one of them is this input (left out).
      expect([2, 4]).toContain(examples.length);
      for (let i = 0; i < examples.length; i += 2) {
        const text = examples[i].content.replace(/^Query: /, '').split('\n')[0];
        const id = textToId.get(text)!;
        shown.add(id);
        expect(train).toContain(id);
        expect(evalIds).not.toContain(id);
        expect(id).not.toBe(l.entity_id);
        expect(JSON.parse(examples[i + 1].content).keywords.length).toBeGreaterThan(0);
      }
      expect(turns.at(-1)!.content).toContain(corpus.queries.find((q) => q.id === l.entity_id)!.text);
    }
    expect(shown.size).toBeGreaterThanOrEqual(1);
  });

  it('an LLM failure on one input keeps the groups answered before it and names the inputs without lines', async () => {
    const out = join(dir, 'partial.jsonl');
    const byId = new Map(corpus.queries.map((q) => [q.id, q.text]));
    const firstFour = train.slice(0, 4);
    failText = byId.get(firstFour[1])!;
    try {
      const gen = new OpenAIGenerator({
        baseURL,
        model: 'm',
        apiKey: 'k',
        retryBaseMs: 1,
        retryMaxMs: 2,
        timeoutMs: 5000,
        maxRetries: 1,
        concurrency: 1,
      });
      const s = await writeRollouts(db, corpus, { side: 'query', round: 1, out, samples: 3, limit: 4, generator: gen, grouping: 'exact' });
      const lines = readLines(out);
      // The input before the failure is written; after the endpoint failed, the rest were not sent.
      expect([...new Set(lines.map((l) => l.entity_id))].sort()).toEqual([firstFour[0]]);
      expect(lines).toHaveLength(3);
      expect(s).toMatchObject({ lines: 3, groups: 1 });
      expect([...s.failed].sort()).toEqual(firstFour.slice(1).sort());
      expect(s.failure).toMatch(new RegExp(`^${firstFour[1]}: LLM endpoint .* failed after 2 attempt\\(s\\): last status HTTP 503$`));
    } finally {
      failText = null;
    }
  });

  it.skipIf(!existsSync('/dev/full'))('a full device as --out is DISK_FULL naming the file', async () => {
    const err = await writeRollouts(db, corpus, { side: 'query', round: 1, out: '/dev/full', samples: 2, limit: 2 }).catch((e) => e);
    expect(isCogrError(err, 'DISK_FULL')).toBe(true);
    expect(err.message).toBe('/dev/full: no space left on device');
  });

  it('refuses a round the run has not reached, naming the missing step', async () => {
    await expect(writeRollouts(db, corpus, { side: 'query', round: 3, out: join(dir, 'x.jsonl') })).rejects.toThrow(
      /r3-query builds on step r2-query/,
    );
  });
});

describe('import-generation', () => {
  it('commits external item keywords as a new generation and evaluates it', async () => {
    const store = new KeywordIndexStore(db);
    const before = await store.latest('item');
    const file = join(dir, 'items.jsonl');
    writeFileSync(
      file,
      corpus.items.map((it) => JSON.stringify({ id: it.id, keywords: it.text.split(' ').slice(0, 3) })).join('\n') + '\n',
    );
    const rec = await importGeneration(db, corpus, 'item', file);
    expect(rec.generation).toBe((before ?? -1) + 1);
    expect(rec.metrics.queries).toBe(evalIds.length);
    const e = (await store.entries('item', rec.generation)).find((x) => x.id === corpus.items[0].id)!;
    expect(new Set(e.keywords)).toEqual(new Set(corpus.items[0].text.split(' ').slice(0, 3)));
  });

  it('keeps held-out queries out of a query generation but evaluates with their keywords', async () => {
    const file = join(dir, 'queries.jsonl');
    writeFileSync(file, corpus.queries.map((q) => JSON.stringify({ id: q.id, keywords: q.text.split(' ') })).join('\n') + '\n');
    const rec = await importGeneration(db, corpus, 'query', file);
    const ids = (await new KeywordIndexStore(db).entries('query', rec.generation)).map((x) => x.id).sort();
    // held-out and dev queries stay out of query generations
    expect(ids).toEqual([...train].sort());
    expect(rec.heldOutFromFile).toBe(evalIds.length);
  });

  it('is idempotent: the same file again commits nothing; after a new item generation only the evaluation is added', async () => {
    const store = new KeywordIndexStore(db);
    const file = join(dir, 'again.jsonl');
    writeFileSync(file, corpus.queries.map((q) => JSON.stringify({ id: q.id, keywords: q.text.split(' ').slice(0, 2) })).join('\n') + '\n');
    const state = new RunState(db);
    const first = await importGeneration(db, corpus, 'query', file);
    expect(first.reused).toBe(false);
    const nImports = (await state.imports()).length;
    // As a re-run after a kill between the commit and the caller's output: same generation, same record, nothing appended.
    const again = await importGeneration(db, corpus, 'query', file);
    expect(again).toEqual(first);
    expect(await store.latest('query')).toBe(first.generation);
    expect((await state.imports()).length).toBe(nImports);
    // A new item generation: the query file is evaluated against it without a new query generation.
    const items = join(dir, 'items-again.jsonl');
    writeFileSync(
      items,
      corpus.items.map((it) => JSON.stringify({ id: it.id, keywords: it.text.split(' ').slice(0, 4) })).join('\n') + '\n',
    );
    const item = await importGeneration(db, corpus, 'item', items);
    const after = await importGeneration(db, corpus, 'query', file);
    expect(after.reused).toBe(true);
    expect(after.generation).toBe(first.generation);
    expect(after.itemGeneration).toBe(item.generation);
    expect((await state.imports()).length).toBe(nImports + 2);
    // A changed file is a new import.
    writeFileSync(file, corpus.queries.map((q) => JSON.stringify({ id: q.id, keywords: q.text.split(' ').slice(0, 3) })).join('\n') + '\n');
    const changed = await importGeneration(db, corpus, 'query', file);
    expect(changed.reused).toBe(false);
    expect(changed.generation).toBe(first.generation + 1);
  });

  it('rejects unknown ids and malformed lines with file and line', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(
      bad,
      `${JSON.stringify({ id: corpus.items[0].id, keywords: ['a'] })}\n${JSON.stringify({ id: 'nope', keywords: ['b'] })}\n`,
    );
    await expect(importGeneration(db, corpus, 'item', bad)).rejects.toSatisfy(
      (e: unknown) => isCogrError(e, 'NOT_FOUND') && /bad\.jsonl:2: unknown item id "nope"/.test((e as Error).message),
    );
    writeFileSync(bad, `{"id": "${corpus.items[0].id}", "keywords": "not a list"}\n`);
    await expect(importGeneration(db, corpus, 'item', bad)).rejects.toThrow(/bad\.jsonl:1: keywords/);
  });
});
