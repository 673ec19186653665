/**
 * The keyword-generator interface shared by the LLM generator and the embedded policy.
 *
 * `generate(side, inputs, opts)` returns, per input (same order), `opts.samples` sampled
 * keyword sets: normalised (index/text/normalize.ts), de-duplicated, in generation order, each
 * with its log-probability where the generator can give it (null otherwise) and a format
 * verdict. An output that is not a keyword list is `format: 'invalid_format'` with an
 * empty keyword list, never an exception (the layered reward scores it).
 */
import type { Side } from '../index/core/types.ts';

export interface GenerateInput {
  id: string;
  /** Query text (query side) or item description (item side). */
  text: string;
  /** Item title (item side); ignored on the query side. */
  title?: string;
}

export interface GenerateOptions {
  /** Samples per input (GRPO group size G = 8 for rollouts; 1 for indexing). */
  samples: number;
  /** Sampling temperature: 1.0 for rollouts, 0.7 for indexing and evaluation (paper); 0 = greedy. */
  temperature: number;
  /** Nucleus sampling mass: 0.8 for indexing and evaluation (paper), none (1) for rollouts. */
  topP?: number;
  /** Seed for reproducible sampling (the embedded policy is exactly reproducible; LLM servers may ignore it). */
  seed?: number;
  signal?: AbortSignal;
}

export type SampleFormat = 'ok' | 'invalid_format';

export interface KeywordSample {
  keywords: string[];
  /** log P(sample) under the generator, null when it cannot be given. */
  logProb: number | null;
  format: SampleFormat;
  /** The raw model output (LLM only), kept for diagnostics. */
  raw?: string;
  /** LLM only: why the answer carried no model text (e.g. a null message content); such a sample is invalid_format and never cached. */
  anomaly?: string;
  /** LLM only: the answer ended at max_tokens (finish_reason "length"). */
  truncated?: boolean;
}

/** One input's outcome: its samples, or why it has none. */
export type SettledSamples = { ok: true; samples: KeywordSample[] } | { ok: false; error: Error };

export interface KeywordGenerator {
  readonly kind: string;
  generate(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<KeywordSample[][]>;
  /** Per input its samples or its error (a generator whose inputs can fail one by one, such as an LLM endpoint). */
  generateSettled?(side: Side, inputs: readonly GenerateInput[], opts: GenerateOptions): Promise<SettledSamples[]>;
}

/** Per input its samples or its error: the generator's own `generateSettled`, else `generate` (all or nothing). */
export async function generateSettled(
  gen: KeywordGenerator,
  side: Side,
  inputs: readonly GenerateInput[],
  opts: GenerateOptions,
): Promise<SettledSamples[]> {
  if (gen.generateSettled) return gen.generateSettled(side, inputs, opts);
  return (await gen.generate(side, inputs, opts)).map((samples): SettledSamples => ({ ok: true, samples }));
}

/** A persistent key → JSON value store (an abstract-level sublevel with json valueEncoding fits). */
export interface KeyValueStore {
  get(key: string): Promise<unknown | undefined>;
  put(key: string, value: unknown): Promise<void>;
}
