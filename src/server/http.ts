/**
 * Pieces both HTTP servers share: one JSON error shape (`{error: CogrError.toJSON()}`
 * with the catalogue's status), fastify's own errors mapped onto it (body too large →
 * 413, malformed JSON → 400), request metrics, bearer-token checks and zod parsing with
 * messages that name the field.
 */
import { timingSafeEqual } from 'node:crypto';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { CogrError, cogrError, type ErrorCode } from '../../index/errors.ts';
import type { Logger } from '../../index/log.ts';
import type { ServerMetrics } from './metrics.ts';

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export function sendError(reply: FastifyReply, e: CogrError, status = e.status): FastifyReply {
  const body: ErrorBody = { error: e.toJSON() };
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** `a.b[2].c` from a zod issue path. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out.length === 0 ? String(p) : `.${String(p)}`;
  }
  return out.length === 0 ? '(root)' : out;
}

/** Parse with zod; the first issue becomes a 400 naming its field. */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  data: unknown,
  code: 'INVALID_ARGUMENT' | 'INVALID_BODY',
  prefix = '',
): z.output<T> {
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = formatPath(issue.path, prefix);
  const msg = issue.code === 'unrecognized_keys' ? `unknown field(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}` : issue.message;
  throw cogrError(code, `${field}: ${msg}`, { field, issues: r.error.issues.length });
}

export interface AppOptions {
  bodyLimit: number;
  log: Logger;
  metrics: ServerMetrics;
}

/** A fastify instance with the shared error handling and request metrics installed. */
export function createApp(opts: AppOptions): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: opts.bodyLimit, return503OnClosing: false });
  const started = new WeakMap<FastifyRequest, bigint>();
  app.addHook('onRequest', async (req) => {
    started.set(req, process.hrtime.bigint());
  });
  app.addHook('onResponse', async (req, reply) => {
    const t0 = started.get(req);
    const route = req.routeOptions.url ?? 'unmatched';
    opts.metrics.requests.inc({ route, method: req.method, status: String(reply.statusCode) });
    if (t0 !== undefined) opts.metrics.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9, { route });
  });
  app.setErrorHandler((err: unknown, _req, reply) => {
    if (err instanceof CogrError) return sendError(reply, err);
    const e = err as { code?: string; statusCode?: number; message?: string };
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e.statusCode === 413) {
      return sendError(reply, cogrError('PAYLOAD_TOO_LARGE', `body: larger than the limit of ${opts.bodyLimit} bytes`, { limit: opts.bodyLimit }));
    }
    if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || e.statusCode === 415) {
      return sendError(reply, cogrError('INVALID_BODY', `body: unsupported content type (send application/json)`), 415);
    }
    if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
      return sendError(reply, cogrError('INVALID_BODY', `body: ${e.message ?? 'invalid request'}`), e.statusCode);
    }
    opts.log.warn('internal error', { message: e.message ?? String(err) });
    return sendError(reply, cogrError('INTERNAL', 'internal error'));
  });
  app.setNotFoundHandler((req, reply) =>
    sendError(reply, cogrError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`)),
  );
  return app;
}

function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A preHandler that requires `Authorization: Bearer <token>` when a token is set. */
export function bearerGuard(token: string | undefined) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!token) return;
    const h = req.headers.authorization;
    const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h.trim()) : null;
    if (!m || !sameToken(m[1], token)) {
      reply.header('www-authenticate', 'Bearer');
      await sendError(reply, cogrError('UNAUTHORIZED', m ? 'authorization: wrong bearer token' : 'authorization: a bearer token is required'));
    }
  };
}
