/**
 * One catalogue of error codes for the whole project: each code has an HTTP status
 * and a message template. Throw with `cogrError(code, message, details)`; the CLI
 * prints `error[CODE]: message` and exits non-zero, the HTTP API answers with the
 * status and a JSON body `{error: {code, message, details}}`.
 */
import { accessSync, constants as fsConstants, existsSync } from 'node:fs';
import { dirname } from 'node:path';
export const ERROR_CATALOGUE = {
  INVALID_ARGUMENT: { status: 400, summary: 'an argument or option is invalid' },
  INVALID_BODY: { status: 400, summary: 'a request body does not validate' },
  PAYLOAD_TOO_LARGE: { status: 413, summary: 'a request body is too large' },
  URI_TOO_LONG: { status: 414, summary: 'a path parameter is too long' },
  HEADERS_TOO_LARGE: { status: 431, summary: 'the request line and headers are too large' },
  REQUEST_TIMEOUT: { status: 408, summary: 'a request was not received in time' },
  ADDRESS_UNAVAILABLE: { status: 409, summary: 'a server cannot listen on its address (in use, not allowed, or not on this machine)' },
  UNAUTHORIZED: { status: 401, summary: 'a bearer token is missing or wrong' },
  NOT_FOUND: { status: 404, summary: 'an id, generation or round does not exist' },
  DATA_FORMAT: { status: 422, summary: 'a data file is malformed (file and line are named)' },
  DATA_MISSING: { status: 422, summary: 'a data file or column is missing' },
  DUPLICATE_ID: { status: 422, summary: 'an id occurs twice' },
  DB_LOCKED: { status: 409, summary: 'the database is held by another process' },
  CONFLICT: {
    status: 409,
    summary:
      'a catalog write conflicts with the catalog: an item added that is already there, or changed that is not (the line or field is named)',
  },
  DB_VERSION: { status: 409, summary: 'the database has another format version' },
  DB_CORRUPT: { status: 500, summary: 'the database is inconsistent or cannot be read (the path and the next step are named)' },
  IO_ERROR: { status: 500, summary: 'a file or folder cannot be read or written (the path is named)' },
  DISK_FULL: { status: 507, summary: 'no space left on the device (the path, or stdout, is named)' },
  READ_ONLY: { status: 503, summary: 'a file or folder cannot be written: read-only file system or no permission (the path is named)' },
  LLM_ERROR: { status: 502, summary: 'the LLM endpoint failed after retries' },
  LLM_FORMAT: { status: 502, summary: 'the LLM output is not a keyword list' },
  EMBEDDINGS_ERROR: { status: 502, summary: 'the embeddings endpoint is down, failed or missed its deadline after retries' },
  EMBEDDINGS_FORMAT: {
    status: 502,
    summary: 'the embeddings endpoint answered vectors of the wrong count or dimension, or non-finite values',
  },
  REWARD_UNAVAILABLE: {
    status: 502,
    summary: 'a trainer could not get rewards: the reward server is unreachable or failed (trainers/trl)',
  },
  PROMPT_TOO_LONG: {
    status: 400,
    summary: "a prompt's tokens plus the completion budget exceed the model's context (the prompt is named)",
  },
  BACKEND_ERROR: {
    status: 502,
    summary: 'the search backend (OpenSearch) refused a request, or none of its nodes answered within the deadline (the nodes are named)',
  },
  NOT_IMPLEMENTED: { status: 501, summary: 'the request is valid but this server (or its backend) does not serve it' },
  OVERLOADED: { status: 429, summary: "a server's queue is full; retry later" },
  DEADLINE_EXCEEDED: { status: 504, summary: 'a request was not answered within its deadline' },
  WORKER_ERROR: { status: 500, summary: 'a worker failed on a batch' },
  ABORTED: { status: 499, summary: 'the work was cancelled' },
  QUALITY_REGRESSION: { status: 500, summary: 'measured quality is off the expected figures' },
  INTERNAL: { status: 500, summary: 'an internal error' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class CogrError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CogrError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    this.details = details;
  }

  toJSON(): { code: ErrorCode; message: string; details?: Record<string, unknown> } {
    return this.details === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, details: this.details };
  }
}

export function cogrError(code: ErrorCode, message: string, details?: Record<string, unknown>, cause?: unknown): CogrError {
  return new CogrError(code, message, details, cause === undefined ? undefined : { cause });
}

export function isCogrError(e: unknown, code?: ErrorCode): e is CogrError {
  return e instanceof CogrError && (code === undefined || e.code === code);
}

/** What `schemaError` reads of a validation issue (zod's issue, without importing zod here). */
export interface SchemaIssue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly code?: string;
  readonly keys?: readonly string[];
}

/** A field's path as JSON addresses it: `a.b[0].c`; `(root)` for the value itself. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`;
    else out += out.length === 0 ? String(p) : `.${String(p)}`;
  }
  return out.length === 0 ? '(root)' : out;
}

/**
 * The one turn of a schema validation error (zod's) into the catalogue's error, with one
 * message shape: `<what>: <field>: <message>` (`<field>: <message>` without `what`), the
 * field the first issue's path (`formatPath`, `prefix` before it), unknown keys named.
 * Details: `{field, issues}` (the number of issues) and the caller's own.
 */
export function schemaError(
  code: ErrorCode,
  error: { readonly issues: readonly SchemaIssue[] },
  opts: { what?: string; prefix?: string; details?: Record<string, unknown> } = {},
): CogrError {
  const issue = error.issues[0];
  const field = formatPath(issue?.path ?? [], opts.prefix);
  const msg =
    issue === undefined
      ? 'invalid'
      : issue.code === 'unrecognized_keys' && issue.keys
        ? `unknown field(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`
        : issue.message;
  const text = opts.what === undefined ? `${field}: ${msg}` : `${opts.what}: ${field}: ${msg}`;
  return cogrError(code, text, { field, issues: error.issues.length, ...opts.details });
}

const DISK_FULL_CODES = new Set(['ENOSPC', 'EDQUOT']);
const READ_ONLY_CODES = new Set(['EROFS', 'EACCES', 'EPERM']);

/** The errno code (ENOSPC, EROFS, ...) of a Node system error, or of one in its cause chain. */
export function errnoCode(e: unknown): string | undefined {
  let cur: unknown = e;
  for (let depth = 0; cur && depth < 8; depth++) {
    const c = (cur as { code?: unknown; syscall?: unknown }).code;
    if (typeof c === 'string' && /^E[A-Z0-9]+$/.test(c) && (cur as { syscall?: unknown }).syscall !== undefined) return c;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The nearest existing folder above (or at) `path` when it cannot be written, else null. */
function unwritableAncestor(path: string): string | null {
  for (let d = path; ;) {
    if (existsSync(d)) {
      try {
        accessSync(d, fsConstants.W_OK);
        return null;
      } catch {
        return d;
      }
    }
    const up = dirname(d);
    if (up === d) return null;
    d = up;
  }
}

/**
 * A system error of the file system as a named CogrError: ENOSPC (and EDQUOT) is
 * DISK_FULL, EROFS / EACCES / EPERM are READ_ONLY, any other errno code is IO_ERROR; the
 * message names the path (the error's own, else `path`) and what was being done. Returns
 * null for an error that is not a system error (or is a CogrError already).
 */
export function systemError(e: unknown, path?: string, doing?: string): CogrError | null {
  if (e instanceof CogrError) return null;
  const code = errnoCode(e);
  if (!code) return null;
  const own = (e as { path?: unknown; dest?: unknown }).path;
  const syscall = (e as { syscall?: unknown }).syscall;
  const where =
    typeof own === 'string' ? own : (path ?? `(${typeof syscall === 'string' ? syscall : 'a file operation'}; the path is not known)`);
  const what = doing && !doing.includes(where) ? `${doing}: ` : '';
  // A recursive mkdir on a read-only file system can fail with ENOENT (the folder it could not
  // make is missing for the next level): the cause is the nearest existing folder that cannot be written.
  if (code === 'ENOENT' && syscall === 'mkdir' && typeof own === 'string') {
    const closed = unwritableAncestor(own);
    if (closed)
      return cogrError(
        'READ_ONLY',
        `${what}${own}: cannot be created: ${closed} cannot be written (a read-only file system or no permission); give a writable COGR_HOME or --db, or fix the folder's permissions`,
        { path: own, errno: code },
        e,
      );
  }
  if (DISK_FULL_CODES.has(code))
    return cogrError(
      'DISK_FULL',
      `${what}${where}: no space left on the device (${code}); free some space and run the command again`,
      { path: where, errno: code },
      e,
    );
  if (READ_ONLY_CODES.has(code)) {
    return cogrError(
      'READ_ONLY',
      `${what}${where}: cannot be written (${code === 'EROFS' ? 'read-only file system' : 'permission denied'}, ${code}); give a writable COGR_HOME or --db, or fix the folder's permissions`,
      { path: where, errno: code },
      e,
    );
  }
  const reason = e instanceof Error ? e.message : String(e);
  return cogrError('IO_ERROR', `${what}${where}: ${reason}`, { path: where, errno: code }, e);
}

/**
 * A LevelDB error (classic-level's LEVEL_IO_ERROR / LEVEL_CORRUPTION, whose message names the
 * file, e.g. "IO error: /x/db/000005.ldb: Invalid argument") as a named CogrError: no space
 * is DISK_FULL, a read-only file system or no permission is READ_ONLY, anything else is
 * DB_CORRUPT naming the database folder and the next step. Null when it is not one.
 */
export function levelError(e: unknown, dbPath?: string): CogrError | null {
  if (e instanceof CogrError) return null;
  let cur: unknown = e;
  let found: { code: string; message: string } | null = null;
  for (let depth = 0; cur && depth < 8 && !found; depth++) {
    const c = (cur as { code?: unknown }).code;
    const m = (cur as { message?: unknown }).message;
    if ((c === 'LEVEL_IO_ERROR' || c === 'LEVEL_CORRUPTION') && typeof m === 'string') found = { code: c, message: m };
    cur = (cur as { cause?: unknown }).cause;
  }
  if (!found) return null;
  const file = /^(?:IO error|Corruption): (\/[^:]+)/.exec(found.message)?.[1];
  const dir = dbPath ?? (file ? file.replace(/\/[^/]*$/, '') : '(the database folder)');
  if (/No space left on device|Disk quota exceeded/i.test(found.message))
    return cogrError(
      'DISK_FULL',
      `database ${dir}: no space left on the device (${found.message}); free some space and run the command again`,
      { path: file ?? dir },
      e,
    );
  if (/Read-only file system|Permission denied|Operation not permitted/i.test(found.message)) {
    return cogrError(
      'READ_ONLY',
      `database ${dir} cannot be written (${found.message}); give a writable COGR_HOME or --db, or fix the folder's permissions`,
      { path: file ?? dir },
      e,
    );
  }
  return cogrError(
    'DB_CORRUPT',
    `database ${dir} cannot be read: ${found.message}; \`cogr verify\` says what is intact; to start over, \`cogr demo --fresh\` / \`cogr evolve --fresh\` clear it, or remove the folder ${dir}`,
    { path: file ?? dir },
    e,
  );
}
