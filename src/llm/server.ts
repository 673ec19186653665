/**
 * `cogr llm serve`: an OpenAI-compatible chat-completions server on one engine (llama.ts),
 * built on the shared fastify helpers (src/server/http.ts: connection limits and time-outs,
 * strict JSON bodies, one error shape). Routes:
 * - `POST /v1/chat/completions`: messages, n, temperature, top_p, max_tokens, seed, stop,
 *   response_format (`json_schema`, compiled to a grammar; `json_object`; `text`);
 *   `stream` is refused (400). The n choices are drawn one after another with seeds
 *   seed, seed + 1, … (a random seed when none is given).
 * - `GET /v1/models`, `GET /health` (the model, the context, the queue, what was served:
 *   completions, completion tokens, seconds in the engine).
 * One request is generated at a time; at most `queueSize` wait (one more is 429
 * OVERLOADED); each has a deadline from its arrival (`requestTimeoutMs`: 504
 * DEADLINE_EXCEEDED, the generation stopped); a request whose client has gone is skipped
 * while it waits and stopped while it runs; a prompt whose tokens plus max_tokens exceed
 * the context is a 400 naming both. Every error body is OpenAI's shape as well as cogr's:
 * `{"error": {"message", "type", "param", "code", "details"?}}`.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { CogrError, cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { createApp, parseOrThrow, type ConnectionLimits } from '../server/http.ts';
import { createServerMetrics } from '../server/metrics.ts';
import { InvalidFormat, type CompletionParams, type Engine, type EngineMessage } from './engine.ts';

const D = DEFAULTS.llmServe;

export const LlmServerOptionsSchema = z.object({
  queueSize: z.number().int().min(0).max(10_000).default(D.queueSize),
  requestTimeoutMs: z.number().int().min(1).max(86_400_000).default(D.requestTimeoutMs),
  maxN: z.number().int().min(1).max(128).default(D.maxN),
  maxTokens: z.number().int().min(1).max(1_000_000).default(D.maxTokens),
  bodyLimit: z.number().int().min(1024).default(D.bodyLimit),
});
export type LlmServerOptions = z.input<typeof LlmServerOptionsSchema>;

const MessageSchema = z.object({
  role: z.enum(['system', 'user', 'assistant', 'developer']),
  // A string, or OpenAI's array of text parts.
  content: z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }))]),
});

const ResponseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({ name: z.string().optional(), schema: z.record(z.string(), z.unknown()), strict: z.boolean().nullish() }),
  }),
]);

/** The request body; fields OpenAI defines that change nothing here (user, logprobs, …) are ignored. */
const ChatRequestSchema = z.object({
  model: z.string().optional(),
  messages: z.array(MessageSchema).min(1),
  n: z.number().int().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().min(1).optional(),
  max_completion_tokens: z.number().int().min(1).optional(),
  seed: z.number().int().optional(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  response_format: ResponseFormatSchema.optional(),
  stream: z.boolean().optional(),
});

/** OpenAI's error `type` for a status. */
function openaiType(status: number): string {
  if (status === 429) return 'rate_limit_exceeded';
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

interface Job {
  run: () => Promise<void>;
  signal: AbortSignal;
  skipped: () => void;
}

/** One job at a time, at most `limit` waiting; a job whose signal has fired is skipped when its turn comes. */
class OneAtATime {
  private readonly waiting: Job[] = [];
  running = false;
  constructor(private readonly limit: number) {}
  get size(): number {
    return this.waiting.length;
  }
  /** False when the queue is full. */
  offer(job: Job): boolean {
    if (this.running && this.waiting.length >= this.limit) return false;
    this.waiting.push(job);
    void this.next();
    return true;
  }
  private async next(): Promise<void> {
    if (this.running) return;
    const job = this.waiting.shift();
    if (!job) return;
    if (job.signal.aborted) {
      job.skipped();
      return this.next();
    }
    this.running = true;
    try {
      await job.run();
    } finally {
      this.running = false;
      void this.next();
    }
  }
}

export interface LlmServerStats {
  requests: number;
  completions: number;
  completionTokens: number;
  skipped: number;
  rejected: number;
  timedOut: number;
  /** Seconds spent in the engine (prompt evaluation and generation). */
  engineSeconds: number;
}

export function createLlmServer(
  engine: Engine,
  log: Logger,
  options: LlmServerOptions = {},
  connections?: ConnectionLimits,
): { app: FastifyInstance; stats: LlmServerStats } {
  const o = parseOrThrow(LlmServerOptionsSchema, options, 'INVALID_ARGUMENT', 'llm serve');
  const app = createApp({ bodyLimit: o.bodyLimit, log, metrics: createServerMetrics(), ...(connections ? { connections } : {}) });
  const queue = new OneAtATime(o.queueSize);
  const stats: LlmServerStats = {
    requests: 0,
    completions: 0,
    completionTokens: 0,
    skipped: 0,
    rejected: 0,
    timedOut: 0,
    engineSeconds: 0,
  };
  const created = Math.floor(Date.now() / 1000);

  // Error bodies in OpenAI's shape too: `type` and `param` beside cogr's `code`, `message`, `details`.
  app.addHook('onSend', async (_req, reply, payload) => {
    if (reply.statusCode < 400 || typeof payload !== 'string') return payload;
    try {
      const body = JSON.parse(payload) as { error?: Record<string, unknown> };
      if (!body.error || typeof body.error !== 'object' || 'type' in body.error) return payload;
      const details = body.error.details as { field?: unknown } | undefined;
      body.error = { ...body.error, type: openaiType(reply.statusCode), param: typeof details?.field === 'string' ? details.field : null };
      return JSON.stringify(body);
    } catch {
      return payload;
    }
  });

  app.get('/health', async () => ({
    status: 'ok',
    model: engine.id,
    context_size: engine.contextSize,
    threads: engine.threads,
    queue: { running: queue.running ? 1 : 0, waiting: queue.size, limit: o.queueSize },
    served: {
      requests: stats.requests,
      completions: stats.completions,
      completion_tokens: stats.completionTokens,
      engine_seconds: Math.round(stats.engineSeconds * 1000) / 1000,
      skipped: stats.skipped,
      rejected: stats.rejected,
      timed_out: stats.timedOut,
    },
  }));

  app.get('/v1/models', async () => ({ object: 'list', data: [{ id: engine.id, object: 'model', created, owned_by: 'cogr' }] }));

  app.post('/v1/chat/completions', async (req: FastifyRequest, reply: FastifyReply) => {
    stats.requests++;
    const body = parseOrThrow(ChatRequestSchema, req.body, 'INVALID_BODY');
    if (body.stream === true)
      throw cogrError('INVALID_BODY', 'stream: streaming is not supported by cogr llm serve (send stream: false)', { field: 'stream' });
    const n = body.n ?? 1;
    if (n > o.maxN) throw cogrError('INVALID_BODY', `n: at most ${o.maxN} choices per request, got ${n}`, { field: 'n' });
    const asked = body.max_completion_tokens ?? body.max_tokens;
    if (asked !== undefined && asked > o.maxTokens)
      throw cogrError('INVALID_BODY', `max_tokens: at most ${o.maxTokens}, got ${asked}`, { field: 'max_tokens' });
    const messages: EngineMessage[] = body.messages.map((m) => ({
      role: m.role === 'developer' ? 'system' : m.role,
      content: typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join(''),
    }));
    const promptTokens = engine.promptTokens(messages);
    // Without max_tokens, the rest of the context (at most the server's limit), as OpenAI does.
    const maxTokens = asked ?? Math.max(1, Math.min(o.maxTokens, engine.contextSize - promptTokens));
    if (promptTokens + maxTokens > engine.contextSize) {
      throw cogrError(
        'INVALID_BODY',
        `messages: this model's context is ${engine.contextSize} tokens, but ${promptTokens + maxTokens} were requested (${promptTokens} in the messages, ${maxTokens} for the completion): shorten the messages or lower max_tokens`,
        { field: 'messages', contextSize: engine.contextSize, promptTokens, maxTokens },
      );
    }
    const rf = body.response_format;
    const format: CompletionParams['format'] =
      rf?.type === 'json_schema'
        ? { kind: 'json_schema', schema: rf.json_schema.schema }
        : rf?.type === 'json_object'
          ? { kind: 'json' }
          : undefined;
    const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
    const seed0 = body.seed ?? randomInt(0, 2 ** 31 - 1);

    // Why this request ends early: its client left, or its deadline (from arrival) passed.
    const ctl = new AbortController();
    const onLeave = () => {
      if (!reply.raw.writableFinished) ctl.abort('client');
    };
    reply.raw.once('close', onLeave);
    const timer = setTimeout(() => ctl.abort('deadline'), o.requestTimeoutMs);
    try {
      const choices = await new Promise<{ text: string; finishReason: string; tokens: number }[]>((resolve, reject) => {
        const accepted = queue.offer({
          signal: ctl.signal,
          skipped: () => {
            stats.skipped += ctl.signal.reason === 'client' ? 1 : 0;
            reject(ctl.signal.reason);
          },
          run: async () => {
            try {
              const out: { text: string; finishReason: string; tokens: number }[] = [];
              for (let i = 0; i < n; i++) {
                if (ctl.signal.aborted) throw ctl.signal.reason;
                const t0 = performance.now();
                const c = await engine.complete(
                  messages,
                  {
                    temperature: body.temperature ?? 1,
                    topP: body.top_p ?? 1,
                    maxTokens,
                    seed: (seed0 + i) % 2 ** 31,
                    stop,
                    ...(format ? { format } : {}),
                  },
                  ctl.signal,
                );
                stats.engineSeconds += (performance.now() - t0) / 1000;
                stats.completions++;
                stats.completionTokens += c.completionTokens;
                out.push({ text: c.text, finishReason: c.finishReason, tokens: c.completionTokens });
              }
              resolve(out);
            } catch (e) {
              reject(ctl.signal.aborted ? ctl.signal.reason : e);
            }
          },
        });
        if (!accepted) reject('full');
      });
      const completionTokens = choices.reduce((a, c) => a + c.tokens, 0);
      return {
        id: `chatcmpl-${randomBytes(12).toString('hex')}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: engine.id,
        choices: choices.map((c, index) => ({
          index,
          message: { role: 'assistant', content: c.text },
          logprobs: null,
          finish_reason: c.finishReason,
        })),
        usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
      };
    } catch (e) {
      if (e === 'full') {
        stats.rejected++;
        reply.header('retry-after', '1');
        throw cogrError(
          'OVERLOADED',
          `the queue is full (${o.queueSize} request(s) waiting beside the one being generated): retry later or send fewer at once`,
          { queueSize: o.queueSize },
        );
      }
      if (e === 'deadline') {
        stats.timedOut++;
        throw cogrError(
          'DEADLINE_EXCEEDED',
          `not answered within ${o.requestTimeoutMs} ms of arrival (cogr llm serve --request-timeout), queue wait included`,
          { timeoutMs: o.requestTimeoutMs },
        );
      }
      if (e === 'client') {
        log.debug('client left; request dropped');
        throw cogrError('ABORTED', 'the client closed the connection');
      }
      if (e instanceof InvalidFormat) throw cogrError('INVALID_BODY', e.message, { field: 'response_format' });
      if (e instanceof CogrError) throw e;
      log.warn('generation failed', { message: (e as Error).message });
      throw cogrError('INTERNAL', `generation failed: ${(e as Error).message}`);
    } finally {
      clearTimeout(timer);
      reply.raw.off('close', onLeave);
    }
  });
  return { app, stats };
}
