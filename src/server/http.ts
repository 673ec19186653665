/**
 * Pieces both HTTP servers share: one JSON error shape (`{error: CogrError.toJSON()}`
 * with the catalogue's status) for every answer — fastify's own errors (body too large →
 * 413, unsupported type → 415), the router's (404, a path parameter too long → 414, a bad
 * URL → 400), the HTTP parser's (headers too large → 431, malformed request → 400, a
 * request not received in time → 408) and Node's own checks (no Host header → 400, an
 * Expect other than 100-continue → 417, CONNECT → 404) —, connections bounded in time
 * (request, headers, keep-alive) and in number (the longest-waiting connection without a
 * request being handled makes room for a new one), a JSON body parser that reads strict
 * UTF-8, names the parse error and refuses duplicate and prototype-polluting keys,
 * request metrics, bearer-token checks and zod parsing with messages that name the field
 * (integer query parameters in decimal digits only).
 */
import { timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { CogrError, cogrError, formatPath, schemaError, type ErrorCode } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { firstInvalidUtf8 } from '../datasets/common.ts';
import type { ServerMetrics } from './metrics.ts';

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export function sendError(reply: FastifyReply, e: CogrError, status = e.status): FastifyReply {
  const body: ErrorBody = { error: e.toJSON() };
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/** `a.b[2].c` from a zod issue path. */
export { formatPath };

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
  throw schemaError(code, r.error, { prefix });
}

/** How long a connection may take and how many may be open (index/core/defaults.ts `http`). */
export const ConnectionLimitsSchema = z.strictObject({
  /** The whole request (line, headers, body) must arrive within this. */
  requestTimeoutMs: z.number().int().min(1).max(3_600_000).default(DEFAULTS.http.requestTimeoutMs),
  /** The request line and headers must arrive within this (at most requestTimeoutMs). */
  headersTimeoutMs: z.number().int().min(1).max(3_600_000).default(DEFAULTS.http.headersTimeoutMs),
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: z.number().int().min(1).max(3_600_000).default(DEFAULTS.http.keepAliveTimeoutMs),
  /** How often the request and headers deadlines are checked. */
  timeoutCheckMs: z.number().int().min(1).max(60_000).default(DEFAULTS.http.timeoutCheckMs),
  /** Open connections at most (default: index/core/defaults.ts `http.maxConnections`, or the open-file limit less a reserve when that is lower). */
  maxConnections: z.number().int().min(1).max(1_000_000).optional(),
});

/** This process's soft limit of open files (Linux: /proc/self/limits), or undefined when it cannot be read. */
function openFileLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** The default connection cap: the configured one, lowered to leave `fdReserve` descriptors free under the open-file limit. */
export function defaultMaxConnections(limit = openFileLimit()): number {
  const d = DEFAULTS.http;
  return limit === undefined ? d.maxConnections : Math.max(1, Math.min(d.maxConnections, limit - d.fdReserve));
}
export type ConnectionLimits = z.input<typeof ConnectionLimitsSchema>;

export interface AppOptions {
  bodyLimit: number;
  log: Logger;
  metrics: ServerMetrics;
  connections?: ConnectionLimits;
}

/** Longest path parameter (e.g. an item id) the router accepts; longer is 414. The routes' own schemas limit them further (400 naming the field). */
const MAX_PARAM_LENGTH = 2048;

/**
 * The answer to a request the HTTP parser refused before any route saw it (request line
 * and headers over Node's limit, a malformed request, a client too slow), in the API's
 * error shape; the connection is closed after it.
 */
function rawErrorResponse(e: CogrError, status = e.status): string {
  const body = JSON.stringify({ error: e.toJSON() } satisfies ErrorBody);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/** Whether a response has already started on this socket (then no error answer may be written into it). */
function responseStarted(socket: Duplex): boolean {
  const res = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  return res?.headersSent === true;
}

function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const e =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? cogrError('HEADERS_TOO_LARGE', `request line and headers: larger than the limit of ${maxHeaderSize} bytes`, {
          limit: maxHeaderSize,
        })
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? cogrError(
            'REQUEST_TIMEOUT',
            "request: not received in time (the request line, headers and body must arrive within the server's request time-out)",
          )
        : cogrError('INVALID_ARGUMENT', `request: not a valid HTTP request (${err.code ?? 'parse error'})`);
  if (socket.writable && !responseStarted(socket)) socket.write(rawErrorResponse(e));
  socket.destroy(err);
}

/**
 * At most `max` open connections. A connection beyond it makes room by closing the one
 * that has waited longest without a request being handled — a request whose body is still
 * arriving, headers not yet complete, or an idle keep-alive connection —, so connections
 * that trickle never lock new clients out; when every open connection has a request being
 * handled, the new one is closed.
 */
function capConnections(server: Server, max: number): void {
  interface Conn {
    /** Order of the last activity that started the wait (connection, or end of the last response). */
    since: number;
    req: IncomingMessage | null;
  }
  const open = new Map<Socket, Conn>();
  let clock = 0;
  server.on('connection', (socket: Socket) => {
    if (open.size >= max) {
      let victim: Socket | undefined;
      let oldest = Infinity;
      for (const [s, c] of open) {
        const waiting = c.req === null || !c.req.complete;
        if (waiting && c.since < oldest) {
          oldest = c.since;
          victim = s;
        }
      }
      if (victim === undefined) {
        socket.destroy();
        return;
      }
      open.delete(victim);
      victim.destroy();
    }
    const conn: Conn = { since: ++clock, req: null };
    open.set(socket, conn);
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const conn = open.get(req.socket as Socket);
    if (!conn) return;
    conn.req = req;
    res.once('close', () => {
      if (conn.req !== req) return;
      conn.req = null;
      conn.since = ++clock;
    });
  });
}

/** Node's own answers (no Host, an unknown Expect, CONNECT) in the API's error shape. */
function shapeNodeAnswers(server: Server): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const e = cogrError(
      'INVALID_ARGUMENT',
      `expect: ${JSON.stringify(String(req.headers.expect ?? '').slice(0, 100))} is not supported (only 100-continue)`,
    );
    const body = JSON.stringify({ error: e.toJSON() } satisfies ErrorBody);
    res.writeHead(417, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      connection: 'close',
    });
    res.end(body);
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => {});
    const e = cogrError('NOT_FOUND', `no route CONNECT ${String(req.url ?? '').slice(0, 200)} (this is not a proxy)`);
    socket.once('finish', () => socket.destroy());
    socket.end(rawErrorResponse(e));
  });
}

/** The charset parameter of a content type, lower case, if any. */
function charsetOf(contentType: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '');
  return m ? m[1].toLowerCase() : undefined;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A request body as text: strict UTF-8 (JSON's encoding, RFC 8259), the first byte that is
 * not is INVALID_BODY naming it and its offset, never replaced by U+FFFD; a charset other
 * than UTF-8 is refused (415).
 */
export function decodeJsonBody(body: Uint8Array, contentType?: string): string {
  const charset = charsetOf(contentType);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw cogrError('INVALID_BODY', `content-type: charset ${JSON.stringify(charset)} is not supported (JSON bodies are UTF-8)`, {
      field: 'content-type',
      status: 415,
    });
  }
  try {
    return STRICT_UTF8.decode(body);
  } catch {
    const at = Math.max(0, firstInvalidUtf8(body));
    const byte = body[at].toString(16).toUpperCase().padStart(2, '0');
    throw cogrError('INVALID_BODY', `body: not valid UTF-8 (byte 0x${byte} at offset ${at}); JSON bodies must be UTF-8`, {
      field: 'body',
      offset: at,
    });
  }
}

/**
 * The path of the first key repeated in one object of a JSON text (already known to be
 * valid JSON), e.g. `program.keyword`, or null. JSON.parse keeps the last value silently.
 */
export function duplicateKeyPath(text: string): string | null {
  interface Frame {
    object: boolean;
    /** The keys seen so far (a Set once there are many). */
    keys: string[] | Set<string>;
    /** Inside an object: the current key; the next string is a key. */
    key: string | null;
    expectKey: boolean;
    index: number;
  }
  const stack: Frame[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      let escaped = false;
      for (;;) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) {
          escaped = true;
          j += 2;
        } else if (d === 0x22) break;
        else j++;
      }
      const top = stack.length > 0 ? stack[stack.length - 1] : undefined;
      if (top !== undefined && top.object && top.expectKey) {
        const key = escaped ? (JSON.parse(text.slice(i, j + 1)) as string) : text.slice(i + 1, j);
        const seen = Array.isArray(top.keys) ? top.keys.includes(key) : top.keys.has(key);
        if (seen) {
          const path: (string | number)[] = stack.slice(0, -1).map((f) => (f.object ? f.key! : f.index));
          return formatPath([...path, key]);
        }
        if (Array.isArray(top.keys)) {
          top.keys.push(key);
          if (top.keys.length > 16) top.keys = new Set(top.keys);
        } else top.keys.add(key);
        top.key = key;
        top.expectKey = false;
      }
      i = j + 1;
    } else if (c === 0x7b || c === 0x5b) {
      stack.push({ object: c === 0x7b, keys: [], key: null, expectKey: c === 0x7b, index: 0 });
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      i++;
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top.object) top.expectKey = true;
      else top.index++;
      i++;
    } else i++;
  }
  return null;
}

/**
 * A request body as JSON: `INVALID_BODY` naming the parse error, a key repeated in one
 * object (`program.keyword: duplicate key`), a `__proto__` key, or a `constructor` key
 * holding a `prototype` (prototype pollution), wherever it is.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw cogrError('INVALID_BODY', 'body: empty (send a JSON object)');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw cogrError('INVALID_BODY', `body: not valid JSON (${(e as Error).message})`);
  }
  const duplicate = duplicateKeyPath(text);
  if (duplicate !== null) throw cogrError('INVALID_BODY', `${duplicate}: duplicate key`, { field: duplicate });
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
      const forbidden =
        key === '__proto__' || (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype'));
      if (forbidden)
        throw cogrError('INVALID_BODY', `${path}.${key}: this key is not allowed (prototype pollution)`, { field: `${path}.${key}` });
      stack.push({ v: child, path: `${path}.${key}` });
    }
  }
  return value;
}

/** A fastify instance with the shared error handling and request metrics installed. */
export function createApp(opts: AppOptions): FastifyInstance {
  const c = parseOrThrow(ConnectionLimitsSchema, opts.connections ?? {}, 'INVALID_ARGUMENT', 'connections');
  const app = Fastify({
    logger: false,
    bodyLimit: opts.bodyLimit,
    requestTimeout: c.requestTimeoutMs,
    keepAliveTimeout: c.keepAliveTimeoutMs,
    http: {
      requestTimeout: c.requestTimeoutMs,
      headersTimeout: Math.min(c.headersTimeoutMs, c.requestTimeoutMs),
      connectionsCheckingInterval: c.timeoutCheckMs,
      // Checked by the onRequest hook below, to answer in the API's error shape.
      requireHostHeader: false,
    },
    return503OnClosing: false,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    clientErrorHandler,
    // Errors of the router itself (a path that is not valid URL encoding, a parameter over the limit).
    frameworkErrors: (err, req, reply) => {
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
        return sendError(
          reply,
          cogrError('URI_TOO_LONG', `path: a parameter is longer than ${MAX_PARAM_LENGTH} characters`, { limit: MAX_PARAM_LENGTH }),
        );
      }
      if (err.code === 'FST_ERR_BAD_URL')
        return sendError(
          reply,
          cogrError('INVALID_ARGUMENT', `path: not a valid URL (${JSON.stringify(req.url.split('?')[0].slice(0, 200))})`),
        );
      opts.log.warn('internal error', { message: err.message });
      return sendError(reply, cogrError('INTERNAL', 'internal error'));
    },
  });
  capConnections(app.server, c.maxConnections ?? defaultMaxConnections());
  shapeNodeAnswers(app.server);
  const started = new WeakMap<FastifyRequest, bigint>();
  app.addHook('onRequest', async (req, reply) => {
    started.set(req, process.hrtime.bigint());
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined) {
      return sendError(reply, cogrError('INVALID_ARGUMENT', 'host: HTTP/1.1 requires a Host header'));
    }
  });
  app.addHook('onResponse', async (req, reply) => {
    const t0 = started.get(req);
    const route = req.routeOptions.url ?? 'unmatched';
    opts.metrics.requests.inc({ route, method: req.method, status: String(reply.statusCode) });
    if (t0 !== undefined) opts.metrics.latency.observe(Number(process.hrtime.bigint() - t0) / 1e9, { route });
  });
  // JSON bodies: strict UTF-8; parse errors say what is wrong; duplicate keys and keys that could pollute prototypes are refused.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    try {
      done(null, parseJsonBody(decodeJsonBody(body as Buffer, req.headers['content-type'])));
    } catch (e) {
      done(e as Error, undefined);
    }
  });
  app.setErrorHandler((err: unknown, _req, reply) => {
    if (err instanceof CogrError) return sendError(reply, err, err.details?.status === 415 ? 415 : err.status);
    const e = err as { code?: string; statusCode?: number; message?: string };
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || e.statusCode === 413) {
      return sendError(
        reply,
        cogrError('PAYLOAD_TOO_LARGE', `body: larger than the limit of ${opts.bodyLimit} bytes`, { limit: opts.bodyLimit }),
      );
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
  app.setNotFoundHandler((req, reply) => sendError(reply, cogrError('NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`)));
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
      await sendError(
        reply,
        cogrError('UNAUTHORIZED', m ? 'authorization: wrong bearer token' : 'authorization: a bearer token is required'),
      );
    }
  };
}
