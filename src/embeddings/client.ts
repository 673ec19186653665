/**
 * The embeddings client: OpenAI's `POST /v1/embeddings` (vLLM, Ollama, TEI, OpenAI and
 * `cogr embeddings serve` answer it) through the `openai` client, and a cache of the
 * vectors in a project database.
 *
 * - `--embeddings URL` is the API's base, as `--base-url` is for chat: e.g.
 *   http://127.0.0.1:8001/v1. The model is `--embeddings-model NAME`, else the first id
 *   of `GET /v1/models`.
 * - One deadline per attempt (`timeoutMs`, env COGR_EMBEDDINGS_TIMEOUT_MS) over the whole
 *   exchange, body included; time-outs, connection errors, 429 and 5xx are retried
 *   (`maxRetries`, exponential back-off), then EMBEDDINGS_ERROR naming the endpoint and
 *   the last status. The client's own retries are off so the counts are ours.
 * - Every answer is validated before anything is kept: as many vectors as inputs, each
 *   index once, one dimension for all (and the dimension the cache already holds for the
 *   model), finite numbers only; else EMBEDDINGS_FORMAT naming what is wrong.
 * - `embedTexts` deduplicates the texts, reads what the cache holds (keyed by the model's
 *   name and the SHA-256 of the text), encodes the rest in batches and writes each
 *   validated batch in one LevelDB batch, so an endpoint that fails half-way leaves only
 *   whole, validated vectors behind and a re-run encodes only what is missing. A progress
 *   line on stderr (counts, rate) every few seconds.
 */
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import type { CogrDb } from '../../index/store/db.ts';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import { silentLogger, type Logger } from '../../index/core/log.ts';

export interface EmbeddingsClientOptions {
  /** Base of the OpenAI-compatible API, e.g. http://127.0.0.1:8001/v1. */
  baseURL: string;
  /** The model to ask for; default: the first id the endpoint's /models lists. */
  model?: string;
  apiKey?: string;
  timeoutMs?: number;
  maxRetries?: number;
  retryBaseMs?: number;
  batchSize?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Parse a URL flag: http(s) only. */
export function parseEmbeddingsUrl(flag: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw cogrError(
      'INVALID_ARGUMENT',
      `${flag}: expected the URL of an OpenAI-compatible embeddings API (e.g. http://127.0.0.1:8001/v1), got ${JSON.stringify(raw)}`,
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw cogrError('INVALID_ARGUMENT', `${flag}: expected an http or https URL, got ${JSON.stringify(raw)}`);
  return raw.replace(/\/+$/, '');
}

/** The deadline from COGR_EMBEDDINGS_TIMEOUT_MS (milliseconds), else the default. */
export function embeddingsTimeoutFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.COGR_EMBEDDINGS_TIMEOUT_MS;
  if (raw === undefined || raw === '') return DEFAULTS.embeddings.timeoutMs;
  const n = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!(n >= 1 && n <= 86_400_000))
    throw cogrError(
      'INVALID_ARGUMENT',
      `COGR_EMBEDDINGS_TIMEOUT_MS: expected an integer in [1, 86400000] (milliseconds), got ${JSON.stringify(raw)}`,
    );
  return n;
}

export class EmbeddingsClient {
  readonly baseURL: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly batchSize: number;
  private readonly retryBaseMs: number;
  private readonly client: OpenAI;
  private model: string | undefined;
  /** Requests sent (attempts, retries included). */
  requests = 0;

  constructor(o: EmbeddingsClientOptions) {
    this.baseURL = o.baseURL;
    this.model = o.model;
    this.timeoutMs = o.timeoutMs ?? DEFAULTS.embeddings.timeoutMs;
    this.maxRetries = o.maxRetries ?? DEFAULTS.embeddings.maxRetries;
    this.retryBaseMs = o.retryBaseMs ?? 500;
    this.batchSize = o.batchSize ?? DEFAULTS.embeddings.batchSize;
    this.client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey ?? 'not-needed', maxRetries: 0, timeout: this.timeoutMs });
  }

  /** One exchange with a deadline over all of it, retried on time-outs, connection errors, 429 and 5xx. */
  private async call<T>(what: string, send: (signal: AbortSignal) => Promise<T>): Promise<T> {
    let lastStatus = '';
    for (let attempt = 0; ; attempt++) {
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(), this.timeoutMs);
      this.requests++;
      let retryable = false;
      try {
        return await send(deadline.signal);
      } catch (e) {
        if (isCogrError(e)) throw e;
        if (deadline.signal.aborted || e instanceof OpenAI.APIConnectionTimeoutError) {
          lastStatus = `no answer within the deadline of ${this.timeoutMs} ms (--embeddings-timeout or COGR_EMBEDDINGS_TIMEOUT_MS)`;
          retryable = true;
        } else if (e instanceof OpenAI.APIConnectionError) {
          lastStatus = `connection error (${e.message}${(e.cause as Error | undefined)?.message ? `: ${(e.cause as Error).message}` : ''})`;
          retryable = true;
        } else if (e instanceof OpenAI.APIError) {
          const st = e.status ?? 0;
          lastStatus = `HTTP ${st} (${e.message.slice(0, 200)})`;
          retryable = st === 429 || st === 408 || st >= 500;
        } else if (e instanceof SyntaxError) {
          lastStatus = 'an answer that is not JSON';
          retryable = true;
        } else {
          throw e;
        }
        if (!retryable || attempt >= this.maxRetries) {
          throw cogrError(
            'EMBEDDINGS_ERROR',
            `embeddings endpoint ${this.baseURL} failed ${what} after ${attempt + 1} attempt(s): ${lastStatus}`,
            { endpoint: this.baseURL, status: lastStatus, attempts: attempt + 1 },
            e,
          );
        }
        await sleep(this.retryBaseMs * 2 ** attempt);
      } finally {
        clearTimeout(timer);
      }
    }
  }

  /** The model's name: the one given, else the first id of GET /models. */
  async modelName(): Promise<string> {
    if (this.model !== undefined) return this.model;
    const page = await this.call('listing its models', (signal) => this.client.models.list({ signal }));
    const first = (page as unknown as { data?: { id?: unknown }[] }).data?.[0]?.id;
    if (typeof first !== 'string' || first === '')
      throw cogrError(
        'EMBEDDINGS_FORMAT',
        `embeddings endpoint ${this.baseURL}: GET /models lists no model; give --embeddings-model NAME`,
        { endpoint: this.baseURL },
      );
    this.model = first;
    return first;
  }

  /**
   * The vectors of one batch of texts, validated (count, indices, one dimension,
   * `expectedDim` when given, finite values).
   */
  async embedBatch(texts: readonly string[], expectedDim?: number): Promise<Float32Array[]> {
    const model = await this.modelName();
    if (texts.length === 0) return [];
    const res = await this.call(`on a batch of ${texts.length} text(s)`, (signal) =>
      this.client.embeddings.create({ model, input: [...texts], encoding_format: 'float' }, { signal }),
    );
    return validateEmbeddings(res as unknown, texts.length, this.baseURL, expectedDim);
  }
}

/** Check an /embeddings answer and turn it into one Float32Array per input, in input order. */
export function validateEmbeddings(res: unknown, count: number, endpoint: string, expectedDim?: number): Float32Array[] {
  const bad = (why: string) =>
    cogrError('EMBEDDINGS_FORMAT', `embeddings endpoint ${endpoint}: ${why}; nothing of this batch was kept`, { endpoint });
  const data = (res as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw bad('the answer has no data array');
  if (data.length !== count) throw bad(`answered ${data.length} vector(s) for ${count} input(s)`);
  const out: (Float32Array | undefined)[] = new Array(count);
  let dim = expectedDim;
  data.forEach((d: unknown, pos) => {
    const idx = (d as { index?: unknown }).index ?? pos;
    if (typeof idx !== 'number' || !Number.isInteger(idx) || idx < 0 || idx >= count)
      throw bad(`data[${pos}].index is ${JSON.stringify(idx)}, not an input index in [0, ${count})`);
    if (out[idx] !== undefined) throw bad(`index ${idx} answered twice`);
    const e = (d as { embedding?: unknown }).embedding;
    if (!Array.isArray(e) || e.length === 0) throw bad(`data[${pos}].embedding is not a non-empty array of numbers`);
    if (dim === undefined) dim = e.length;
    if (e.length !== dim)
      throw bad(
        `data[${pos}].embedding has dimension ${e.length}, expected ${dim}${expectedDim !== undefined ? ' (the dimension this model had before)' : ''}`,
      );
    const v = new Float32Array(dim);
    for (let j = 0; j < dim; j++) {
      const x = e[j];
      if (typeof x !== 'number' || !Number.isFinite(x))
        throw bad(`data[${pos}].embedding[${j}] is ${JSON.stringify(x)}, not a finite number`);
      v[j] = x;
    }
    out[idx] = v;
  });
  return out as Float32Array[];
}

/** SHA-256 of a text, hex. */
export function textDigest(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export const EMBEDDINGS_SUBLEVEL = 'embeddings';
interface CachedVector {
  dim: number;
  b64: string;
}
const vecKey = (model: string, digest: string) => `vec/${model}/${digest}`;
const dimKey = (model: string) => `dim/${model}`;

function encodeVector(v: Float32Array): CachedVector {
  return { dim: v.length, b64: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
}
function decodeVector(c: unknown, dim: number): Float32Array | null {
  const x = c as Partial<CachedVector> | undefined;
  if (!x || x.dim !== dim || typeof x.b64 !== 'string') return null;
  const buf = Buffer.from(x.b64, 'base64');
  if (buf.length !== dim * 4) return null;
  const v = new Float32Array(dim);
  new Uint8Array(v.buffer).set(buf);
  for (let j = 0; j < dim; j++) if (!Number.isFinite(v[j])) return null;
  return v;
}

export interface EmbeddedTexts {
  model: string;
  dim: number;
  /** One vector per input text, in input order (the same text shares one array). */
  vectors: Float32Array[];
  encoded: number;
  cached: number;
}

/**
 * The vectors of `texts` under the client's model: from the cache (`db`'s `embeddings`
 * sublevel) where it holds them, the rest encoded in batches and written to it batch by
 * batch once validated. Without `db`, nothing is cached.
 */
export async function embedTexts(
  texts: readonly string[],
  client: EmbeddingsClient,
  opts: { db?: CogrDb | null; log?: Logger; what?: string } = {},
): Promise<EmbeddedTexts> {
  const log = opts.log ?? silentLogger;
  const what = opts.what ?? 'texts';
  const model = await client.modelName();
  const sub = opts.db ? opts.db.sublevel<unknown>(EMBEDDINGS_SUBLEVEL) : null;
  const digests = texts.map(textDigest);
  const unique = new Map<string, string>();
  texts.forEach((t, i) => unique.set(digests[i], t));
  const byDigest = new Map<string, Float32Array>();
  let dim: number | undefined;
  if (sub) {
    const d = (await sub.get(dimKey(model))) as number | undefined;
    if (typeof d === 'number' && Number.isInteger(d) && d > 0) dim = d;
    if (dim !== undefined) {
      const keys = [...unique.keys()];
      const vals = await sub.getMany(keys.map((k) => vecKey(model, k)));
      keys.forEach((k, i) => {
        const v = decodeVector(vals[i], dim!);
        if (v) byDigest.set(k, v);
      });
    }
  }
  const cached = byDigest.size;
  const missing = [...unique.keys()].filter((k) => !byDigest.has(k));
  if (missing.length > 0)
    log.info(
      `embeddings: ${missing.length} of ${unique.size} distinct ${what} to encode with ${model} at ${client.baseURL} (${cached} from the cache)`,
    );
  const t0 = Date.now();
  let lastLog = t0;
  let done = 0;
  for (let s = 0; s < missing.length; s += client.batchSize) {
    const keys = missing.slice(s, s + client.batchSize);
    const vecs = await client.embedBatch(
      keys.map((k) => unique.get(k)!),
      dim,
    );
    if (dim === undefined) dim = vecs[0].length;
    if (sub) {
      const ops: { type: 'put'; key: string; value: unknown }[] = keys.map((k, i) => ({
        type: 'put',
        key: vecKey(model, k),
        value: encodeVector(vecs[i]),
      }));
      ops.push({ type: 'put', key: dimKey(model), value: dim });
      await sub.batch(ops);
    }
    keys.forEach((k, i) => byDigest.set(k, vecs[i]));
    done += keys.length;
    const now = Date.now();
    if (now - lastLog >= 3000 || done === missing.length) {
      lastLog = now;
      const rate = done / Math.max(0.001, (now - t0) / 1000);
      const left = missing.length - done;
      const eta = left === 0 ? '' : `, ETA ${left / rate >= 90 ? `${(left / rate / 60).toFixed(1)} min` : `${Math.ceil(left / rate)} s`}`;
      log.info(`embeddings: ${done}/${missing.length} ${what} encoded (${rate.toFixed(1)}/s${eta})${sub ? ', cached' : ''}`);
    }
  }
  if (dim === undefined) dim = 0;
  return { model, dim, vectors: digests.map((d) => byDigest.get(d)!), encoded: missing.length, cached };
}

/** Unit-length copy of a vector (a zero vector stays zero). */
export function normalized(v: Float32Array): Float32Array {
  let s = 0;
  for (let j = 0; j < v.length; j++) s += v[j] * v[j];
  const n = Math.sqrt(s);
  const out = new Float32Array(v.length);
  if (n > 0) for (let j = 0; j < v.length; j++) out[j] = v[j] / n;
  return out;
}
