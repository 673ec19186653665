import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Query } from '../../index/core/types.ts';
import { KeywordView } from '../../index/view/view.ts';
import { itemRewardFull } from '../../rewards/itemReward.ts';
import { buildRelevance } from '../../rewards/relevance.ts';
import { buildRewardServer, parseLabel, stripChatTemplate } from '../../src/server/rewardServer.ts';
import { LiveSnapshot } from '../../src/server/state.ts';
import { storeSnapshotLoader } from '../../src/server/storeLoader.ts';
import { catalogue, commitGeneration, listen, tempDir } from './_serverFixture.ts';
import { queryReward } from '../rewards/_oracles.ts';

const cat = catalogue(40, 2);
const queries: Query[] = [
  { id: 'q1', text: 'red running shoes' },
  { id: 'q2', text: 'wool hat' },
  { id: 'q3', text: 'leather boots' },
  { id: 'q4', text: 'blue summer dress' },
];
const queryEntries = [
  { id: 'q1', self: 'red running shoes', keywords: ['running shoes', 'red'] },
  { id: 'q2', self: 'wool hat', keywords: ['wool hat', 'hat'] },
  { id: 'q3', self: 'leather boots', keywords: ['leather boots', 'boots', 'sale'] },
  { id: 'q4', self: 'blue summer dress', keywords: ['summer dress'] },
];
// Relevant: items whose text mentions the query's kind.
const relevant = new Map<string, Set<string>>();
for (const q of queries) {
  const kind = q.text.split(' ').slice(-2).join(' ');
  relevant.set(q.id, new Set(cat.items.filter((i) => i.text.includes(kind) || i.text.includes(q.text.split(' ').pop()!)).map((i) => i.id)));
}
const itemView = KeywordView.build('item', 0, cat.generations[1]);
const queryView = KeywordView.build('query', 0, queryEntries);

let tmp: ReturnType<typeof tempDir>;
let base: string;
let close: () => Promise<unknown>;
beforeAll(async () => {
  tmp = tempDir('cogr-reward-');
  const dbPath = join(tmp.dir, 'db');
  await commitGeneration(dbPath, 'item', cat.generations[1], 1);
  await commitGeneration(dbPath, 'query', queryEntries, 1);
  const live = new LiveSnapshot(storeSnapshotLoader({ dbPath, round: 'latest' }));
  await live.reload();
  const app = buildRewardServer({ live, corpus: { queries, relevant }, token: 'tok' });
  close = () => app.close();
  base = await listen(app);
});
afterAll(async () => {
  await close();
  tmp.cleanup();
});

async function post(path: string, body: unknown, token: string | null = 'tok') {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const r = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, body: (await r.json()) as any };
}

function relOrd(qid: string): number[] {
  return [...relevant.get(qid)!].map((id) => itemView.ordinalOf(id)).filter((o) => o >= 0);
}

describe('chat template and labels', () => {
  it('takes the text after the prompt, or after the last assistant marker, without end tokens', () => {
    expect(stripChatTemplate('PROMPT keywords: a, b<|im_end|>', 'PROMPT')).toBe('keywords: a, b');
    const chatml =
      '<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nquery: shoes<|im_end|>\n<|im_start|>assistant\n["running shoes", "red"]<|im_end|>';
    expect(stripChatTemplate(chatml, 'not a prefix')).toBe('["running shoes", "red"]');
    const llama3 =
      '<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n- wool hat\n- hat<|eot_id|>';
    expect(stripChatTemplate(llama3, '')).toBe('- wool hat\n- hat');
    expect(stripChatTemplate('[INST] q [/INST] boots, sale</s>', '')).toBe('boots, sale');
    expect(parseLabel('item:MED-10', 'query')).toEqual({ side: 'item', id: 'MED-10' });
    expect(parseLabel('PLAIN-1', 'query')).toEqual({ side: 'query', id: 'PLAIN-1' });
  });
});

describe('POST /get_reward (OpenRLHF shape)', () => {
  it('returns rewards equal to the library for query and item labels', async () => {
    const prompt = '<|im_start|>user\nWrite keywords<|im_end|>\n<|im_start|>assistant\n';
    const completions = [
      '["running shoes", "red"]<|im_end|>',
      'hat, wool hat',
      'I think the best answer would be a long sentence about boots and more words here',
      '- cotton socks\n- sale',
      '["summer dress", "blue"]',
    ];
    const labels = ['query:q1', 'q2', 'query:q3', 'item:p004', 'item:p007'];
    const { status, body } = await post('/get_reward', {
      query: completions.map((c) => prompt + c),
      prompts: completions.map(() => prompt),
      labels,
    });
    expect(status).toBe(200);
    expect(body.scores).toEqual(body.rewards);
    const q1 = queryReward(itemView, { self: 'red running shoes', keywords: ['running shoes', 'red'] }, relOrd('q1'), {
      nRel: relevant.get('q1')!.size,
    });
    const q2 = queryReward(itemView, { self: 'wool hat', keywords: ['hat', 'wool hat'] }, relOrd('q2'), { nRel: relevant.get('q2')!.size });
    const ctx = { itemView, queryView, relevance: buildRelevance(queryView, itemView, relevant) };
    const i4 = itemRewardFull(ctx, itemView.ordinalOf('p004'), ['cotton socks', 'sale']);
    const i7 = itemRewardFull(ctx, itemView.ordinalOf('p007'), ['summer dress', 'blue']);
    expect(body.rewards[0]).toBeCloseTo(q1.reward, 12);
    expect(body.rewards[1]).toBeCloseTo(q2.reward, 12);
    expect(body.rewards[2]).toBe(-1); // prose: invalid_format
    expect(body.rewards[3]).toBeCloseTo(i4, 12);
    expect(body.rewards[4]).toBeCloseTo(i7, 12);
    expect(q1.reward).toBeGreaterThan(0);
    expect(body.extra_logs.format_ok).toEqual([1, 1, 0, 1, 1]);
    expect(body.extra_logs.side_item).toEqual([0, 0, 0, 1, 1]);
    expect(body.extra_logs.matched[0]).toBe(q1.nRet);
  });

  it('validates the batch, names the field, and needs the token', async () => {
    const mismatch = await post('/get_reward', { query: ['a', 'b'], labels: ['q1'] });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.error.message).toBe('labels: has 1 entries, query has 2');
    const wrongType = await post('/get_reward', { query: 'a', labels: ['q1'] });
    expect(wrongType.body.error.message).toMatch(/^query: /);
    const unknown = await post('/get_reward', { query: ['x, y'], labels: ['query:nope'] });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toMatch(/^labels\[0\]: no query "nope"/);
    expect((await post('/get_reward', { query: ['a'], labels: ['q1'] }, null)).status).toBe(401);
    expect((await post('/get_reward', { query: ['a'], labels: ['q1'] }, 'bad')).status).toBe(401);
  });
});

describe('plain JSON reward endpoints', () => {
  it('query reward with matched counts; over budget and invalid format layers', async () => {
    const { status, body } = await post('/v1/reward/query', { id: 'q3', keywords: ['leather boots', 'boots'] });
    expect(status).toBe(200);
    const ref = queryReward(itemView, { self: 'leather boots', keywords: ['leather boots', 'boots'] }, relOrd('q3'), {
      nRel: relevant.get('q3')!.size,
    });
    expect(body).toMatchObject({
      side: 'query',
      id: 'q3',
      reason: 'ok',
      matched: ref.nRet,
      truePositives: ref.tp,
      relevant: relevant.get('q3')!.size,
    });
    expect(body.reward).toBeCloseTo(ref.reward, 12);
    const over = await post('/v1/reward/query', { id: 'q3', keywords: Array.from({ length: 31 }, (_, i) => `kw ${i}`) });
    expect(over.body).toMatchObject({ reason: 'over_budget', reward: 0 });
    const bad = await post('/v1/reward/query', { id: 'q3', completion: '{"keywords": [' });
    expect(bad.body).toMatchObject({ reason: 'invalid_format', reward: -1 });
    const both = await post('/v1/reward/query', { id: 'q3', completion: 'a', keywords: ['a'] });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toBe('keywords: give exactly one of keywords, completion');
  });

  it('item reward with affected query counts', async () => {
    const { body } = await post('/v1/reward/item', { id: 'p001', completion: '["leather boots", "sale", "wool hat"]' });
    const ctx = { itemView, queryView, relevance: buildRelevance(queryView, itemView, relevant) };
    const ord = itemView.ordinalOf('p001');
    expect(body.reward).toBeCloseTo(itemRewardFull(ctx, ord, ['leather boots', 'sale', 'wool hat']), 12);
    const cand = new Set(queryView.match({ keywords: ['leather boots', 'sale', 'wool hat', itemView.selfOf(ord)] }));
    const refQ = new Set(queryView.match({ keywords: [...itemView.keywordsOf(ord), itemView.selfOf(ord)] }));
    const affected = [...cand].filter((q) => !refQ.has(q)).length + [...refQ].filter((q) => !cand.has(q)).length;
    expect(body).toMatchObject({ side: 'item', reason: 'ok', matched: cand.size, referenceMatched: refQ.size, affected });
    expect(affected).toBeGreaterThan(0);
    const nf = await post('/v1/reward/item', { id: 'zzz', keywords: ['a'] });
    expect(nf.status).toBe(404);
  });
});
