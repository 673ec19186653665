/**
 * Pieces both HTTP servers share: one JSON error shape (`{error: CogrError.toJSON()}`
 * with the catalogue's status) for every answer — fastify's own errors (body too large →
 * 413, unsupported type → 415), the router's (404, a path parameter too long → 414, a bad
 * URL → 400) and the HTTP parser's (headers too large → 431, malformed request → 400) —,
 * a JSON body parser that names the parse error and refuses prototype-polluting keys,
 * request metrics, bearer-token checks and zod parsing with messages that name the field
 * (integer query parameters in decimal digits only).
 */
import { timingSafeEqual } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
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

const DECIMAL_INTEGER = /^-?[0-9]+$/;

/**
 * Integer parameters of a query string take decimal digits only: zod's coercion alone
 * (`Number(s)`) would read `0x10` as 16, `1e2` as 100 and `" 5"` as 5.
 */
function checkDecimalIntegers(schema: z.ZodType, data: unknown, code: 'INVALID_ARGUMENT' | 'INVALID_BODY', prefix: string): void {
  if (schema.def.type !== 'object' || typeof data !== 'object' || data === null) return;
  const shape = (schema as unknown as z.ZodObject).shape;
  for (const [key, field] of Object.entries(shape)) {
    const value = (data as Record<string, unknown>)[key];
    if (typeof value !== 'string') continue;
    let t = field as z.ZodType;
    while (t.def.type === 'default' || t.def.type === 'optional') t = (t.def as unknown as { innerType: z.ZodType }).innerType;
    if (!(t.def.type === 'number' && (t.def as { coerce?: boolean }).coerce === true && (t as z.ZodNumber).isInt)) continue;
    if (!DECIMAL_INTEGER.test(value)) {
      const name = formatPath([key], prefix);
      throw cogrError(code, `${name}: expected an integer (decimal digits), got ${JSON.stringify(value)}`, { field: name, issues: 1 });
    }
  }
}

/**
 * Parse with zod; the first issue becomes a 400 naming its field. Integer fields that
 * coerce a string (query parameters) accept decimal digits only.
 */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  data: unknown,
  code: 'INVALID_ARGUMENT' | 'INVALID_BODY',
  prefix = '',
): z.output<T> {
  checkDecimalIntegers(schema, data, code, prefix);
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

/** Longest path parameter (e.g. an item id) the router accepts; longer is 414. The routes' own schemas limit them further (400 naming the field). */
const MAX_PARAM_LENGTH = 2048;

/**
 * The answer to a request the HTTP parser refused before any route saw it (request line
 * and headers over Node's limit, a malformed request, a client too slow), in the API's
 * error shape; the connection is closed after it.
 */
function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const e =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? cogrError('HEADERS_TOO_LARGE', `request line and headers: larger than the limit of ${maxHeaderSize} bytes`, { limit: maxHeaderSize })
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? cogrError('REQUEST_TIMEOUT', 'request: not received in time')
        : cogrError('INVALID_ARGUMENT', `request: not a valid HTTP request (${err.code ?? 'parse error'})`);
  if (socket.writable) {
    const body = JSON.stringify({ error: e.toJSON() } satisfies ErrorBody);
    socket.write(
      `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/**
 * A request body as JSON: `INVALID_BODY` naming the parse error, or naming a `__proto__`
 * key, or a `constructor` key holding a `prototype` (prototype pollution), wherever it is.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw cogrError('INVALID_BODY', 'body: empty (send a JSON object)');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw cogrError('INVALID_BODY', `body: not valid JSON (${(e as Error).message})`);
  }
  const stack: { v: unknown; path: string }[] = [{ v: value, path: 'body' }];
  while (stack.length > 0) {
    const { v, path } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push({ v: x, path: `${path}[${i}]` }));
      continue;
    }
    for (const key of Object.keys(v)) {
      const child = (v as Record<string, unknown>)[key];
      const forbidden = key === '__proto__' || (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype'));
      if (forbidden) throw cogrError('INVALID_BODY', `${path}.${key}: this key is not allowed (prototype pollution)`, { field: `${path}.${key}` });
      stack.push({ v: child, path: `${path}.${key}` });
    }
  }
  return value;
}

/** A fastify instance with the shared error handling and request metrics installed. */
export function createApp(opts: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: opts.bodyLimit,
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    clientErrorHandler,
    // Errors of the router itself (a path that is not valid URL encoding, a parameter over the limit).
    frameworkErrors: (err, req, reply) => {
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
        return sendError(reply, cogrError('URI_TOO_LONG', `path: a parameter is longer than ${MAX_PARAM_LENGTH} characters`, { limit: MAX_PARAM_LENGTH }));
      }
      if (err.code === 'FST_ERR_BAD_URL') return sendError(reply, cogrError('INVALID_ARGUMENT', `path: not a valid URL (${JSON.stringify(req.url.split('?')[0].slice(0, 200))})`));
      opts.log.warn('internal error', { message: err.message });
      return sendError(reply, cogrError('INTERNAL', 'internal error'));
    },
  });
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
  // JSON bodies: parse errors say what is wrong, and keys that could pollute prototypes are refused.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (e) {
      done(e as Error, undefined);
    }
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
