/**
 * The node-llama-cpp engine of `cogr llm serve`. node-llama-cpp is imported here only, and
 * this module only by `cogr llm serve` (lazily), so no other command pays for loading it.
 * It never builds or downloads anything: the prebuilt CPU binary (`build: 'never'`,
 * `gpu: false`, `skipDownload`), a local GGUF file, one context with one sequence and
 * `threads` threads (default 1: on a shared machine two threads collapse to a few
 * tokens/s beside other load). Grammars from JSON schemas are compiled once per schema.
 */
import type { ChatHistoryItem, Llama, LlamaChat, LlamaContext, LlamaGrammar, LlamaModel } from 'node-llama-cpp';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import { InvalidFormat, type Completion, type CompletionParams, type Engine, type EngineMessage } from './engine.ts';

export interface LlamaEngineOptions {
  modelPath: string;
  id: string;
  threads: number;
  contextSize: number;
  log: Logger;
}

/** Compiled grammars kept at most (distinct schemas are few: one per side and bound). */
const GRAMMAR_CACHE = 32;

function history(messages: readonly EngineMessage[]): ChatHistoryItem[] {
  const out: ChatHistoryItem[] = messages.map((m): ChatHistoryItem =>
    m.role === 'system'
      ? { type: 'system', text: m.content }
      : m.role === 'user'
        ? { type: 'user', text: m.content }
        : { type: 'model', response: [m.content] },
  );
  out.push({ type: 'model', response: [] });
  return out;
}

class LlamaEngine implements Engine {
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  constructor(
    readonly id: string,
    readonly threads: number,
    private readonly llama: Llama,
    private readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly chat: LlamaChat,
  ) {}

  get contextSize(): number {
    return this.context.contextSize;
  }

  promptTokens(messages: readonly EngineMessage[]): number {
    const { contextText } = this.chat.chatWrapper.generateContextState({ chatHistory: history(messages) });
    return contextText.tokenize(this.model.tokenizer).length;
  }

  private grammar(format: NonNullable<CompletionParams['format']>): Promise<LlamaGrammar> {
    const key = format.kind === 'json' ? 'json' : JSON.stringify(format.schema);
    let g = this.grammars.get(key);
    if (!g) {
      const compile = () =>
        format.kind === 'json' ? this.llama.getGrammarFor('json') : this.llama.createGrammarForJsonSchema(format.schema as never);
      // A schema refused synchronously or asynchronously is the same 400.
      g = Promise.resolve()
        .then(compile)
        .catch((e: unknown) => {
          this.grammars.delete(key);
          throw new InvalidFormat(`response_format: the JSON schema cannot be compiled to a grammar (${(e as Error).message})`);
        });
      if (this.grammars.size >= GRAMMAR_CACHE) this.grammars.delete(this.grammars.keys().next().value as string);
      this.grammars.set(key, g);
    }
    return g;
  }

  async complete(messages: readonly EngineMessage[], p: CompletionParams, signal: AbortSignal): Promise<Completion> {
    const grammar = p.format ? await this.grammar(p.format) : undefined;
    const meter = this.chat.sequence.tokenMeter;
    const before = meter.usedOutputTokens;
    const r = await this.chat.generateResponse(history(messages), {
      ...(grammar ? { grammar } : {}),
      temperature: p.temperature,
      topP: p.topP,
      maxTokens: p.maxTokens,
      ...(p.seed !== undefined ? { seed: p.seed } : {}),
      ...(p.stop.length > 0 ? { customStopTriggers: [...p.stop] } : {}),
      signal,
      stopOnAbortSignal: false,
    });
    return {
      text: r.response,
      finishReason: r.metadata.stopReason === 'maxTokens' ? 'length' : 'stop',
      completionTokens: meter.usedOutputTokens - before,
    };
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
    await this.llama.dispose();
  }
}

/** Load a GGUF file on the prebuilt CPU binary: never a build, never a download. */
export async function loadLlamaEngine(o: LlamaEngineOptions): Promise<Engine> {
  const t0 = Date.now();
  let lib: typeof import('node-llama-cpp');
  try {
    lib = await import('node-llama-cpp');
  } catch (e) {
    throw cogrError('INTERNAL', `node-llama-cpp cannot be loaded (${(e as Error).message}): run npm ci`, undefined, e);
  }
  let llama: Llama;
  try {
    llama = await lib.getLlama({
      gpu: false,
      build: 'never',
      usePrebuiltBinaries: true,
      skipDownload: true,
      progressLogs: false,
      maxThreads: o.threads,
      logLevel: lib.LlamaLogLevel.error,
    });
  } catch (e) {
    throw cogrError(
      'INTERNAL',
      `node-llama-cpp has no prebuilt binary for this machine (${(e as Error).message}); cogr never compiles llama.cpp: point cogr at another OpenAI-compatible server instead (docs/llm.md)`,
      undefined,
      e,
    );
  }
  let model: LlamaModel;
  try {
    model = await llama.loadModel({ modelPath: o.modelPath });
  } catch (e) {
    await llama.dispose();
    throw cogrError(
      'DATA_FORMAT',
      `model file ${o.modelPath} cannot be loaded as a GGUF model (${(e as Error).message})`,
      { path: o.modelPath },
      e,
    );
  }
  const contextSize = Math.min(o.contextSize, model.trainContextSize);
  const context = await model.createContext({ contextSize, sequences: 1, threads: o.threads });
  const chat = new lib.LlamaChat({ contextSequence: context.getSequence() });
  o.log.info('model loaded', {
    model: o.id,
    seconds: Math.round((Date.now() - t0) / 100) / 10,
    contextSize: context.contextSize,
    threads: o.threads,
    chatTemplate: chat.chatWrapper.wrapperName,
  });
  return new LlamaEngine(o.id, o.threads, llama, model, context, chat);
}
