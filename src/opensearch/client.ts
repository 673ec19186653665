/**
 * A small OpenSearch REST client over `fetch`: a list of nodes, a deadline on every
 * request, and node failover.
 *
 * Why not `@opensearch-project/opensearch`: cogr needs exactly three things of a client —
 * a hard deadline on every socket read (an AbortSignal timeout covers connect, headers and
 * body), every node of the list used (requests start at the next node in turn) with a dead
 * one skipped, and OpenSearch's errors turned into cogr's (`BACKEND_ERROR`,
 * `DEADLINE_EXCEEDED` naming the nodes tried). With plain `fetch` these are a page of code
 * and no dependency.
 *
 * A node that refused a connection or missed its deadline is set aside for `coolDownMs`
 * (tried again after, or when every node is set aside); a request is retried on the next
 * node after a connection error, a timeout, or a 502/503/504 answer, at most once per node.
 * A 4xx or other 5xx answer is not retried: it is `BACKEND_ERROR` with OpenSearch's reason.
 */
import { cogrError } from '../../index/core/errors.ts';

export interface OpenSearchOptions {
  /** Deadline of one attempt on one node, in ms (default 10,000). */
  timeoutMs?: number;
  /** How long a node that failed is skipped, in ms (default 5,000). */
  coolDownMs?: number;
}

/** Parse `--url U[,U2,…]`: http(s) URLs, no path, no credentials in the URL; errors name the flag. */
export function parseNodeUrls(flag: string, raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '')
    throw cogrError('INVALID_ARGUMENT', `${flag}: required, one or more node URLs separated by commas`);
  const out: string[] = [];
  for (const part of raw.split(',')) {
    const s = part.trim();
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      throw cogrError('INVALID_ARGUMENT', `${flag}: '${s}' is not a URL (expected http://host:port)`, { url: s });
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw cogrError('INVALID_ARGUMENT', `${flag}: '${s}' is not http or https`, { url: s });
    if (u.username || u.password)
      throw cogrError('INVALID_ARGUMENT', `${flag}: '${s}' carries credentials; cogr talks to clusters without authentication only`, {
        url: u.host,
      });
    if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash)
      throw cogrError('INVALID_ARGUMENT', `${flag}: '${s}' has a path or query; give the node's base URL`, { url: s });
    const base = `${u.protocol}//${u.host}`;
    if (!out.includes(base)) out.push(base);
  }
  return out;
}

/** Index and alias names as OpenSearch accepts them (lower case, no separators or wildcards). */
export function checkIndexName(flag: string, name: string | undefined): string {
  if (name === undefined || name === '') throw cogrError('INVALID_ARGUMENT', `${flag}: required, an index or alias name`);
  if (!/^[a-z0-9][a-z0-9_.-]{0,199}$/.test(name) || name === '.' || name === '..')
    throw cogrError(
      'INVALID_ARGUMENT',
      `${flag}: '${name}' is not an index name (lower-case letters, digits, '_', '-', '.'; not first '_', '-' or '.')`,
      {
        index: name,
      },
    );
  return name;
}

interface Attempt {
  node: string;
  error: string;
}

export class OpenSearchNodes {
  readonly nodes: readonly string[];
  private readonly timeoutMs: number;
  private readonly coolDownMs: number;
  private next = 0;
  private readonly downUntil = new Map<string, number>();
  /** Attempts that failed over to another node (connection errors, timeouts, 502–504). */
  failovers = 0;

  constructor(nodes: readonly string[], opts: OpenSearchOptions = {}) {
    if (nodes.length === 0) throw cogrError('INVALID_ARGUMENT', 'opensearch: at least one node URL is needed');
    this.nodes = [...nodes];
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.coolDownMs = opts.coolDownMs ?? 5_000;
  }

  /** The nodes in the order a request tries them: round robin, nodes set aside last. */
  private order(): string[] {
    const n = this.nodes.length;
    const start = this.next++ % n;
    const now = Date.now();
    const up: string[] = [];
    const down: string[] = [];
    for (let i = 0; i < n; i++) {
      const node = this.nodes[(start + i) % n];
      ((this.downUntil.get(node) ?? 0) > now ? down : up).push(node);
    }
    return [...up, ...down];
  }

  /**
   * One request with failover; resolves with the parsed JSON body of a 2xx answer (or of a
   * 404 when `allow404`), rejects with BACKEND_ERROR or DEADLINE_EXCEEDED.
   */
  async request<T = unknown>(
    method: 'GET' | 'PUT' | 'POST' | 'DELETE' | 'HEAD',
    path: string,
    body?: unknown,
    opts: { timeoutMs?: number; ndjson?: boolean; allow404?: boolean; signal?: AbortSignal } = {},
  ): Promise<{ status: number; body: T }> {
    const attempts: Attempt[] = [];
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    let allTimedOut = true;
    for (const node of this.order()) {
      if (opts.signal?.aborted) throw cogrError('ABORTED', `opensearch ${method} ${path}: cancelled`);
      const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
      let status: number;
      let text: string;
      try {
        const res = await fetch(node + path, {
          method,
          headers: body === undefined ? {} : { 'content-type': opts.ndjson ? 'application/x-ndjson' : 'application/json' },
          ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
          signal,
        });
        status = res.status;
        text = await res.text();
      } catch (e) {
        if (opts.signal?.aborted) throw cogrError('ABORTED', `opensearch ${method} ${path}: cancelled`);
        const timedOut = e instanceof Error && (e.name === 'TimeoutError' || e.name === 'AbortError');
        if (!timedOut) allTimedOut = false;
        const cause = e instanceof Error && e.cause instanceof Error ? e.cause.message : e instanceof Error ? e.message : String(e);
        attempts.push({ node, error: timedOut ? `no answer within ${timeoutMs} ms` : cause });
        this.downUntil.set(node, Date.now() + this.coolDownMs);
        this.failovers++;
        continue;
      }
      if (status === 502 || status === 503 || status === 504) {
        allTimedOut = false;
        attempts.push({ node, error: `HTTP ${status}: ${text.slice(0, 300)}` });
        this.failovers++;
        continue;
      }
      this.downUntil.delete(node);
      let parsed: unknown = null;
      if (text.length > 0) {
        try {
          parsed = JSON.parse(text);
        } catch {
          throw cogrError('BACKEND_ERROR', `opensearch ${method} ${path} on ${node}: HTTP ${status}, not JSON: ${text.slice(0, 200)}`, {
            node,
            status,
          });
        }
      }
      if ((status >= 200 && status < 300) || (status === 404 && opts.allow404)) return { status, body: parsed as T };
      const raw = (parsed as { error?: unknown } | null)?.error;
      const err = typeof raw === 'object' && raw !== null ? (raw as OpenSearchErrorBody) : null;
      const reason = err ? `${err.type ?? 'error'}: ${err.root_cause?.[0]?.reason ?? err.reason ?? ''}` : text.slice(0, 300);
      throw cogrError('BACKEND_ERROR', `opensearch ${method} ${path} on ${node}: HTTP ${status} ${reason}`, {
        node,
        status,
        type: err?.type ?? null,
        causes: err ? causeTypes(err) : [],
      });
    }
    const tried = attempts.map((a) => `${a.node} (${a.error})`).join('; ');
    throw cogrError(allTimedOut ? 'DEADLINE_EXCEEDED' : 'BACKEND_ERROR', `opensearch ${method} ${path}: no node answered: ${tried}`, {
      nodes: attempts.map((a) => a.node),
    });
  }
}

/** The part of an OpenSearch error answer's `error` object the client reads. */
interface OpenSearchErrorBody {
  type?: string;
  reason?: string;
  root_cause?: { type?: string; reason?: string }[];
  failed_shards?: { reason?: { type?: string; caused_by?: { type?: string } } }[];
  caused_by?: { type?: string };
}

/**
 * Every exception type an error answer names below its own: its root causes', its failed
 * shards' (and what caused those) and its own cause's, each once, in that order — what
 * a caller tells failures apart by (index.ts isNodeLoss) instead of the reason's wording.
 */
function causeTypes(err: OpenSearchErrorBody): string[] {
  const out = new Set<string>();
  const add = (t: unknown) => {
    if (typeof t === 'string' && t !== '') out.add(t);
  };
  if (Array.isArray(err.root_cause)) for (const c of err.root_cause) add(c?.type);
  if (Array.isArray(err.failed_shards))
    for (const f of err.failed_shards) {
      add(f?.reason?.type);
      add(f?.reason?.caused_by?.type);
    }
  add(err.caused_by?.type);
  return [...out];
}
