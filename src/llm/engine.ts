/**
 * What `cogr llm serve` needs from a model: count a chat's prompt tokens and complete a
 * chat, one at a time. `llama.ts` implements it on node-llama-cpp; tests may give their own.
 */
export interface EngineMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

export interface CompletionParams {
  temperature: number;
  topP: number;
  maxTokens: number;
  /** Seed of this choice's sampling (none: the engine's own random draw). */
  seed?: number;
  stop: readonly string[];
  /** A JSON schema the answer must follow (compiled to a grammar), or 'json' for any JSON object. */
  format?: { kind: 'json_schema'; schema: Record<string, unknown> } | { kind: 'json' };
}

export interface Completion {
  text: string;
  /** stop: the model ended (end of text, a stop string, the grammar closed); length: max_tokens reached. */
  finishReason: 'stop' | 'length';
  completionTokens: number;
}

export interface Engine {
  /** The model's id (GET /v1/models). */
  readonly id: string;
  /** Tokens of context: prompt + max_tokens must fit. */
  readonly contextSize: number;
  readonly threads: number;
  /** Tokens of the chat as the model sees it (its chat template applied). */
  promptTokens(messages: readonly EngineMessage[]): number;
  /** One completion; rejects when `signal` aborts (the caller knows why). A schema the grammar compiler refuses rejects with an InvalidFormat. */
  complete(messages: readonly EngineMessage[], params: CompletionParams, signal: AbortSignal): Promise<Completion>;
  close(): Promise<void>;
}

/** A response_format the engine cannot compile (a 400 naming it). */
export class InvalidFormat extends Error {}
