/**
 * One half-round, one reward: the same completions scored by the co-evolution loop's own
 * rewards (evolve/run.ts halfRoundRewards, the item side on the worker pool as the loop
 * runs it), written by `cogr rollouts` (writeRollouts) and answered by a real
 * `cogr reward-server --half` child over loopback HTTP (`POST /get_reward`, ChatML-wrapped
 * as TRL sends them) must be identical, on a run whose β (2) and K_max (5) are not the
 * defaults. Before the half-round was one object, 149 of 152 query rewards of a MED run
 * differed (the server matched {q}, kept the query's own names, used β 1 and K_max 30 and
 * froze the served round instead of the base step).
 *
 * The run is made as an external trainer's is: `cogr demo --rounds 0`, then its
 * half-rounds imported (`import-generation --half`): r1-query's keywords, then an r1-item
 * generation in which every core training query's own string and label are on its relevant
 * items (what an item generator offered the queries' names writes), so that r2-query's
 * frozen item generation carries the names a held-out query never has.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type CogrDb } from '../../index/store/db.ts';
import { silentLogger } from '../../index/core/log.ts';
import type { Corpus, Side } from '../../index/core/types.ts';
import { NO_FLOOR } from '../../generators/planner/ranking.ts';
import { RewardPool } from '../../workers/pool.ts';
import { loadDataset } from '../../src/datasets/index.ts';
import { importGeneration } from '../../src/evolve/importGeneration.ts';
import { writeRollouts } from '../../src/evolve/rollouts.ts';
import { halfRoundRewards, runCoevolution } from '../../src/evolve/run.ts';
import { silentProgress } from '../../src/progress.ts';
import { frozenHalfRound, openRun, ownNames, type OpenRun } from '../../src/run/context.ts';
import { LOOP_TEST_CONFIG } from '../fixtures/loopConfig.ts';
import { writeSynthDataset } from '../fixtures/synthDataset.ts';
import { chatml, startRewardServer, type RolloutLine } from '../fixtures/rewardServerChild.ts';

let dir = '';
let db: CogrDb;
let corpus: Corpus;
let run: OpenRun;
let pool: RewardPool;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cogr-half-'));
  // The synthetic corpus as a JSONL dataset folder, so the reward server (a CLI child) loads it by path.
  const ds = writeSynthDataset(join(dir, 'synth'));
  corpus = (await loadDataset(ds)).corpus;
  db = await openDb(join(dir, 'db'));
  await runCoevolution(db, corpus, { ...LOOP_TEST_CONFIG, dataset: ds, rounds: 0, beta: 2, kMax: 5 });
  run = await openRun(db, corpus);
  // r1-query: each core training query gets the keywords of its first relevant item.
  const q1 = await frozenHalfRound(run, 'query', 1);
  const kwOf = (id: string) => q1.itemView.keywordsOf(q1.itemView.ordinalOf(id));
  const queryFile = join(dir, 'r1-query.jsonl');
  writeFileSync(
    queryFile,
    run.coreQueries.map((q) => JSON.stringify({ id: q.id, keywords: kwOf([...run.coreRelevant.get(q.id)!][0]).slice(0, 4) })).join('\n') +
      '\n',
  );
  await importGeneration(db, corpus, 'query', queryFile, silentLogger, { half: 'r1-query' });
  // r1-item: every item keeps its keywords and gains the own names of the core queries that judge it.
  const names = new Map<string, string[]>();
  for (const q of run.coreQueries)
    for (const id of run.coreRelevant.get(q.id)!) names.set(id, [...(names.get(id) ?? []), ...ownNames(q1.planner, q.text)]);
  const itemFile = join(dir, 'r1-item.jsonl');
  writeFileSync(itemFile, [...names].map(([id, n]) => JSON.stringify({ id, keywords: [...kwOf(id), ...n] })).join('\n') + '\n');
  await importGeneration(db, corpus, 'item', itemFile, silentLogger, { half: 'r1-item' });
  run = await openRun(db, corpus);
  pool = RewardPool.create({ size: 1 });
}, 120_000);

afterAll(async () => {
  for (const c of children) c.kill('SIGTERM');
  await pool?.destroy();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `cogr reward-server --half <name>` on the run's database; its base URL once it listens. */
const rewardServer = (half: string): Promise<string> => startRewardServer(join(dir, 'db'), ['--half', half], children);

/** The rewards `POST /get_reward` gives the completions, sent as TRL sends them (prompt + completion + end of turn). */
async function served(
  url: string,
  side: Side,
  rows: readonly { id: string; prompt: RolloutLine['prompt']; completion: string }[],
): Promise<(number | null)[]> {
  const res = await fetch(`${url}/get_reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      query: rows.map((r) => chatml(r.prompt) + r.completion + '<|im_end|>'),
      prompts: rows.map((r) => chatml(r.prompt)),
      labels: rows.map((r) => `${side}:${r.id}`),
    }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { rewards: (number | null)[] }).rewards;
}

/** The loop's own rewards for the completions: halfRoundRewards over the views the half-round freezes, as trainQueryHalf / trainItemHalf call it. */
async function loopRewards(side: Side, round: number, rows: readonly { id: string; completion: string }[]): Promise<(number | null)[]> {
  const half = await frozenHalfRound(run, side, round);
  const ctx = { ...run, pool: () => pool, floor: NO_FLOOR, logger: silentLogger, progress: silentProgress };
  const rewards = await halfRoundRewards(ctx, side, half, run.coreQueries, half.planner);
  try {
    const { parseKeywordOutput } = await import('../../generators/parse.ts');
    const samples = rows.map((r) => {
      const p = parseKeywordOutput(r.completion);
      return { id: r.id, keywords: p.ok ? p.keywords : null };
    });
    return (await rewards.score(samples)).rewards;
  } finally {
    rewards.close();
  }
}

describe('one half-round, one reward (β 2, K_max 5)', () => {
  it("builds r2-query on the imported half-rounds: items carry the queries' own names", async () => {
    const half = await frozenHalfRound(run, 'query', 2);
    expect(half.base).toBe('r1-item');
    const q = run.coreQueries[0];
    const o = half.itemView.ordinalOf([...run.coreRelevant.get(q.id)!][0]);
    expect(half.itemView.keywordsOf(o)).toEqual(expect.arrayContaining(ownNames(half.planner, q.text)));
  });

  it('scores the query side identically in the loop, the rollouts file and POST /get_reward', async () => {
    expect(run.config.beta).toBe(2);
    expect(run.config.kMax).toBe(5);
    const out = join(dir, 'rq.jsonl');
    await writeRollouts(db, corpus, { side: 'query', round: 2, out });
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RolloutLine);
    const half = await frozenHalfRound(run, 'query', 2);
    const prompt = lines[0].prompt;
    // Completions where the old server's scorer differed: the query's own string and label, more keywords than K_max, prose.
    const crafted = run.coreQueries.flatMap((q) => {
      const names = ownNames(half.planner, q.text);
      const rel = [...(run.coreRelevant.get(q.id) ?? [])].flatMap((id) => half.itemView.keywordsOf(half.itemView.ordinalOf(id)));
      return [
        { id: q.id, prompt, completion: JSON.stringify({ keywords: names }) },
        { id: q.id, prompt, completion: JSON.stringify({ keywords: [...names, ...rel.slice(0, 2)] }) },
        { id: q.id, prompt, completion: JSON.stringify({ keywords: rel.slice(0, 8) }) },
        { id: q.id, prompt, completion: JSON.stringify({ keywords: rel.slice(0, 3) }) },
        { id: q.id, prompt, completion: 'no keywords here, sorry' },
      ];
    });
    const rows = [...lines.map((l) => ({ id: l.entity_id, prompt: l.prompt, completion: l.completion[0].content })), ...crafted];
    const loop = await loopRewards('query', 2, rows);
    const http = await served(await rewardServer('r2-query'), 'query', rows);
    expect(http).toEqual(loop);
    expect(loop.slice(0, lines.length)).toEqual(lines.map((l) => l.reward));
    // Scored as held out: the query's own names alone match nothing, though its relevant items carry them.
    expect(crafted.filter((_, i) => i % 5 === 0).map((_, k) => loop[lines.length + 5 * k])).toEqual(run.coreQueries.map(() => 0));
    expect(new Set(loop).size).toBeGreaterThan(2);
  }, 120_000);

  it('scores the item side identically in the loop (worker pool), the rollouts file and POST /get_reward', async () => {
    const out = join(dir, 'ri.jsonl');
    await writeRollouts(db, corpus, { side: 'item', round: 1, out, limit: 24 });
    const lines = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as RolloutLine);
    const half = await frozenHalfRound(run, 'item', 1);
    // Each item offered the keywords of the queries that judge it, too many of them, and its own keywords.
    const crafted = corpus.items.slice(0, 24).flatMap((it) => {
      const judging = run.coreQueries.filter((q) => run.coreRelevant.get(q.id)?.has(it.id));
      const qkw = judging.flatMap((q) => half.queryView!.keywordsOf(half.queryView!.ordinalOf(q.id)));
      const own = half.itemView.keywordsOf(half.itemView.ordinalOf(it.id));
      return [qkw.slice(0, 4), [...qkw, ...own].slice(0, 9), own.slice(0, 3)].map((k) => ({
        id: it.id,
        prompt: lines[0].prompt,
        completion: JSON.stringify({ keywords: k }),
      }));
    });
    const rows = [...lines.map((l) => ({ id: l.entity_id, prompt: l.prompt, completion: l.completion[0].content })), ...crafted];
    const loop = await loopRewards('item', 1, rows);
    const http = await served(await rewardServer('r1-item'), 'item', rows);
    expect(http).toEqual(loop);
    expect(loop.slice(0, lines.length)).toEqual(lines.map((l) => l.reward));
    expect(loop.some((r) => r !== 0)).toBe(true);
  }, 120_000);

  it('serves only the half-round: the other side and withheld queries are named', async () => {
    const url = await rewardServer('r2-query');
    const res = await fetch(`${url}/v1/reward/item`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: corpus.items[0].id, keywords: ['x'] }),
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /half-round r2-query, whose rewards are query rewards/,
    );
    const held = run.evalQueries[0].id;
    const r2 = await fetch(`${url}/v1/reward/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: held, keywords: ['x'] }),
    });
    expect(r2.status).toBe(404);
    expect(((await r2.json()) as { error: { message: string } }).error.message).toMatch(/withheld from rewards: a held-out query/);
  }, 60_000);
});

// Last in the file: it commits query generations of its own.
describe('import-generation --against: query keywords before a half-round, on its item index', () => {
  it("evaluates the held-out queries against r1-query's frozen item generation, not the latest (r1-item's import)", async () => {
    const q1 = await frozenHalfRound(run, 'query', 1);
    const latest = await run.store.latest('item');
    expect(latest).not.toBe(q1.itemView.generation);
    // Each query (held-out ones too) gets the r1-item keywords of its first relevant item: they differ between the two indexes.
    const after = await run.store.openView('item', latest!);
    const pick = (id: string) => after.keywordsOf(after.ordinalOf(id)).slice(-2);
    const queries = [...run.coreQueries, ...run.evalQueries];
    const file = join(dir, 'before-r1.jsonl');
    const kw = new Map(queries.map((q) => [q.id, pick([...corpus.relevant.get(q.id)!][0])]));
    writeFileSync(file, queries.map((q) => JSON.stringify({ id: q.id, keywords: kw.get(q.id) })).join('\n') + '\n');
    const { evaluateQueries } = await import('../../src/evolve/evaluate.ts');
    const on = (v: typeof after) => evaluateQueries(v, run.evalQueries, (q) => kw.get(q.id) ?? [], corpus, run.config.beta).metrics.f1;
    expect(on(q1.itemView)).not.toBe(on(after));
    const rec = await importGeneration(db, corpus, 'query', file, silentLogger, { against: 'r1-query' });
    expect(rec.itemGeneration).toBe(q1.itemView.generation);
    expect(rec.metrics.f1).toBe(on(q1.itemView));
    const plain = await importGeneration(db, corpus, 'query', file, silentLogger);
    expect(plain.reused).toBe(true);
    expect(plain.itemGeneration).toBe(latest);
    expect(plain.metrics.f1).toBe(on(after));
    await expect(importGeneration(db, corpus, 'item', file, silentLogger, { against: 'r1-query' })).rejects.toThrow(/only query keywords/);
    await expect(importGeneration(db, corpus, 'query', file, silentLogger, { against: 'r1-query', half: 'r1-query' })).rejects.toThrow(
      /--against and --half/,
    );
    await expect(importGeneration(db, corpus, 'query', file, silentLogger, { against: 'r1-item' })).rejects.toThrow(
      /expected a query half-round/,
    );
  }, 60_000);
});
