/**
 * The built-in encoder (static.ts) behind OpenAI's embeddings API, as the Python server
 * answers it (POST /v1/embeddings, GET /v1/models, GET /health), so every path that takes an
 * embeddings URL takes this one: `cogr embeddings serve --backend static`, and `--embeddings
 * static`, which starts it as a child process for one command (embeddingsUrl in venv.ts; a
 * child, not this process, because the planner waits for vectors synchronously).
 *
 * Bounded as the Python server is: at most `maxInputs` inputs a request and `maxChars`
 * characters an input (a 400 naming the limit), a body over `bodyLimit` is a 413, and the
 * connection limits of src/server/http.ts (a deadline on every request's body).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { createApp, parseOrThrow } from '../server/http.ts';
import { createServerMetrics } from '../server/metrics.ts';
import { StaticEncoder } from './static.ts';

export interface StaticServerOptions {
  maxInputs: number;
  maxChars: number;
  bodyLimit: number;
  requestTimeoutMs: number;
}

const RequestSchema = z.object({
  input: z.union([z.string(), z.array(z.string())]),
  model: z.string().optional(),
  encoding_format: z.enum(['float']).optional(),
});

export function createStaticEmbeddingsServer(encoder: StaticEncoder, log: Logger, o: StaticServerOptions): FastifyInstance {
  const app = createApp({
    bodyLimit: o.bodyLimit,
    log,
    metrics: createServerMetrics(),
    connections: { requestTimeoutMs: o.requestTimeoutMs },
  });
  const model = { id: encoder.model, object: 'model', owned_by: 'cogr', dimension: encoder.dims };
  app.get('/health', async () => ({ status: 'ok', model: encoder.model, dimension: encoder.dims }));
  app.get('/v1/models', async () => ({ object: 'list', data: [model] }));
  app.post('/v1/embeddings', async (req) => {
    const body = parseOrThrow(RequestSchema, req.body, 'INVALID_BODY');
    if (body.model !== undefined && body.model !== encoder.model)
      throw cogrError('INVALID_BODY', `model: this server serves ${encoder.model}, not ${JSON.stringify(body.model)}`, { field: 'model' });
    const inputs = typeof body.input === 'string' ? [body.input] : body.input;
    if (inputs.length > o.maxInputs)
      throw cogrError('INVALID_BODY', `input: at most ${o.maxInputs} inputs a request, got ${inputs.length}`, { field: 'input' });
    inputs.forEach((t, i) => {
      if (t.length > o.maxChars)
        throw cogrError('INVALID_BODY', `input[${i}]: at most ${o.maxChars} characters, got ${t.length}`, { field: `input[${i}]` });
    });
    let tokens = 0;
    const data = inputs.map((t, index) => {
      tokens += encoder.tokenize(t).length;
      return { object: 'embedding', index, embedding: Array.from(encoder.encode(t)) };
    });
    return { object: 'list', model: encoder.model, data, usage: { prompt_tokens: tokens, total_tokens: tokens } };
  });
  return app;
}
