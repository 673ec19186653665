/**
 * One catalogue of error codes for the whole project: each code has an HTTP status
 * and a message template. Throw with `cogrError(code, message, details)`; the CLI
 * prints `error[CODE]: message` and exits non-zero, the HTTP API answers with the
 * status and a JSON body `{error: {code, message, details}}`.
 */
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
  DB_VERSION: { status: 409, summary: 'the database has another format version' },
  DB_CORRUPT: { status: 500, summary: 'the database is inconsistent' },
  DISK_FULL: { status: 507, summary: 'no space left on the device (the path, or stdout, is named)' },
  LLM_ERROR: { status: 502, summary: 'the LLM endpoint failed after retries' },
  LLM_FORMAT: { status: 502, summary: 'the LLM output is not a keyword list' },
  OVERLOADED: { status: 429, summary: 'a server\'s queue is full; retry later' },
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
