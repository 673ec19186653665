import { connect } from 'node:net';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
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

/**
 * One request on a raw socket: the head, then the body parts written without ending it;
 * resolves with the answer as soon as a whole response has arrived (so an answer that comes
 * before the body is complete is seen as such), or rejects when the socket closes without one.
 */
function rawExchange(url: string, head: string, parts: Buffer[]): Promise<{ status: number; body: any; sentAll: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname);
    let buf = Buffer.alloc(0);
    let sentAll = false;
    sock.on('error', () => {});
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const text = buf.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? NaN);
      if (buf.length < end + 4 + len) return;
      const status = Number(text.slice(9, 12));
      resolve({ status, body: JSON.parse(buf.subarray(end + 4, end + 4 + len).toString('utf8')), sentAll });
      sock.destroy();
    });
    sock.on('close', () => reject(new Error(`closed without an answer: ${buf.toString('latin1').slice(0, 200)}`)));
    sock.write(head, () => {
      let k = 0;
      const next = (): void => {
        if (k === parts.length) {
          sentAll = true;
          return;
        }
        sock.write(parts[k++], next);
      };
      next();
    });
  });
}

/** One request whose body is written whole before the answer is read (as Python's http.client does): the answer, or the socket error that came instead. */
function sendAllThenRead(url: string, head: string, body: Buffer): Promise<{ status: number; error: string | null }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const sock = connect(Number(port), hostname);
    let buf = '';
    let written = false;
    let status = 0;
    const done = (error: string | null) => {
      sock.destroy();
      resolve({ status, error });
    };
    sock.on('error', (e) => done((e as NodeJS.ErrnoException).code ?? e.message));
    sock.on('data', (d: Buffer) => {
      buf += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d+)[^]*?\r\n\r\n/.exec(buf);
      if (m) status = Number(m[1]);
      if (m && written) done(null);
    });
    sock.write(head);
    sock.write(body, (e) => {
      if (e) return done((e as NodeJS.ErrnoException).code ?? e.message);
      written = true;
      if (status) done(null);
    });
  });
}

describe('hostile bodies (issue 50): the token first, the depth as bytes arrive, the loop never held', () => {
  const deep = (n: number) => `{"query":${'['.repeat(n)}${']'.repeat(n)},"labels":[]}`;
  const headFor = (path: string, length: number, token: string | null) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}\r\n`;

  it('answers 401 without the token before the body is sent, whatever the body', async () => {
    for (const path of ['/get_reward', '/v1/reward/query', '/v1/reward/item', '/v1/admin/reload']) {
      // 4 MB announced, 10 bytes sent: the 401 comes without the rest.
      const r = await rawExchange(base, headFor(path, 4 << 20, null), [Buffer.from('{"query":[')]);
      expect(r.status, path).toBe(401);
      expect(r.sentAll).toBe(true); // the part sent; the body itself never completes
      expect(r.body.error.code).toBe('UNAUTHORIZED');
    }
    for (const body of ['{not json', '{"query": [[[', '\u00ff\u00fe']) {
      const r = await rawExchange(base, headFor('/get_reward', Buffer.byteLength(body), 'wrong'), [Buffer.from(body)]);
      expect(r.status, body).toBe(401);
    }
  });

  it('refuses nesting deeper than the limit while the body is still arriving', async () => {
    const head = headFor('/get_reward', 4 << 20, 'tok');
    const r = await rawExchange(base, head, [Buffer.from('{"query":' + '['.repeat(1000))]);
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe('body: arrays and objects nested deeper than 64 levels');
    // At the limit it is only a wrong shape.
    const ok = await post('/get_reward', JSON.parse(deep(63)));
    expect(ok.status).toBe(400);
    expect(ok.body.error.message).toMatch(/^query\[0\]: expected a string/);
  });

  it('a 4 MB nested body without the token is a 401 and holds the event loop for no more than a moment', async () => {
    const body = deep(2_000_000); // 4 MB
    const h = monitorEventLoopDelay({ resolution: 5 });
    h.enable();
    const health: number[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const t0 = performance.now();
        expect((await fetch(`${base}/health`)).status).toBe(200);
        health.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    for (const token of [null, 'wrong', 'tok']) {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers.authorization = `Bearer ${token}`;
      const r = await fetch(`${base}/get_reward`, { method: 'POST', headers, body });
      expect(r.status, String(token)).toBe(token === 'tok' ? 400 : 401);
    }
    polling = false;
    await poll;
    h.disable();
    // The issue's bound, about blocking (the loop is held a few ms at a time; before, 2 s for the 401).
    expect(h.max / 1e6).toBeLessThan(500);
    expect(Math.max(...health)).toBeLessThan(500);
  });

  it('refuses arrays, objects and strings larger than any valid body holds, as they are parsed', async () => {
    const cases: [string, string][] = [
      [`{"query":[${Array(20_000).fill('1').join(',')}],"labels":[]}`, 'query: more than 10000 entries'],
      [`{${Array.from({ length: 20_000 }, (_, i) => `"k${i}":1`).join(',')}}`, '(root): more than 10000 entries'],
      [`{"query":["${'\\u0041'.repeat(70_000)}"],"labels":["q1"]}`, 'query[0]: a string longer than 65536 characters'],
    ];
    for (const [body, message] of cases) {
      const r = await fetch(`${base}/get_reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer tok' },
        body,
      });
      expect(r.status).toBe(400);
      expect(((await r.json()) as any).error.message).toBe(message);
    }
  });

  it('a client that sends the whole body before reading gets the answer, not a reset', async () => {
    const body = Buffer.from(deep(2_000_000));
    for (const [token, status] of [
      [null, 401],
      ['tok', 400],
    ] as const) {
      const r = await sendAllThenRead(base, headFor('/get_reward', body.length, token), body);
      expect(r).toEqual({ status, error: null });
    }
  });

  it('text/plain is 415, as documented', async () => {
    const r = await fetch(`${base}/get_reward`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', authorization: 'Bearer tok' },
      body: '{"query":["a"],"labels":["q1"]}',
    });
    expect(r.status).toBe(415);
  });
});

describe('labels that cannot be scored (issue 50)', () => {
  let withheldBase = '';
  let strictBase = '';
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    const live = new LiveSnapshot(storeSnapshotLoader({ dbPath: join(tmp.dir, 'db'), round: 'latest' }));
    await live.reload();
    const withheld = new Map<string, 'dev' | 'held-out'>([
      ['q3', 'dev'],
      ['q4', 'held-out'],
    ]);
    const served = { queries: queries.slice(0, 2), relevant: new Map([...relevant].filter(([id]) => id === 'q1' || id === 'q2')) };
    for (const strictLabels of [false, true]) {
      const app = buildRewardServer({ live, corpus: served, withheld, strictLabels });
      closers.push(() => app.close());
      if (strictLabels) strictBase = await listen(app);
      else withheldBase = await listen(app);
    }
  });
  afterAll(async () => {
    for (const c of closers) await c();
  });
  const send = async (at: string, path: string, body: unknown) => {
    const r = await fetch(`${at}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as any };
  };

  it('answers the other labels of a batch, null for the withheld or unknown one, each named in errors', async () => {
    const batch = {
      query: ['["red"]', '["hat"]', '["boots"]', '["dress"]', '["x"]'],
      labels: ['query:q1', 'query:q3', 'query:q2', 'query:q4', 'query:nope'],
    };
    const r = await send(withheldBase, '/get_reward', batch);
    expect(r.status).toBe(200);
    expect(r.body.rewards).toHaveLength(5);
    expect(typeof r.body.rewards[0]).toBe('number');
    expect(typeof r.body.rewards[2]).toBe('number');
    expect([r.body.rewards[1], r.body.rewards[3], r.body.rewards[4]]).toEqual([null, null, null]);
    expect(r.body.errors.map((e: { index: number }) => e.index)).toEqual([1, 3, 4]);
    expect(r.body.errors[0].message).toBe(
      'labels[1]: query "q3" is withheld from rewards: a dev query of the run (dev queries decide which half-rounds are adopted); cogr reward-server --include-dev serves it',
    );
    expect(r.body.errors[1].message).toMatch(
      /^labels\[3\]: query "q4" is withheld from rewards: a held-out query .*--include-held-out serves it$/,
    );
    expect(r.body.errors[2].message).toMatch(/^labels\[4\]: no query "nope"/);
    expect(r.body.extra_logs.format_ok).toEqual([1, 0, 1, 0, 0]);
    // The same rewards as one at a time.
    const one = await send(withheldBase, '/get_reward', { query: ['["red"]'], labels: ['query:q1'] });
    expect(one.body.rewards[0]).toBe(r.body.rewards[0]);
    expect(one.body.errors).toBeUndefined();
  });

  it('names a withheld query as withheld on the plain endpoint, and refuses the batch with --strict-labels', async () => {
    const single = await send(withheldBase, '/v1/reward/query', { id: 'q3', keywords: ['hat'] });
    expect(single.status).toBe(404);
    expect(single.body.error.message).toMatch(/^id: query "q3" is withheld from rewards: a dev query/);
    const strict = await send(strictBase, '/get_reward', { query: ['["red"]', '["hat"]'], labels: ['query:q1', 'query:q3'] });
    expect(strict.status).toBe(404);
    expect(strict.body.error.message).toMatch(/^labels\[1\]: query "q3" is withheld/);
    expect(strict.body.error.details).toMatchObject({ index: 1, label: 'query:q3', withheld: 'dev' });
  });
});
