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
import type { Duplex, Readable } from 'node:stream';
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
  /** Nesting depth and array length of JSON bodies. */
  json?: JsonLimits;
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

/** What a JSON body may hold: nesting depth (checked on the raw bytes as they arrive, before any parsing) and entries per array. */
export interface JsonLimits {
  /** Arrays and objects nested deeper than this are refused (default DEFAULTS.http.maxJsonDepth). */
  maxDepth?: number;
  /** An array with more entries, or an object with more keys, than this is refused (default: none beyond the body limit). */
  maxEntries?: number;
  /** A string (decoded) longer than this is refused, as soon as it is (default: none beyond the body limit). */
  maxStringLength?: number;
}

/** Characters parsed between two turns of the event loop, at most, and the time: a body never holds the loop for more than a few milliseconds. */
const PARSE_SLICE = 64 * 1024;
const PARSE_SLICE_MS = 4;
/** Characters of a string searched at once for its end or next escape. */
const STRING_WINDOW = 4096;

function tooDeep(maxDepth: number): CogrError {
  return cogrError('INVALID_BODY', `body: arrays and objects nested deeper than ${maxDepth} levels`, { field: 'body', limit: maxDepth });
}

/**
 * The nesting depth of JSON text, fed its raw bytes chunk by chunk as they arrive: `[` and
 * `{` outside strings open a level. UTF-8 continuation bytes are never ASCII, so bytes are
 * read as they come, without decoding. Too deep is an error before the body is complete.
 */
class DepthScan {
  private depth = 0;
  private inString = false;
  private escaped = false;
  constructor(private readonly maxDepth: number) {}
  feed(chunk: Uint8Array): void {
    let { depth, inString, escaped } = this;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (b === 0x5c) escaped = true;
        else if (b === 0x22) inString = false;
      } else if (b === 0x22) inString = true;
      else if (b === 0x7b || b === 0x5b) {
        if (++depth > this.maxDepth) throw tooDeep(this.maxDepth);
      } else if (b === 0x7d || b === 0x5d) depth--;
    }
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
  }
}

interface Frame {
  /** The container being filled. */
  value: Record<string, unknown> | unknown[];
  array: boolean;
  /** Its key or index in its parent (null at the root). */
  part: string | number | null;
  /** Inside an object: the key whose value comes next, and the keys read so far. */
  key: string;
  keys: number;
}

const enum Want {
  Value,
  ValueOrEnd,
  Key,
  KeyOrEnd,
  After,
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING_STOP = /["\\\u0000-\u001f]/g;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/**
 * A JSON text (RFC 8259) parsed in slices: `run(budget)` parses about `budget` characters and
 * says whether it is done, so a caller can give the event loop a turn in between. In the
 * same pass it refuses a key repeated in one object (JSON.parse keeps the last value
 * silently), a `__proto__` key and a `constructor` key holding a `prototype` (prototype
 * pollution), nesting deeper than `maxDepth`, arrays or objects of more than `maxEntries` entries and strings longer than `maxStringLength`. Values
 * are JSON.parse's: numbers through `Number` of their text, strings with every escape
 * decoded (lone surrogates kept).
 */
class SlicedJsonParser {
  private i = 0;
  private want = Want.Value;
  private readonly stack: Frame[] = [];
  /** Inside a string: what is decoded so far (null outside one), and whether it is a key. */
  private strOut: string | null = null;
  private strKey = false;
  result: unknown = undefined;

  constructor(
    private readonly s: string,
    private readonly maxDepth: number,
    private readonly maxEntries: number,
    private readonly maxString: number,
  ) {}

  private fail(what: string): never {
    const s = this.s;
    if (this.i >= s.length) throw cogrError('INVALID_BODY', `body: not valid JSON (${what}: the body ends early)`, { field: 'body' });
    let line = 1;
    let col = 1;
    for (let k = 0; k < this.i; k++) {
      if (s.charCodeAt(k) === 0x0a) {
        line++;
        col = 1;
      } else col++;
    }
    const c = String.fromCodePoint(s.codePointAt(this.i)!);
    throw cogrError('INVALID_BODY', `body: not valid JSON (${what}: found ${JSON.stringify(c)} at line ${line} column ${col})`, {
      field: 'body',
      offset: this.i,
    });
  }

  private parts(): (string | number)[] {
    return this.stack.slice(1).map((f) => f.part!);
  }

  private skipSpace(): void {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  /**
   * Read on in the string being read (`strOut` holds what is decoded so far; its opening
   * quote is behind) until it ends or `stop` is passed: the string when it ends, undefined
   * when the slice ran out first (called again, it goes on). A regular expression finds the
   * next quote, backslash or control character within a window of the text at a time, so a
   * string of megabytes is read across slices too.
   */
  private readString(stop: number): string | undefined {
    const s = this.s;
    const n = s.length;
    let out = this.strOut!;
    let start = this.i;
    for (;;) {
      if (out.length + (this.i - start) > this.maxString) this.tooLong();
      if (this.i >= stop) {
        this.strOut = out + s.slice(start, this.i);
        return undefined;
      }
      const end = Math.min(n, this.i + STRING_WINDOW);
      STRING_STOP.lastIndex = 0;
      const m = STRING_STOP.exec(s.slice(this.i, end));
      if (m === null) {
        this.i = end;
        if (end === n) this.fail('a string is not closed');
        continue;
      }
      this.i += m.index;
      const c = s.charCodeAt(this.i);
      if (c === 0x22) {
        out += s.slice(start, this.i++);
        if (out.length > this.maxString) this.tooLong();
        this.strOut = null;
        return out;
      }
      if (c !== 0x5c) this.fail('a control character inside a string must be escaped');
      out += s.slice(start, this.i);
      const e = s[this.i + 1];
      if (e === 'u') {
        const hex = s.slice(this.i + 2, this.i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
          this.i++;
          this.fail('expected four hex digits after \\u');
        }
        out += String.fromCharCode(parseInt(hex, 16));
        this.i += 6;
      } else if (e !== undefined && Object.hasOwn(ESCAPES, e)) {
        out += ESCAPES[e];
        this.i += 2;
      } else {
        this.i++;
        this.fail('not a JSON escape');
      }
      start = this.i;
    }
  }

  /** A key read: its colon, then the checks (prototype pollution, a key repeated). */
  private gotKey(key: string): void {
    this.skipSpace();
    if (this.s.charCodeAt(this.i) !== 0x3a) this.fail('expected ":" after a key');
    this.i++;
    const top = this.stack[this.stack.length - 1];
    if (key === '__proto__') {
      const field = formatPath([...this.parts(), key], 'body');
      throw cogrError('INVALID_BODY', `${field}: this key is not allowed (prototype pollution)`, { field });
    }
    if (Object.hasOwn(top.value, key)) {
      const field = formatPath([...this.parts(), key]);
      throw cogrError('INVALID_BODY', `${field}: duplicate key`, { field });
    }
    if (++top.keys > this.maxEntries) this.tooMany();
    top.key = key;
    this.want = Want.Value;
  }

  private startString(key: boolean): void {
    this.strKey = key;
    this.strOut = '';
    this.i++;
  }

  private tooLong(): never {
    const top = this.stack[this.stack.length - 1];
    const at = top === undefined ? [] : this.strKey ? [] : [top.array ? (top.value as unknown[]).length : top.key];
    const field = formatPath([...this.parts(), ...at]);
    throw cogrError('INVALID_BODY', `${field}: ${this.strKey ? 'a key' : 'a string'} longer than ${this.maxString} characters`, {
      field,
      limit: this.maxString,
    });
  }

  private tooMany(): never {
    const field = formatPath(this.parts());
    throw cogrError('INVALID_BODY', `${field}: more than ${this.maxEntries} entries`, { field, limit: this.maxEntries });
  }

  /** A finished value: the root, an array entry or an object member. */
  private emit(v: unknown): void {
    const top = this.stack[this.stack.length - 1];
    if (top === undefined) this.result = v;
    else if (top.array) {
      const a = top.value as unknown[];
      if (a.length >= this.maxEntries) this.tooMany();
      a.push(v);
    } else (top.value as Record<string, unknown>)[top.key] = v;
    this.want = Want.After;
  }

  private open(array: boolean): void {
    if (this.stack.length >= this.maxDepth) throw tooDeep(this.maxDepth);
    const top = this.stack[this.stack.length - 1];
    const part = top === undefined ? null : top.array ? (top.value as unknown[]).length : top.key;
    const value = array ? [] : {};
    this.emit(value);
    this.stack.push({ value, array, part, key: '', keys: 0 });
    this.i++;
    this.want = array ? Want.ValueOrEnd : Want.KeyOrEnd;
  }

  private close(): void {
    const f = this.stack[this.stack.length - 1];
    if (f.part === 'constructor' && !f.array && Object.hasOwn(f.value, 'prototype')) {
      const field = formatPath(this.parts(), 'body');
      throw cogrError('INVALID_BODY', `${field}: this key is not allowed (prototype pollution)`, { field });
    }
    this.stack.pop();
    this.i++;
    this.want = Want.After;
  }

  /** Parse on for about `budget` characters; true when the text is parsed whole. */
  run(budget: number): boolean {
    const s = this.s;
    const n = s.length;
    const stop = this.i + budget;
    const t0 = performance.now();
    for (let k = 1; ; k++) {
      // A slice ends after `budget` characters, or after PARSE_SLICE_MS (keys into a large object cost more than characters say).
      if ((k & 255) === 0 && performance.now() - t0 > PARSE_SLICE_MS) return false;
      if (this.strOut !== null) {
        const v = this.readString(stop);
        if (v === undefined) return false;
        if (this.strKey) this.gotKey(v);
        else this.emit(v);
        continue;
      }
      this.skipSpace();
      if (this.i >= stop && this.i < n) return false;
      const c = s.charCodeAt(this.i);
      switch (this.want) {
        case Want.ValueOrEnd:
          if (c === 0x5d) this.close();
          else this.want = Want.Value;
          continue;
        case Want.Value:
          if (c === 0x7b) this.open(false);
          else if (c === 0x5b) this.open(true);
          else if (c === 0x22) this.startString(false);
          else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
            NUMBER.lastIndex = this.i;
            const m = NUMBER.exec(s);
            if (m === null) this.fail('not a number');
            this.i += m[0].length;
            this.emit(Number(m[0]));
          } else if (s.startsWith('true', this.i)) {
            this.i += 4;
            this.emit(true);
          } else if (s.startsWith('false', this.i)) {
            this.i += 5;
            this.emit(false);
          } else if (s.startsWith('null', this.i)) {
            this.i += 4;
            this.emit(null);
          } else this.fail('expected a value');
          continue;
        case Want.KeyOrEnd:
          if (c === 0x7d) this.close();
          else this.want = Want.Key;
          continue;
        case Want.Key:
          if (c !== 0x22) this.fail('expected a key (a string)');
          this.startString(true);
          continue;
        case Want.After: {
          const top = this.stack[this.stack.length - 1];
          if (top === undefined) {
            if (this.i < n) this.fail('expected the end of the body after the value');
            return true;
          }
          if (c === 0x2c) {
            this.i++;
            this.want = top.array ? Want.Value : Want.Key;
          } else if (c === (top.array ? 0x5d : 0x7d)) this.close();
          else this.fail(top.array ? 'expected "," or "]"' : 'expected "," or "}"');
          continue;
        }
      }
    }
  }
}

/**
 * A request body as JSON, parsed in slices with a turn of the event loop between them (an
 * 8 MB body never holds the loop for more than a few milliseconds): `INVALID_BODY` naming
 * the parse error with its line and column, a key repeated in one object
 * (`program.keyword: duplicate key`), a `__proto__` key, a `constructor` key holding a
 * `prototype` (prototype pollution), nesting deeper than the limit, or an array longer than it.
 */
export async function parseJsonBody(text: string, limits: JsonLimits = {}): Promise<unknown> {
  if (text.length === 0) throw cogrError('INVALID_BODY', 'body: empty (send a JSON object)');
  const p = new SlicedJsonParser(
    text,
    limits.maxDepth ?? DEFAULTS.http.maxJsonDepth,
    limits.maxEntries ?? Infinity,
    limits.maxStringLength ?? Infinity,
  );
  while (!p.run(PARSE_SLICE)) await new Promise<void>((resolve) => setImmediate(resolve));
  return p.result;
}

function tooLarge(limit: number): CogrError {
  return cogrError('PAYLOAD_TOO_LARGE', `body: larger than the limit of ${limit} bytes`, { limit });
}

/**
 * A JSON body read from its stream: refused as soon as it passes the size limit or the
 * nesting depth (the raw bytes are scanned as they arrive, before anything is parsed), then
 * decoded as strict UTF-8 and parsed in slices.
 */
function readJsonBody(req: FastifyRequest, payload: Readable, bodyLimit: number, limits: JsonLimits): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (declared > bodyLimit) return Promise.reject(tooLarge(bodyLimit));
  const scan = new DepthScan(limits.maxDepth ?? DEFAULTS.http.maxJsonDepth);
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (e?: unknown): void => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', stop);
      if (e !== undefined) reject(e);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      try {
        if (received > bodyLimit) throw tooLarge(bodyLimit);
        scan.feed(chunk);
      } catch (e) {
        stop(e);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      stop();
      resolve(Buffer.concat(chunks, received));
    };
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', stop);
    payload.resume();
  }).then((body) => parseJsonBody(decodeJsonBody(body, req.headers['content-type']), limits));
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
  // JSON bodies only (any other type, text/plain included, is 415): bounded in size and depth
  // as the bytes arrive, strict UTF-8, parsed in slices; parse errors say what is wrong;
  // duplicate keys and keys that could pollute prototypes are refused.
  app.removeAllContentTypeParsers();
  const json = opts.json ?? {};
  app.addContentTypeParser('application/json', (req: FastifyRequest, payload: Readable) =>
    readJsonBody(req, payload, opts.bodyLimit, json),
  );
  app.setErrorHandler((err: unknown, req, reply) => {
    if (err instanceof CogrError) {
      // A body refused while it arrives (too deep, not UTF-8, malformed): fastify closes the
      // connection, and a client still sending (most do not read before they have sent)
      // would see a reset instead of the answer. A body of a declared length within the
      // limit is read to its end and dropped instead, as one without the token is.
      const declared = Number(req.headers['content-length']);
      if (err.code === 'INVALID_BODY' && declared <= opts.bodyLimit) reply.removeHeader('connection');
      return sendError(reply, err, err.details?.status === 415 ? 415 : err.status);
    }
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

/**
 * A route's onRequest hook that requires `Authorization: Bearer <token>` when a token is set:
 * it runs before the body is read, so a request without the token is a 401 whatever its body
 * (never parsed, never waited for).
 */
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
