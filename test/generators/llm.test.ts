import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isCogrError } from '../../index/core/errors.ts';
import { llmOptionsFromEnv, OpenAIGenerator, type LlmOptions } from '../../generators/llm.ts';
import { boundedKeywordListSchema, parseKeywordOutput } from '../../generators/parse.ts';
import type { KeyValueStore } from '../../generators/types.ts';
import { memoryStore } from '../fixtures/memory.ts';

type Reply = {
  status: number;
  body?: unknown;
  hang?: boolean;
  /** Headers, then a body that never ends: chunks that keep trickling, a Content-Length never reached, or an SSE stream that keeps trickling. */
  stall?: 'chunked' | 'length' | 'sse';
  /** Answer after this many milliseconds. */
  delayMs?: number;
  headers?: Record<string, string>;
  raw?: string;
  contentType?: string;
};
type Handler = (body: Record<string, any>, call: number) => Reply;

let server: Server;
let baseURL = '';
let handler: Handler = () => ({ status: 500 });
let calls: Record<string, any>[] = [];

function completion(contents: string[], usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }) {
  return {
    id: 'cmpl-1',
    object: 'chat.completion',
    created: 0,
    model: 'test-model',
    choices: contents.map((c, i) => ({ index: i, finish_reason: 'stop', message: { role: 'assistant', content: c } })),
    usage,
  };
}

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const body = JSON.parse(data || '{}');
      calls.push(body);
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      const r = handler(body, calls.length);
      if (r.hang) return; // never answer: the client times out
      if (r.stall) {
        // Headers now, then a body that never finishes.
        const sse = r.stall === 'sse';
        res.writeHead(200, {
          'content-type': sse ? 'text/event-stream' : 'application/json',
          ...(r.stall === 'length' ? { 'content-length': '100' } : {}),
        });
        res.write(sse ? 'data: {' : '{');
        if (r.stall === 'length') return;
        const trickle = setInterval(() => res.write(sse ? ': still thinking\n' : ' '), 50);
        res.on('close', () => clearInterval(trickle));
        return;
      }
      const send = () => {
        res.writeHead(r.status, { 'content-type': r.contentType ?? 'application/json', ...(r.headers ?? {}) });
        res.end(r.raw ?? JSON.stringify(r.body ?? { error: { message: `status ${r.status}` } }));
      };
      if (r.delayMs) setTimeout(send, r.delayMs);
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no address');
  baseURL = `http://127.0.0.1:${addr.port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
afterEach(() => {
  calls = [];
});

function gen(extra: Partial<LlmOptions> = {}, cache?: KeyValueStore) {
  return new OpenAIGenerator(
    { baseURL, model: 'test-model', apiKey: 'k', retryBaseMs: 1, retryMaxMs: 5, timeoutMs: 2000, ...extra },
    { cache },
  );
}
const input = { id: 'q1', text: 'breast cancer treatment' };

describe('OpenAIGenerator against a local chat-completions server', () => {
  it('parses good JSON output, n samples in one request, structured output requested', async () => {
    handler = (b) => ({
      status: 200,
      body: completion(
        Array.from({ length: b.n ?? 1 }, (_, i) => JSON.stringify({ keywords: ['Breast Cancer', 'tamoxifen', `k${i}`, 'breast cancer'] })),
      ),
    });
    const g = gen();
    const [samples] = await g.generate('query', [input], { samples: 3, temperature: 1 });
    expect(calls).toHaveLength(1);
    expect(calls[0].n).toBe(3);
    expect(calls[0].response_format.type).toBe('json_schema');
    expect(calls[0].response_format.json_schema.schema.properties.keywords.type).toBe('array');
    expect(calls[0].messages.at(-1).content).toContain('breast cancer treatment');
    expect(samples.map((s) => s.keywords)).toEqual([
      ['breast cancer', 'tamoxifen', 'k0'],
      ['breast cancer', 'tamoxifen', 'k1'],
      ['breast cancer', 'tamoxifen', 'k2'],
    ]);
    expect(samples.every((s) => s.format === 'ok' && s.logProb === null)).toBe(true);
    expect(g.usage).toMatchObject({ requests: 1, totalTokens: 15, failures: 0, cacheHits: 0 });
  });

  it('asks for a bounded schema (count ≤ min(K_max, 12), length ≤ 60) and shows a worked example before the input', async () => {
    handler = (b) => ({ status: 200, body: completion(Array.from({ length: b.n ?? 1 }, () => '{"keywords": ["a"]}')) });
    await gen().generate('query', [input], { samples: 1, temperature: 0.7 });
    const schema = calls[0].response_format.json_schema.schema;
    expect(schema.properties.keywords).toMatchObject({ type: 'array', minItems: 1, maxItems: 12 });
    expect(schema.properties.keywords.items).toMatchObject({ type: 'string', minLength: 1, maxLength: 60 });
    expect(calls[0].max_tokens).toBe(160);
    const roles = calls[0].messages.map((m: { role: string }) => m.role);
    expect(roles).toEqual(['system', 'user', 'assistant', 'user']);
    expect(calls[0].messages[0].content).toContain('at most 12 different keywords');
    expect(JSON.parse(calls[0].messages[2].content).keywords.length).toBeGreaterThan(0);
    calls = [];
    // A lower K_max bounds the schema and the prompt; examples given replace the file's, cut to the bound, never the input itself.
    const g = gen({ kMax: 3, maxKeywordLength: 20 });
    g.setExamples('query', [
      { text: 'training query one', keywords: ['t1', 't2', 't3', 't4'] },
      { text: input.text, keywords: ['its own answer'] },
    ]);
    await g.generate('query', [input], { samples: 1, temperature: 0.7 });
    const s2 = calls[0].response_format.json_schema.schema.properties.keywords;
    expect([s2.maxItems, s2.items.maxLength]).toEqual([3, 20]);
    expect(calls[0].messages.map((m: { content: string }) => m.content)).toEqual([
      expect.stringContaining('at most 3 different keywords'),
      expect.stringContaining('training query one'),
      '{"keywords":["t1","t2","t3"]}',
      expect.stringContaining(input.text),
    ]);
  });

  it('the bounded schema refuses too many or too long keywords; the parser still reads any list', () => {
    const sch = boundedKeywordListSchema(2, 5);
    expect(sch.safeParse({ keywords: ['ab', 'cd'] }).success).toBe(true);
    expect(sch.safeParse({ keywords: ['ab', 'cd', 'ef'] }).success).toBe(false);
    expect(sch.safeParse({ keywords: ['abcdef'] }).success).toBe(false);
    expect(sch.safeParse({ keywords: [] }).success).toBe(false);
    expect(() => boundedKeywordListSchema(0, 5)).toThrow(RangeError);
  });

  it('reports a sample cut off at max_tokens (finish_reason length) as truncated, parsed or not', async () => {
    handler = () => ({
      status: 200,
      body: {
        ...completion(['{"keywords": ["lens", "eye"]}', '{"keywords": ["lens", "crystalline lens", "crystal']),
        choices: [
          { index: 0, finish_reason: 'stop', message: { role: 'assistant', content: '{"keywords": ["Lens", "eye", "lens"]}' } },
          {
            index: 1,
            finish_reason: 'length',
            message: { role: 'assistant', content: '{"keywords": ["lens", "crystalline lens", "crystal' },
          },
        ],
      },
    });
    const g = gen();
    const [samples] = await g.generate('query', [input], { samples: 2, temperature: 0.7 });
    expect(samples[0]).toMatchObject({ format: 'ok', keywords: ['lens', 'eye'] });
    expect(samples[0].truncated).toBeUndefined();
    expect(samples[1]).toMatchObject({ format: 'invalid_format', keywords: [], truncated: true });
    expect(g.usage).toMatchObject({ truncated: 1, formatFailures: 1, samples: 2 });
  });

  it("a 400 about the prompt's length fails that input naming the reason, and structured output stays on", async () => {
    handler = (b) =>
      String(b.messages.at(-1).content).includes('too long')
        ? {
            status: 400,
            body: {
              error: {
                message: "messages: this model's context is 2048 tokens, but 2300 were requested",
                type: 'invalid_request_error',
                param: 'messages',
                code: 'INVALID_BODY',
              },
            },
          }
        : { status: 200, body: completion(['{"keywords": ["fine"]}']) };
    const g = gen();
    const settled = await g.generateSettled(
      'query',
      [
        { id: 'long', text: 'too long' },
        { id: 'ok', text: 'short' },
      ],
      { samples: 1, temperature: 0.7 },
    );
    const bad = settled[0];
    expect(!bad.ok && isCogrError(bad.error, 'LLM_ERROR') && bad.error.message).toMatch(
      /HTTP 400 \(messages: this model's context is 2048 tokens.*\(not retryable\)/,
    );
    expect(settled[1].ok).toBe(true);
    expect(calls.every((c) => c.response_format?.type === 'json_schema')).toBe(true);
  });

  it('reads a plain-text list, and repeats requests when the server ignores n', async () => {
    handler = () => ({ status: 200, body: completion(['Keywords:\n1. Heart attack\n2. myocardial infarction\n- aspirin']) });
    const g = gen();
    const [samples] = await g.generate('query', [input], { samples: 2, temperature: 0.7, topP: 0.8 });
    expect(samples).toHaveLength(2);
    expect(samples[0].keywords).toEqual(['heart attack', 'myocardial infarction', 'aspirin']);
    expect(calls.length).toBe(2); // first asked n=2, got 1 choice; then one more request
    expect(calls[0].top_p).toBe(0.8);
    expect(calls[1].n).toBeUndefined();
  });

  it('turns malformed output into invalid_format samples, never a crash', async () => {
    const outs = [
      '{"keywords": [1, 2',
      '',
      'I am sorry, but as a language model I cannot help you with the request you have made today because it is long prose.',
    ];
    handler = (_b, call) => ({ status: 200, body: completion([outs[(call - 1) % 3]]) });
    const g = gen({ multiSample: 'off' });
    const [samples] = await g.generate('item', [{ id: 'i', title: 'T', text: 'x' }], { samples: 3, temperature: 1 });
    expect(samples.map((s) => s.format)).toEqual(['invalid_format', 'invalid_format', 'invalid_format']);
    expect(samples.every((s) => s.keywords.length === 0)).toBe(true);
    expect(g.usage.formatFailures).toBe(3);
  });

  it('retries a 429 then succeeds', async () => {
    handler = (_b, call) => (call === 1 ? { status: 429 } : { status: 200, body: completion(['["a", "b"]']) });
    const g = gen();
    const [samples] = await g.generate('query', [input], { samples: 1, temperature: 1 });
    expect(samples[0].keywords).toEqual(['a', 'b']);
    expect(g.usage).toMatchObject({ requests: 2, failures: 1, retries: 1 });
  });

  it('gives up after 500s with an error naming the endpoint and status', async () => {
    handler = () => ({ status: 500 });
    const g = gen({ maxRetries: 2 });
    const err = await g.generate('query', [input], { samples: 1, temperature: 1 }).catch((e) => e);
    expect(isCogrError(err, 'LLM_ERROR')).toBe(true);
    expect(err.message).toContain(baseURL);
    expect(err.message).toContain('HTTP 500');
    expect(calls).toHaveLength(3);
  });

  it('retries a 200 whose body is not JSON (or not a chat completion), then fails with LLM_ERROR naming endpoint and status', async () => {
    const bodies: Reply[] = [
      { status: 200, raw: '<html>upstream hiccup</html>' }, // claims JSON: the client throws a SyntaxError
      { status: 200, raw: '<html>upstream hiccup</html>', contentType: 'text/html' }, // the client hands back the text
      { status: 200, body: { object: 'error' } }, // JSON without choices
    ];
    handler = (_b, call) => (call <= 3 ? bodies[call - 1] : { status: 200, body: completion(['{"keywords": ["after retries"]}']) });
    const g = gen({ maxRetries: 3 });
    const [samples] = await g.generate('query', [input], { samples: 1, temperature: 1 });
    expect(samples[0].keywords).toEqual(['after retries']);
    expect(g.usage).toMatchObject({ requests: 4, failures: 3, retries: 3 });
    for (const reply of bodies) {
      calls = [];
      handler = () => reply;
      const err = await gen({ maxRetries: 2 })
        .generate('query', [input], { samples: 1, temperature: 1 })
        .catch((e) => e);
      expect(isCogrError(err, 'LLM_ERROR')).toBe(true);
      expect(err.message).toContain(baseURL);
      expect(err.message).toMatch(/last status HTTP 200 with (a body that is not JSON|JSON that is not a chat completion \(no choices\))$/);
      expect(err.message).not.toMatch(/SyntaxError|Unexpected token/);
      expect(calls).toHaveLength(3);
    }
  });

  it('takes the request time-out from --llm-timeout or COGR_LLM_TIMEOUT_MS, decimal milliseconds only', () => {
    expect(llmOptionsFromEnv({}, {}).timeoutMs).toBeUndefined();
    expect(llmOptionsFromEnv({}, { COGR_LLM_TIMEOUT_MS: '1500' }).timeoutMs).toBe(1500);
    expect(llmOptionsFromEnv({ llmTimeout: '250' }, { COGR_LLM_TIMEOUT_MS: '1500' }).timeoutMs).toBe(250);
    expect(new OpenAIGenerator({ ...llmOptionsFromEnv({ llmTimeout: '250' }, {}), model: 'm' }).options.timeoutMs).toBe(250);
    for (const bad of ['0', '1e3', '0x10', '-5', '2.5', '', 'soon', '86400001']) {
      expect(() => llmOptionsFromEnv({ llmTimeout: bad }, {}), bad).toThrow(
        `--llm-timeout: expected an integer in [1, 86400000] (milliseconds), got ${JSON.stringify(bad)}`,
      );
    }
    expect(() => llmOptionsFromEnv({}, { COGR_LLM_TIMEOUT_MS: '60s' })).toThrow(/^COGR_LLM_TIMEOUT_MS: expected an integer/);
  });

  it('retries a time-out and then reports it', async () => {
    handler = (_b, call) => (call === 1 ? { status: 0, hang: true } : { status: 200, body: completion(['{"keywords": ["late"]}']) });
    const g = gen({ timeoutMs: 200 });
    const [samples] = await g.generate('query', [input], { samples: 1, temperature: 1 });
    expect(samples[0].keywords).toEqual(['late']);
    handler = () => ({ status: 0, hang: true });
    const err = await gen({ timeoutMs: 100, maxRetries: 1 })
      .generate('query', [input], { samples: 1, temperature: 1 })
      .catch((e) => e);
    expect(isCogrError(err, 'LLM_ERROR')).toBe(true);
    expect(err.message).toMatch(/time-out/);
  });

  it(
    'a body that never finishes is a time-out of the whole exchange: retried, then LLM_ERROR naming the endpoint and the flags',
    { timeout: 60_000 },
    async () => {
      for (const stall of ['chunked', 'length', 'sse'] as const) {
        calls = [];
        handler = (_b, call) =>
          call === 1 ? { status: 200, stall } : { status: 200, body: completion(['{"keywords": ["after the stall"]}']) };
        // Long enough for the good answer to arrive in time on a busy machine.
        const g = gen({ timeoutMs: 1500 });
        const [samples] = await g.generate('query', [input], { samples: 1, temperature: 1 });
        expect(samples[0].keywords, stall).toEqual(['after the stall']);
        expect(g.usage, stall).toMatchObject({ requests: 2, failures: 1, retries: 1 });
        calls = [];
        handler = () => ({ status: 200, stall });
        const err = await gen({ timeoutMs: 300, maxRetries: 2 })
          .generate('query', [input], { samples: 1, temperature: 1 })
          .catch((e) => e);
        expect(isCogrError(err, 'LLM_ERROR'), stall).toBe(true);
        expect(err.message).toContain(`LLM endpoint ${baseURL} failed after 3 attempt(s): last status time-out after 300 ms`);
        expect(err.message).toMatch(/--llm-timeout or a lower --concurrency/);
        expect(calls).toHaveLength(3);
      }
    },
  );

  it('the deadline counts from sending, not while a request waits for a concurrency slot', { timeout: 60_000 }, async () => {
    // One request at a time, each answered after 150 ms: the last of 40 waits ≥ 5.8 s for its slot, beyond the 5 s deadline.
    handler = () => ({ status: 200, delayMs: 150, body: completion(['{"keywords": ["served"]}']) });
    const g = gen({ timeoutMs: 5000, concurrency: 1, maxRetries: 0 });
    const inputs = Array.from({ length: 40 }, (_, i) => ({ id: `q${i}`, text: `query ${i}` }));
    const res = await g.generate('query', inputs, { samples: 1, temperature: 1 });
    expect(res.map((r) => r[0].keywords)).toEqual(inputs.map(() => ['served']));
    expect(g.usage).toMatchObject({ requests: 40, failures: 0 });
  });

  it('never caches a protocol anomaly (a choice without text): the next call asks again', async () => {
    const cache = memoryStore();
    const anomalies = [
      { role: 'assistant', content: null },
      { role: 'assistant' },
      { role: 'assistant', content: 5 },
      { role: 'assistant', content: null, tool_calls: [] },
      undefined,
    ];
    for (const message of anomalies) {
      handler = () => ({
        status: 200,
        body: { ...completion(['x']), choices: [{ index: 0, finish_reason: 'stop', ...(message ? { message } : {}) }] },
      });
      const g = gen({}, cache);
      const [samples] = await g.generate('query', [input], { samples: 1, temperature: 0.7, seed: 1 });
      expect(samples[0]).toMatchObject({ format: 'invalid_format', keywords: [], raw: '' });
      expect(samples[0].anomaly).toMatch(/message|content/);
      expect(cache.map.size).toBe(0);
    }
    // An empty text, which earlier versions cached for a null one, is asked again too.
    const g0 = gen({}, cache);
    const key = [
      ...(await (async () => {
        handler = () => ({ status: 200, body: completion(['{"keywords": ["real answer"]}']) });
        await g0.generate('query', [input], { samples: 1, temperature: 0.7, seed: 1 });
        return cache.map.keys();
      })()),
    ][0];
    expect(cache.map.get(key)).toEqual({ content: '{"keywords": ["real answer"]}', logProb: null, finishReason: 'stop' });
    await cache.put(key, { content: '', logProb: null });
    calls = [];
    const healed = gen({}, cache);
    const [again] = await healed.generate('query', [input], { samples: 1, temperature: 0.7, seed: 1 });
    expect(calls).toHaveLength(1);
    expect(again[0]).toMatchObject({ format: 'ok', keywords: ['real answer'] });
    expect(healed.usage).toMatchObject({ requests: 1, cacheHits: 0 });
    // Model output is cached as before: a third run asks nothing.
    calls = [];
    const third = gen({}, cache);
    await third.generate('query', [input], { samples: 1, temperature: 0.7, seed: 1 });
    expect(calls).toHaveLength(0);
    expect(third.usage.cacheHits).toBe(1);
  });

  it('settles per input: answered inputs are kept; after an endpoint failure the requests not yet sent are not sent', async () => {
    const text = (b: Record<string, any>) => String(b.messages.at(-1).content);
    // An input-specific refusal (400) fails that input only.
    handler = (b) =>
      text(b).includes('second')
        ? { status: 400, body: { error: { message: 'context too long' } } }
        : { status: 200, body: completion(['["fine"]']) };
    const inputs = ['first', 'second', 'third'].map((t, i) => ({ id: `q${i}`, text: `${t} query` }));
    const settled = await gen({ structured: 'off' }).generateSettled('query', inputs, { samples: 1, temperature: 1 });
    expect(settled.map((r) => r.ok)).toEqual([true, false, true]);
    const bad = settled[1];
    expect(!bad.ok && isCogrError(bad.error, 'LLM_ERROR') && bad.error.message).toMatch(/HTTP 400 \(not retryable\)/);
    // An endpoint failure (5xx after retries) stops the rest: one input's retries, not three.
    calls = [];
    handler = (b) => (text(b).includes('first') ? { status: 200, body: completion(['["kept"]']) } : { status: 503 });
    const s2 = await gen({ concurrency: 1, maxRetries: 1 }).generateSettled('query', inputs, { samples: 1, temperature: 1 });
    expect(s2[0]).toMatchObject({ ok: true, samples: [{ keywords: ['kept'] }] });
    expect(s2.map((r) => r.ok)).toEqual([true, false, false]);
    expect(calls).toHaveLength(3); // q0 once, q1 twice (a retry), q2 never
    const notSent = s2[2];
    expect(!notSent.ok && notSent.error.message).toMatch(
      /^not sent: the LLM endpoint .* failed on input "q1" \(LLM endpoint .* HTTP 503\)/,
    );
    // generate() still fails as a whole, with the failure of the input that failed.
    const err = await gen({ concurrency: 1, maxRetries: 1 })
      .generate('query', inputs, { samples: 1, temperature: 1 })
      .catch((e) => e);
    expect(isCogrError(err, 'LLM_ERROR') && err.message).toMatch(/failed after 2 attempt\(s\): last status HTTP 503$/);
  });

  it('falls back to plain text when the server rejects response_format', async () => {
    handler = (b) =>
      b.response_format
        ? { status: 400, body: { error: { message: 'response_format not supported' } } }
        : { status: 200, body: completion(['alpha, beta; gamma delta']) };
    const g = gen({ concurrency: 1 });
    const res = await g.generate('query', [input, { id: 'q2', text: 'other' }], { samples: 1, temperature: 1 });
    expect(res[0][0].keywords).toEqual(['alpha', 'beta', 'gamma delta']);
    expect(calls.filter((c) => c.response_format)).toHaveLength(1); // remembered per endpoint
  });

  it('serves a repeated generation from the LevelDB cache without a second request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cogr-llm-'));
    const db = new Level<string, unknown>(join(dir, 'db'), { valueEncoding: 'json' });
    try {
      const cache = db.sublevel<string, unknown>('llm-cache', { valueEncoding: 'json' }) as unknown as KeyValueStore;
      handler = () => ({ status: 200, body: completion(['{"keywords": ["cached one"]}']) });
      const a = await gen({}, cache).generate('query', [input], { samples: 1, temperature: 0.7, seed: 3 });
      const g2 = gen({}, cache);
      const b = await g2.generate('query', [input], { samples: 1, temperature: 0.7, seed: 3 });
      expect(calls).toHaveLength(1);
      expect(b).toEqual(a);
      expect(g2.usage).toMatchObject({ requests: 0, cacheHits: 1 });
      await gen({}, cache).generate('query', [input], { samples: 1, temperature: 1.0, seed: 3 }); // other decoding → new request
      expect(calls).toHaveLength(2);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('validates options with messages naming the field', () => {
    expect(() => new OpenAIGenerator({ baseURL: 'not a url', model: 'm' })).toThrow(/baseURL/);
    expect(() => new OpenAIGenerator({ baseURL, model: '' })).toThrow(/model/);
  });
});

describe('parseKeywordOutput', () => {
  it('reads JSON in fences, bullets, separated text; refuses prose', () => {
    expect(parseKeywordOutput('```json\n{"keywords": ["A b", "c"]}\n```').keywords).toEqual(['a b', 'c']);
    expect(parseKeywordOutput('* one\n* two').keywords).toEqual(['one', 'two']);
    expect(parseKeywordOutput('one; two, three').keywords).toEqual(['one', 'two', 'three']);
    expect(parseKeywordOutput('This is a sentence that goes on for a long time without any list.').ok).toBe(false);
    expect(parseKeywordOutput('{"keywords": [').ok).toBe(false);
  });
});
