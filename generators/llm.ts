/**
 * OpenAIGenerator: keyword generation through any OpenAI-compatible chat-completions
 * endpoint (OpenAI, vLLM, Ollama, llama.cpp's server) with the `openai` client.
 *
 * - Prompts come from generators/prompts/<side>.md (see prompts.ts for the syntax).
 * - Structured output: `response_format: json_schema` built from a zod schema with
 *   `z.toJSONSchema`; a server that answers 400 to it is remembered and asked again in
 *   plain text; every answer goes through the tolerant parser (parse.ts).
 * - `n` samples per request; a server that returns fewer choices than asked is
 *   remembered and asked with repeated requests instead.
 * - A concurrency limit, retries with exponential back-off and jitter on 429, 5xx,
 *   time-outs, connection errors and answers that are not a chat completion (a 200 whose
 *   body is not JSON, or JSON without `choices`; the client's own retries are disabled so
 *   the counts are ours), then CogrError('LLM_ERROR') naming the endpoint and last status.
 * - One deadline per attempt, `timeoutMs` (flag `--llm-timeout`, env COGR_LLM_TIMEOUT_MS),
 *   over the whole exchange (connection, headers and the body to its last byte), armed
 *   when the request leaves our concurrency queue: an AbortController whose signal the
 *   client request carries (the client's own timer stops at the headers). A stalled body
 *   is a time-out like no answer at all: retried, then LLM_ERROR naming the endpoint and
 *   which flags to change.
 * - A persistent cache keyed by sha256(model, side, messages, temperature, top_p,
 *   max_tokens, seed, sample index), so a re-run never pays twice. The seed is part of the
 *   key so that a new rollout seed draws new samples. Only model output is cached: a choice
 *   without text (null, missing or non-string content, or empty) is a protocol anomaly,
 *   scored invalid_format for this call and asked again by the next one.
 * - `generateSettled`: per input its samples or its error; after an endpoint failure
 *   (retries exhausted on time-outs, connection errors, 429 or 5xx) the inputs not yet sent
 *   fail at once instead of each exhausting its own retries, and the answered ones are kept.
 * - The schema asked for is bounded (parse.ts `boundedKeywordListSchema`): at most
 *   min(kMax, maxKeywords) keywords of at most maxKeywordLength characters, so a grammar-
 *   constrained small model closes its answer instead of writing one string until
 *   max_tokens. Prompts carry worked examples (the prompt file's, or `examples` per side).
 * - A choice that ended at max_tokens (finish_reason "length") is flagged `truncated` and
 *   counted (`usage.truncated`), whether or not its text still parses.
 * - Usage counters: requests, tokens, failures, retries, cache hits, format failures.
 * Output that is not a keyword list becomes an `invalid_format` sample, never a crash.
 */
import { createHash } from 'node:crypto';
import OpenAI from 'openai';
import { z } from 'zod';
import { cogrError, schemaError, type CogrError } from '../index/core/errors.ts';
import { silentLogger, type Logger } from '../index/core/log.ts';
import { createRng, deriveSeed, type Rng } from '../index/core/random.ts';
import type { Side } from '../index/core/types.ts';
import { boundedKeywordListSchema, parseKeywordOutput } from './parse.ts';
import {
  DEFAULT_PROMPT_DIR,
  loadPromptTemplate,
  renderPrompt,
  type ChatMessage,
  type PromptExample,
  type PromptTemplate,
  type SearchContext,
} from './prompts.ts';
import { DEFAULTS, K_MAX } from '../index/core/defaults.ts';
import {
  type GenerateInput,
  type GenerateOptions,
  type KeyValueStore,
  type KeywordGenerator,
  type KeywordSample,
  type SettledSamples,
} from './types.ts';

export const LlmOptionsSchema = z.object({
  baseURL: z.string().url({ message: 'baseURL must be a URL (flag --base-url or OPENAI_BASE_URL)' }),
  apiKey: z.string().default('not-needed'),
  model: z.string().min(1, { message: 'model must be set (flag --model or COGR_MODEL)' }),
  concurrency: z.number().int().min(1).max(256).default(DEFAULTS.llm.concurrency),
  maxRetries: z.number().int().min(0).max(20).default(DEFAULTS.llm.maxRetries),
  retryBaseMs: z.number().min(0).default(500),
  retryMaxMs: z.number().min(0).default(10_000),
  timeoutMs: z.number().int().min(1).default(DEFAULTS.llm.timeoutMs),
  maxTokens: z.number().int().min(1).default(DEFAULTS.llm.maxTokens),
  /** 'auto': try json_schema, fall back to text on a 400; 'off': always text. */
  structured: z.enum(['auto', 'off']).default('auto'),
  /** Ask for `n` choices per request ('auto' falls back to repeated requests when a server ignores n). */
  multiSample: z.enum(['auto', 'off']).default('auto'),
  /** Ask for token log-probabilities and report Σ of them as the sample's logProb. */
  logprobs: z.boolean().default(false),
  kMax: z.number().int().min(1).default(K_MAX),
  /** The most keywords a sample may hold (the schema's maxItems is min(kMax, maxKeywords)). */
  maxKeywords: z.number().int().min(1).max(1000).default(DEFAULTS.llm.maxKeywords),
  /** The longest keyword (the schema's maxLength). */
  maxKeywordLength: z.number().int().min(1).max(1000).default(DEFAULTS.llm.maxKeywordLength),
  promptDir: z.string().default(DEFAULT_PROMPT_DIR),
});
export type LlmOptions = z.input<typeof LlmOptionsSchema>;

export interface LlmDeps {
  cache?: KeyValueStore;
  logger?: Logger;
  /** The paper's "+ search results" variant: top search results (titles, keywords) for a query input. */
  searchContext?: (input: GenerateInput) => readonly string[] | SearchContext | Promise<readonly string[] | SearchContext>;
  /** Worked examples per side, replacing the prompt file's (e.g. training queries with their SFT targets; never held-out ones). */
  examples?: Partial<Record<Side, readonly PromptExample[]>>;
}

export interface LlmUsage {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Requests that failed (each retried attempt counts). */
  failures: number;
  retries: number;
  cacheHits: number;
  formatFailures: number;
  /** Samples that ended at max_tokens (finish_reason "length"). */
  truncated: number;
  samples: number;
}

/** The longest request time-out accepted (one day). */
export const MAX_LLM_TIMEOUT_MS = 86_400_000;

/**
 * Resolve options from flags first, then the environment (OPENAI_BASE_URL, OPENAI_API_KEY,
 * COGR_MODEL, COGR_LLM_TIMEOUT_MS). The time-out is milliseconds in decimal digits; another
 * value is refused naming the flag or the variable it came from.
 */
export function llmOptionsFromEnv(
  flags: { baseUrl?: string; model?: string; apiKey?: string; llmTimeout?: string },
  env: NodeJS.ProcessEnv = process.env,
): LlmOptions {
  const [timeoutFrom, timeoutRaw] =
    flags.llmTimeout !== undefined ? ['--llm-timeout', flags.llmTimeout] : ['COGR_LLM_TIMEOUT_MS', env.COGR_LLM_TIMEOUT_MS];
  let timeoutMs: number | undefined;
  if (timeoutRaw !== undefined) {
    const s = timeoutRaw.trim();
    timeoutMs = /^\d+$/.test(s) ? Number(s) : NaN;
    if (!(timeoutMs >= 1 && timeoutMs <= MAX_LLM_TIMEOUT_MS)) {
      throw cogrError(
        'INVALID_ARGUMENT',
        `${timeoutFrom}: expected an integer in [1, ${MAX_LLM_TIMEOUT_MS}] (milliseconds), got ${JSON.stringify(timeoutRaw)}`,
      );
    }
  }
  return {
    baseURL: flags.baseUrl ?? env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1',
    model: flags.model ?? env.COGR_MODEL ?? '',
    apiKey: flags.apiKey ?? env.OPENAI_API_KEY ?? 'not-needed',
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  };
}

/** The message of a 400 that refuses a prompt for its length, not the response_format. */
const CONTEXT_400 = /context length|context window|maximum context|context is \d+ tokens|too many tokens|prompt is too long/i;

/** A 200 answer that is not a chat completion: retried like a server error. */
class NotACompletion extends Error {}

/** The hint of a time-out: the deadline counts from sending, so a server that queues requests needs a longer one or fewer at once. */
const TIMEOUT_HINT = 'a slow or one-request-at-a-time server needs a longer --llm-timeout or a lower --concurrency';

class Semaphore {
  private active = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.queue.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(cogrError('ABORTED', 'generation cancelled'));
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(cogrError('ABORTED', 'generation cancelled'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

interface Choice {
  content: string;
  logProb: number | null;
  /** The server's finish_reason ("stop", "length", …), when it gave one. */
  finishReason?: string;
  /** What is wrong with a choice that carries no text (a protocol anomaly, never cached). */
  anomaly?: string;
}

/** A cached choice: model text only (anomalies are never written; an empty text, as earlier versions wrote for a null one, is asked again). */
const CachedChoiceSchema = z.object({ content: z.string().min(1), logProb: z.number().nullable(), finishReason: z.string().optional() });

/** Why a choice's message carries no text, or undefined when it does. */
function choiceAnomaly(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null) return 'a choice without a message';
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') return content.length === 0 ? 'an empty message content' : undefined;
  const what =
    content === undefined
      ? 'no message content'
      : content === null
        ? 'a null message content'
        : `a message content of type ${Array.isArray(content) ? 'array' : typeof content}`;
  return Array.isArray((message as { tool_calls?: unknown }).tool_calls) ? `${what} (tool calls only)` : what;
}

/** Shared by the inputs of one generateSettled call: the endpoint failure that stops sending the rest. */
interface BatchState {
  broken?: { inputId: string; error: CogrError };
}

export class OpenAIGenerator implements KeywordGenerator {
  readonly kind = 'openai';
  readonly options: z.output<typeof LlmOptionsSchema>;
  readonly usage: LlmUsage = {
    requests: 0,
    promptTokens: 0,
    completionTokens: 0,
    totalTokens: 0,
    failures: 0,
    retries: 0,
    cacheHits: 0,
    formatFailures: 0,
    truncated: 0,
    samples: 0,
  };
  private readonly client: OpenAI;
  private readonly sem: Semaphore;
  private readonly cache: KeyValueStore | undefined;
  private readonly logger: Logger;
  private readonly searchContext: LlmDeps['searchContext'];
  private examples: LlmDeps['examples'];
  /** The most keywords a sample may hold: the schema's maxItems and the prompt's {{k_max}}. */
  readonly keywordLimit: number;
  private readonly prompts = new Map<Side, PromptTemplate>();
  private structuredOk: boolean;
  private multiOk: boolean;
  private readonly jitter: Rng = createRng(0x5eed);
  private readonly responseFormat: { type: 'json_schema'; json_schema: { name: string; schema: Record<string, unknown>; strict: boolean } };

  constructor(options: LlmOptions, deps: LlmDeps = {}) {
    const parsed = LlmOptionsSchema.safeParse(options);
    if (!parsed.success) throw schemaError('INVALID_ARGUMENT', parsed.error, { what: 'LLM options' });
    this.options = parsed.data;
    this.client = new OpenAI({
      baseURL: this.options.baseURL,
      apiKey: this.options.apiKey,
      maxRetries: 0,
      timeout: this.options.timeoutMs,
    });
    this.sem = new Semaphore(this.options.concurrency);
    this.cache = deps.cache;
    this.logger = deps.logger ?? silentLogger;
    this.searchContext = deps.searchContext;
    this.examples = deps.examples;
    this.keywordLimit = Math.min(this.options.kMax, this.options.maxKeywords);
    this.structuredOk = this.options.structured === 'auto';
    this.multiOk = this.options.multiSample === 'auto';
    const schema = z.toJSONSchema(boundedKeywordListSchema(this.keywordLimit, this.options.maxKeywordLength)) as Record<string, unknown>;
    delete schema.$schema;
    this.responseFormat = { type: 'json_schema', json_schema: { name: 'keywords', schema, strict: true } };
  }

  private prompt(side: Side): PromptTemplate {
    let p = this.prompts.get(side);
    if (!p) {
      p = loadPromptTemplate(side, this.options.promptDir);
      this.prompts.set(side, p);
    }
    return p;
  }

  /** Worked examples of a side from now on (replacing the prompt file's; an empty list restores them). */
  setExamples(side: Side, examples: readonly PromptExample[]): void {
    this.examples = { ...this.examples, [side]: examples };
  }

  /** The chat messages for one input without a search context (what rollouts record). */
  promptFor(side: Side, input: GenerateInput): ChatMessage[] {
    return renderPrompt(this.prompt(side), input, [], this.keywordLimit, this.examples?.[side]);
  }

  /** The chat messages that would be sent for one input. */
  async messages(side: Side, input: GenerateInput): Promise<ChatMessage[]> {
    const ctx = side === 'query' && this.searchContext ? await this.searchContext(input) : [];
    return renderPrompt(this.prompt(side), input, ctx, this.keywordLimit, this.examples?.[side]);
  }

  /** Every input's samples, or the first failure once every input has settled. */
  async generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]> {
    const settled = await this.generateSettled(side, inputs, opts);
    const failed = settled.find((r) => !r.ok);
    if (failed && !failed.ok) throw failed.error;
    return settled.map((r) => (r.ok ? r.samples : []));
  }

  /**
   * Per input (same order) its samples or its error. Once an input fails on the endpoint
   * (retries exhausted on time-outs, connection errors, 429 or 5xx), requests not yet sent
   * are not sent: their inputs fail naming that input; answers already in are kept.
   */
  async generateSettled(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<SettledSamples[]> {
    if (!Number.isInteger(opts.samples) || opts.samples < 1)
      throw cogrError('INVALID_ARGUMENT', `samples must be a positive integer, got ${opts.samples}`);
    if (!(opts.temperature >= 0)) throw cogrError('INVALID_ARGUMENT', `temperature must be ≥ 0, got ${opts.temperature}`);
    const batch: BatchState = {};
    return Promise.all(
      inputs.map((input) =>
        this.generateOne(side, input, opts, batch).then(
          (samples): SettledSamples => ({ ok: true, samples }),
          (e: unknown): SettledSamples => ({ ok: false, error: e instanceof Error ? e : new Error(String(e)) }),
        ),
      ),
    );
  }

  private cacheKey(side: Side, messages: ChatMessage[], opts: GenerateOptions, index: number): string {
    const h = createHash('sha256');
    h.update(
      JSON.stringify([
        this.options.model,
        side,
        messages,
        opts.temperature,
        opts.topP ?? null,
        this.options.maxTokens,
        opts.seed ?? null,
        this.options.logprobs,
        // The schema asked for (its bounds) shapes the answer.
        this.options.structured === 'auto' ? this.responseFormat.json_schema.schema : null,
        index,
      ]),
    );
    return 'gen:' + h.digest('hex');
  }

  private toSample(c: Choice): KeywordSample {
    this.usage.samples++;
    const truncated = c.finishReason === 'length';
    if (truncated) this.usage.truncated++;
    const cut = truncated ? { truncated: true as const } : {};
    if (c.anomaly !== undefined) {
      this.usage.formatFailures++;
      return { keywords: [], logProb: c.logProb, format: 'invalid_format', raw: c.content, anomaly: c.anomaly, ...cut };
    }
    const p = parseKeywordOutput(c.content);
    if (!p.ok) {
      this.usage.formatFailures++;
      return { keywords: [], logProb: c.logProb, format: 'invalid_format', raw: c.content, ...cut };
    }
    // Normalised and de-duplicated by the parser; over the limit is left to the layered reward's budget layer.
    return { keywords: p.keywords.slice(0, this.options.kMax * 4), logProb: c.logProb, format: 'ok', raw: c.content, ...cut };
  }

  private async generateOne(side: Side, input: GenerateInput, opts: GenerateOptions, batch: BatchState): Promise<KeywordSample[]> {
    const messages = await this.messages(side, input);
    const out: (Choice | undefined)[] = Array.from({ length: opts.samples }, () => undefined);
    const keys = Array.from({ length: opts.samples }, (_, s) => this.cacheKey(side, messages, opts, s));
    if (this.cache) {
      for (let s = 0; s < opts.samples; s++) {
        const hit = CachedChoiceSchema.safeParse(await this.cache.get(keys[s]));
        if (hit.success) {
          out[s] = hit.data;
          this.usage.cacheHits++;
        }
      }
    }
    let missing = out.map((c, s) => (c ? -1 : s)).filter((s) => s >= 0);
    while (missing.length > 0) {
      const n = this.multiOk ? missing.length : 1;
      // The deadline of a request is armed inside request(), once it has a slot: time in this queue never counts.
      const choices = await this.sem.run(() => this.request(messages, opts, n, missing[0], input.id, batch));
      if (this.multiOk && n > 1 && choices.length < n) {
        this.multiOk = false;
        this.logger.info('LLM endpoint returned fewer choices than n; using repeated requests', { endpoint: this.options.baseURL });
      }
      const take = Math.min(choices.length, missing.length);
      for (let j = 0; j < take; j++) {
        const s = missing[j];
        out[s] = choices[j];
        // Model output only: a choice without text is a protocol anomaly, asked again next time.
        if (this.cache && choices[j].anomaly === undefined) {
          const c = choices[j];
          await this.cache.put(keys[s], {
            content: c.content,
            logProb: c.logProb,
            ...(c.finishReason !== undefined ? { finishReason: c.finishReason } : {}),
          });
        }
      }
      if (take === 0)
        throw cogrError('LLM_ERROR', `LLM endpoint ${this.options.baseURL} returned no choices`, { endpoint: this.options.baseURL });
      missing = missing.slice(take);
    }
    return out.map((c) => this.toSample(c!));
  }

  private async request(
    messages: ChatMessage[],
    opts: GenerateOptions,
    n: number,
    firstIndex: number,
    inputId: string,
    batch: BatchState,
  ): Promise<Choice[]> {
    const endpoint = this.options.baseURL;
    let lastStatus = 'none';
    for (let attempt = 0; ; attempt++) {
      if (opts.signal?.aborted) throw cogrError('ABORTED', 'generation cancelled');
      if (batch.broken) {
        const b = batch.broken;
        throw attempt === 0
          ? cogrError(
              'LLM_ERROR',
              `not sent: the LLM endpoint ${endpoint} failed on input ${JSON.stringify(b.inputId)} (${b.error.message})`,
              { endpoint, notSent: true, failedOn: b.inputId },
            )
          : cogrError(
              'LLM_ERROR',
              `LLM endpoint ${endpoint} failed after ${attempt} attempt(s): last status ${lastStatus}; not retried, as it failed on input ${JSON.stringify(b.inputId)} too`,
              {
                endpoint,
                status: lastStatus,
                attempts: attempt,
                failedOn: b.inputId,
              },
            );
      }
      const structured = this.structuredOk;
      const body: Record<string, unknown> = {
        model: this.options.model,
        messages,
        temperature: opts.temperature,
        max_tokens: this.options.maxTokens,
      };
      if (opts.topP !== undefined) body.top_p = opts.topP;
      if (n > 1) body.n = n;
      if (opts.seed !== undefined) body.seed = deriveSeed(opts.seed, firstIndex) & 0x7fffffff;
      if (structured) body.response_format = this.responseFormat;
      if (this.options.logprobs) body.logprobs = true;
      this.usage.requests++;
      // This attempt's deadline: armed now, as the request is sent, and covering the body to its last byte.
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(), this.options.timeoutMs);
      const signal = opts.signal ? AbortSignal.any([opts.signal, deadline.signal]) : deadline.signal;
      try {
        let res: OpenAI.Chat.Completions.ChatCompletion;
        try {
          res = (await this.client.chat.completions.create(
            body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming,
            {
              signal,
            },
          )) as OpenAI.Chat.Completions.ChatCompletion;
        } finally {
          clearTimeout(timer);
        }
        // The client hands back the text of a non-JSON body (or throws a SyntaxError when it claims to be JSON).
        if (typeof res !== 'object' || res === null) throw new NotACompletion('HTTP 200 with a body that is not JSON');
        if (!Array.isArray(res.choices)) throw new NotACompletion('HTTP 200 with JSON that is not a chat completion (no choices)');
        if (res.usage) {
          this.usage.promptTokens += res.usage.prompt_tokens ?? 0;
          this.usage.completionTokens += res.usage.completion_tokens ?? 0;
          this.usage.totalTokens += res.usage.total_tokens ?? 0;
        }
        const choices = [...res.choices].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
        return choices.map((c) => {
          const lp = c.logprobs?.content;
          const logProb = Array.isArray(lp) && lp.length > 0 ? lp.reduce((a, t) => a + (t.logprob ?? 0), 0) : null;
          const anomaly = choiceAnomaly(c.message as unknown);
          const fr = typeof c.finish_reason === 'string' ? { finishReason: c.finish_reason as string } : {};
          return anomaly === undefined
            ? { content: c.message.content as string, logProb, ...fr }
            : { content: '', logProb, anomaly, ...fr };
        });
      } catch (e) {
        this.usage.failures++;
        if (opts.signal?.aborted) throw cogrError('ABORTED', 'generation cancelled', undefined, e);
        let retryable = false;
        let retryAfterMs = 0;
        if (deadline.signal.aborted || e instanceof OpenAI.APIConnectionTimeoutError) {
          // Our deadline (whatever the client made of the abort: before the headers or while reading the body).
          lastStatus = `time-out after ${this.options.timeoutMs} ms`;
          retryable = true;
        } else if (e instanceof OpenAI.APIUserAbortError) {
          throw cogrError('ABORTED', 'generation cancelled', undefined, e);
        } else if (e instanceof NotACompletion) {
          lastStatus = e.message;
          retryable = true;
        } else if (e instanceof SyntaxError) {
          lastStatus = 'HTTP 200 with a body that is not JSON';
          retryable = true;
        } else if (e instanceof OpenAI.APIConnectionError) {
          lastStatus = `connection error (${e.message})`;
          retryable = true;
        } else if (e instanceof OpenAI.APIError) {
          const st = e.status ?? 0;
          lastStatus = `HTTP ${st}`;
          // A 400 about the prompt's length (a context check such as cogr llm serve's or vLLM's) is not a refusal of the schema.
          const aboutPrompt = st === 400 && (CONTEXT_400.test(e.message) || (e as { param?: unknown }).param === 'messages');
          if (aboutPrompt) lastStatus = `HTTP 400 (${e.message.replace(/^400\s*/, '').slice(0, 300)})`;
          if (st === 400 && structured && !aboutPrompt) {
            this.structuredOk = false;
            this.logger.info('LLM endpoint rejected response_format json_schema; falling back to plain text', { endpoint });
            attempt--; // the fallback is not a retry
            continue;
          }
          retryable = st === 429 || st === 408 || st >= 500;
          const ra = Number(e.headers?.get?.('retry-after'));
          if (Number.isFinite(ra) && ra > 0) retryAfterMs = ra * 1000;
        } else {
          throw e;
        }
        if (!retryable || attempt >= this.options.maxRetries || batch.broken) {
          const hint = lastStatus.startsWith('time-out')
            ? ` (the deadline counts from sending and covers the whole answer; ${TIMEOUT_HINT})`
            : '';
          const error = cogrError(
            'LLM_ERROR',
            `LLM endpoint ${endpoint} failed after ${attempt + 1} attempt(s): last status ${lastStatus}${retryable ? '' : ' (not retryable)'}${hint}`,
            { endpoint, status: lastStatus, attempts: attempt + 1 },
            e,
          );
          // The endpoint itself failed (not this input): requests not yet sent are not sent. Set before this slot is released.
          if (retryable) batch.broken ??= { inputId, error };
          throw error;
        }
        this.usage.retries++;
        const backoff = Math.min(this.options.retryMaxMs, this.options.retryBaseMs * 2 ** attempt);
        const delay = Math.min(this.options.retryMaxMs, Math.max(backoff * (0.5 + 0.5 * this.jitter()), retryAfterMs));
        this.logger.debug('LLM request failed; retrying', {
          endpoint,
          status: lastStatus,
          attempt: attempt + 1,
          delayMs: Math.round(delay),
        });
        await sleep(delay, opts.signal);
      }
    }
  }
}
