/**
 * `cogr llm serve`'s HTTP server (src/llm/server.ts) on real fastify over loopback with a
 * scripted engine (the real model's test is smollm2.real.test.ts): the OpenAI shape of answers
 * and errors, n choices with consecutive seeds, finish_reason "length", a full queue (429),
 * a prompt beyond the context (400), a client that leaves while waiting (skipped, never
 * generated) or while generating (stopped), the deadline (504), and the openai client of
 * cogr against it.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../index/core/log.ts';
import { OpenAIGenerator } from '../../../generators/llm.ts';
import type { Completion, CompletionParams, Engine, EngineMessage } from '../../../src/llm/engine.ts';
import { createLlmServer, type LlmServerOptions, type LlmServerStats } from '../../../src/llm/server.ts';

interface Call {
  messages: readonly EngineMessage[];
  params: CompletionParams;
  signal: AbortSignal;
  release: (c?: Partial<Completion>) => void;
}

/** An engine whose completions wait until the test releases them (or answer at once when `auto`). */
function scriptedEngine(opts: { contextSize?: number; auto?: (p: CompletionParams, i: number) => Partial<Completion> } = {}) {
  const calls: Call[] = [];
  const waiters: ((c: Call) => void)[] = [];
  const engine: Engine = {
    id: 'scripted',
    contextSize: opts.contextSize ?? 100,
    threads: 1,
    // One token per word, plus 3 per message (a chat template's overhead).
    promptTokens: (messages) => messages.reduce((a, m) => a + 3 + m.content.split(/\s+/).filter(Boolean).length, 0),
    complete: (messages, params, signal) =>
      new Promise<Completion>((resolve, reject) => {
        const done = (c: Partial<Completion> = {}) =>
          resolve({ text: '{"keywords": ["a"]}', finishReason: 'stop', completionTokens: 4, ...c });
        const call: Call = { messages, params, signal, release: done };
        calls.push(call);
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        if (opts.auto) done(opts.auto(params, calls.length - 1));
        waiters.shift()?.(call);
      }),
    close: async () => {},
  };
  /** The next call to start (already started or not). */
  const nth = (i: number): Promise<Call> =>
    calls.length > i
      ? Promise.resolve(calls[i])
      : new Promise((r) => waiters.push((c) => (calls.length > i ? r(calls[i]) : void nth(i).then(r))));
  return { engine, calls, nth };
}

const apps: FastifyInstance[] = [];
afterEach(async () => {
  while (apps.length) await apps.pop()!.close();
});

async function start(engine: Engine, options: LlmServerOptions = {}): Promise<{ base: string; stats: LlmServerStats }> {
  const { app, stats } = createLlmServer(engine, silentLogger, options);
  apps.push(app);
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return { base: address, stats };
}

function chat(base: string, body: unknown, signal?: AbortSignal): Promise<{ status: number; body: any; headers: Headers }> {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  }).then(async (r) => ({
    status: r.status,
    body: await r.json(),
    headers: r.headers,
  }));
}

const hello = { messages: [{ role: 'user', content: 'hello there' }] };
const tick = () => new Promise((r) => setTimeout(r, 20));

describe('cogr llm serve (scripted engine)', () => {
  it('answers chat completions in OpenAI shape: n choices with seeds seed, seed + 1, finish_reason length, usage; /v1/models and /health', async () => {
    const { engine, calls } = scriptedEngine({ auto: (_p, i) => (i === 1 ? { finishReason: 'length', text: '{"keywords": ["a' } : {}) });
    const { base } = await start(engine);
    const r = await chat(base, {
      ...hello,
      n: 2,
      seed: 7,
      temperature: 0.7,
      top_p: 0.8,
      max_tokens: 20,
      stop: 'END',
      response_format: { type: 'json_schema', json_schema: { name: 'k', schema: { type: 'object' } } },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      object: 'chat.completion',
      model: 'scripted',
      usage: { prompt_tokens: 5, completion_tokens: 8, total_tokens: 13 },
    });
    expect(r.body.choices.map((c: any) => [c.index, c.finish_reason, c.message.role])).toEqual([
      [0, 'stop', 'assistant'],
      [1, 'length', 'assistant'],
    ]);
    expect(calls.map((c) => c.params)).toEqual([
      { temperature: 0.7, topP: 0.8, maxTokens: 20, seed: 7, stop: ['END'], format: { kind: 'json_schema', schema: { type: 'object' } } },
      { temperature: 0.7, topP: 0.8, maxTokens: 20, seed: 8, stop: ['END'], format: { kind: 'json_schema', schema: { type: 'object' } } },
    ]);
    expect(await (await fetch(`${base}/v1/models`)).json()).toMatchObject({ object: 'list', data: [{ id: 'scripted', object: 'model' }] });
    expect(await (await fetch(`${base}/health`)).json()).toMatchObject({
      status: 'ok',
      model: 'scripted',
      context_size: 100,
      threads: 1,
      queue: { running: 0, waiting: 0 },
      served: { requests: 1, completions: 2, completion_tokens: 8 },
    });
  });

  it("a full queue answers 429 in OpenAI's error shape with retry-after; the waiting requests are answered in order", async () => {
    const { engine, nth } = scriptedEngine();
    const { base, stats } = await start(engine, { queueSize: 1 });
    const first = chat(base, hello);
    const running = await nth(0);
    const second = chat(base, hello);
    await tick();
    const third = await chat(base, hello);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect(third.body.error).toMatchObject({ type: 'rate_limit_exceeded', code: 'OVERLOADED', param: null });
    expect(third.body.error.message).toContain('queue is full');
    running.release({ text: 'one' });
    (await nth(1)).release({ text: 'two' });
    expect((await first).body.choices[0].message.content).toBe('one');
    expect((await second).body.choices[0].message.content).toBe('two');
    expect(stats.rejected).toBe(1);
  });

  it('a prompt whose tokens plus max_tokens exceed the context is a 400 naming both, never queued', async () => {
    const { engine, calls } = scriptedEngine({ contextSize: 50 });
    const { base } = await start(engine);
    const long = { messages: [{ role: 'user', content: 'word '.repeat(60) }], max_tokens: 10 };
    const r = await chat(base, long);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: 'invalid_request_error', code: 'INVALID_BODY', param: 'messages' });
    expect(r.body.error.message).toContain('context is 50 tokens, but 73 were requested (63 in the messages, 10 for the completion)');
    // Fits without the completion's tokens, not with them.
    const r2 = await chat(base, { messages: [{ role: 'user', content: 'word '.repeat(40) }], max_tokens: 10 });
    expect(r2.status).toBe(400);
    expect(calls).toHaveLength(0);
  });

  it('a client that leaves while waiting is skipped (never generated); one that leaves while generating stops the generation', async () => {
    const { engine, calls, nth } = scriptedEngine();
    const { base, stats } = await start(engine);
    const first = new AbortController();
    const a = chat(base, hello, first.signal).catch((e: Error) => e);
    const running = await nth(0);
    const second = new AbortController();
    const b = chat(base, { messages: [{ role: 'user', content: 'second' }] }, second.signal).catch((e: Error) => e);
    const c = chat(base, { messages: [{ role: 'user', content: 'third' }] });
    await tick();
    second.abort();
    expect(await b).toBeInstanceOf(Error);
    await tick();
    // The first client leaves mid-generation: its engine call sees the abort.
    first.abort();
    expect(await a).toBeInstanceOf(Error);
    await tick();
    expect(running.signal.aborted).toBe(true);
    // The second was skipped: the next call generated is the third's.
    const next = await nth(1);
    expect(next.messages[0].content).toBe('third');
    next.release({ text: 'three' });
    expect((await c).body.choices[0].message.content).toBe('three');
    expect(calls).toHaveLength(2);
    expect(stats.skipped).toBe(1);
  });

  it('a request not answered within its deadline is a 504, queue wait included, and its generation is stopped', async () => {
    const { engine, nth } = scriptedEngine();
    const { base, stats } = await start(engine, { requestTimeoutMs: 150 });
    const a = chat(base, hello);
    const running = await nth(0);
    const r = await a;
    expect(r.status).toBe(504);
    expect(r.body.error).toMatchObject({ code: 'DEADLINE_EXCEEDED', type: 'server_error' });
    expect(running.signal.aborted).toBe(true);
    expect(stats.timedOut).toBe(1);
  });

  it('refuses what it does not do, naming the field: stream, n over the limit, max_tokens over the limit, no messages', async () => {
    const { engine } = scriptedEngine({ auto: () => ({}) });
    const { base } = await start(engine, { maxN: 4, maxTokens: 64 });
    for (const [body, field] of [
      [{ ...hello, stream: true }, 'stream'],
      [{ ...hello, n: 5 }, 'n'],
      [{ ...hello, max_tokens: 65 }, 'max_tokens'],
      [{ messages: [] }, 'messages'],
    ] as const) {
      const r = await chat(base, body);
      expect(r.status).toBe(400);
      expect(r.body.error.param ?? r.body.error.details?.field).toBe(field);
      expect(r.body.error.type).toBe('invalid_request_error');
    }
  });

  it("cogr's OpenAI client works against it with its defaults: bounded schema sent, keywords normalised and de-duplicated", async () => {
    const { engine, calls } = scriptedEngine({
      contextSize: 1000,
      auto: (_p, i) => ({ text: JSON.stringify({ keywords: ['Lens', 'crystalline  lens', 'lens', `k${i}`] }) }),
    });
    const { base } = await start(engine);
    const g = new OpenAIGenerator({ baseURL: `${base}/v1`, model: 'scripted' });
    const [samples] = await g.generate('query', [{ id: 'q', text: 'the crystalline lens' }], {
      samples: 2,
      temperature: 0.7,
      topP: 0.8,
      seed: 1,
    });
    expect(samples.map((s) => s.keywords)).toEqual([
      ['lens', 'crystalline lens', 'k0'],
      ['lens', 'crystalline lens', 'k1'],
    ]);
    expect(calls[0].params.format).toMatchObject({ kind: 'json_schema', schema: { properties: { keywords: { maxItems: 12 } } } });
    expect(calls[0].params.maxTokens).toBe(160);
    expect(g.usage).toMatchObject({ requests: 1, samples: 2, formatFailures: 0, truncated: 0 });
  });
});
