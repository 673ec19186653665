/**
 * Prompt files (generators/prompts/<side>.md), read at run time so that users can read
 * and change them. Syntax:
 * - lines starting with `%%` are comments and are dropped;
 * - a line `=== user ===` separates the system message (above) from the user message;
 * - `{{name}}` placeholders are replaced: `query`, `title`, `text`, `k_max`,
 *   `search_context`; an unknown placeholder is an error (so typos do not go unnoticed);
 * - an optional line `=== examples ===` after the user message starts the worked examples,
 *   one JSON object a line, `{"text", "title"?, "keywords": [...]}`: each becomes a user
 *   turn (the user message filled with the example's input) and an assistant turn
 *   (`{"keywords": [...]}`) before the real input. Small models need them to answer in the
 *   shape asked for; a caller may give its own (drawn from training queries' targets),
 *   which replace the file's.
 * Item input is cut to ITEM_TEXT_BUDGET characters (title to TITLE_BUDGET) before it is
 * placed in the prompt; query input to QUERY_TEXT_BUDGET.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cogrError, schemaError } from '../index/core/errors.ts';
import type { Side } from '../index/core/types.ts';
import { K_MAX } from '../index/core/defaults.ts';
import { packageRoot } from '../index/core/paths.ts';
import type { GenerateInput } from './types.ts';

export const ITEM_TEXT_BUDGET = 2000;
/** The item text budget of a compact prompt (renderPrompt's 'compact'): a fine-tuned small model is trained and asked with short prompts. */
const COMPACT_ITEM_TEXT_BUDGET = 600;
export const TITLE_BUDGET = 300;
export const QUERY_TEXT_BUDGET = 1000;

/** The shipped prompts (generators/prompts/ in the package, also when running from dist/). */
export const DEFAULT_PROMPT_DIR = join(packageRoot(), 'generators', 'prompts');

/** A worked example: an input and the keywords it should get. */
export interface PromptExample {
  text: string;
  title?: string;
  keywords: readonly string[];
}

export interface PromptTemplate {
  side: Side;
  path: string;
  system: string;
  user: string;
  examples: PromptExample[];
}

const ExampleSchema = z.object({ text: z.string().min(1), title: z.string().optional(), keywords: z.array(z.string().min(1)).min(1) });

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

const SEPARATOR = '=== user ===';
const EXAMPLES = '=== examples ===';

export function parsePromptTemplate(side: Side, path: string, source: string): PromptTemplate {
  const lines = source
    .split(/\r?\n/)
    .map((l, i) => ({ l, n: i + 1 }))
    .filter(({ l }) => !l.startsWith('%%'));
  const at = lines.findIndex(({ l }) => l.trim() === SEPARATOR);
  if (at < 0) throw cogrError('DATA_FORMAT', `prompt file ${path} has no "${SEPARATOR}" line separating system and user messages`);
  const ex = lines.findIndex(({ l }) => l.trim() === EXAMPLES);
  if (ex >= 0 && ex < at) throw cogrError('DATA_FORMAT', `prompt file ${path}: "${EXAMPLES}" must come after "${SEPARATOR}"`);
  const userLines = lines.slice(at + 1, ex < 0 ? undefined : ex);
  const examples: PromptExample[] = [];
  for (const { l, n } of ex < 0 ? [] : lines.slice(ex + 1)) {
    if (l.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(l);
    } catch (e) {
      throw cogrError('DATA_FORMAT', `prompt file ${path}:${n}: an example is one JSON object a line (${(e as Error).message})`);
    }
    const r = ExampleSchema.safeParse(v);
    if (!r.success)
      throw schemaError('DATA_FORMAT', r.error, { what: `prompt file ${path}:${n}: an example is {"text", "title"?, "keywords": [...]}` });
    examples.push(r.data);
  }
  return {
    side,
    path,
    system: lines
      .slice(0, at)
      .map(({ l }) => l)
      .join('\n')
      .trim(),
    user: userLines
      .map(({ l }) => l)
      .join('\n')
      .trim(),
    examples,
  };
}

export function loadPromptTemplate(side: Side, dir: string = DEFAULT_PROMPT_DIR): PromptTemplate {
  const path = join(dir, `${side}.md`);
  let source: string;
  try {
    source = readFileSync(path, 'utf8');
  } catch (e) {
    throw cogrError('DATA_MISSING', `prompt file ${path} cannot be read: ${(e as Error).message}`);
  }
  return parsePromptTemplate(side, path, source);
}

function cut(s: string, n: number): string {
  return s.length <= n ? s : s.slice(0, n);
}

function fill(t: string, vars: Record<string, string>, path: string): string {
  return t.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (_, name: string) => {
    if (!(name in vars)) throw cogrError('DATA_FORMAT', `prompt file ${path} uses unknown placeholder {{${name}}}`);
    return vars[name];
  });
}

/**
 * The paper's "+ search results" context of a query prompt: the titles of the top items for
 * the query and, optionally, keywords of the index that retrieve them (the query planner's
 * greedy plan).
 */
export interface SearchContext {
  items: readonly string[];
  keywords?: readonly string[];
}

/** The `{{search_context}}` text: empty without a context. */
export function renderSearchContext(c: readonly string[] | SearchContext): string {
  const ctx: SearchContext = Array.isArray(c) ? { items: c as readonly string[] } : (c as SearchContext);
  const parts: string[] = [];
  if (ctx.items.length)
    parts.push('Top search results for this query:\n' + ctx.items.map((s, i) => `${i + 1}. ${cut(s, TITLE_BUDGET)}`).join('\n'));
  if (ctx.keywords && ctx.keywords.length)
    parts.push('Index keywords that retrieve them: ' + ctx.keywords.map((k) => cut(k, 100)).join('; '));
  return parts.join('\n');
}

function promptVars(
  input: { text: string; title?: string },
  ctx: string,
  kMax: number,
  textBudget = ITEM_TEXT_BUDGET,
): Record<string, string> {
  return {
    query: cut(input.text, QUERY_TEXT_BUDGET),
    title: cut(input.title ?? '', TITLE_BUDGET),
    text: cut(input.text, textBudget),
    k_max: String(kMax),
    search_context: ctx,
  };
}

function userMessage(t: PromptTemplate, input: { text: string; title?: string }, ctx: string, kMax: number, textBudget?: number): string {
  return fill(t.user, promptVars(input, ctx, kMax, textBudget), t.path).replace(/\n{3,}/g, '\n\n');
}

/**
 * The chat messages for one input: the system message, a user and an assistant turn per
 * worked example (`examples` when given and non-empty, else the prompt file's), then the
 * input; `searchContext` gives top search results (query side; examples get none). An
 * example's keywords are cut to `kMax`, so it never shows more than the schema allows; an
 * example whose input is this input is left out.
 */
export function renderPrompt(
  t: PromptTemplate,
  input: GenerateInput,
  searchContext: readonly string[] | SearchContext = [],
  kMax = K_MAX,
  /**
   * The worked examples shown (default, or empty: the template's); 'none': no example (a
   * model fine-tuned on the task needs none); 'compact': the user message alone, no system
   * message and no example, the item text cut to 600 characters (what the TRL recipe trains
   * and asks a small model with: every prompt token costs a forward and a backward pass).
   */
  examples?: readonly PromptExample[] | 'none' | 'compact',
): ChatMessage[] {
  if (examples === 'compact')
    return [{ role: 'user', content: userMessage(t, input, renderSearchContext(searchContext), kMax, COMPACT_ITEM_TEXT_BUDGET) }];
  // An example is never the input itself (its own target would be the answer).
  const shots = (examples === 'none' ? [] : examples !== undefined && examples.length > 0 ? examples : t.examples).filter(
    (e) => e.text !== input.text || (e.title ?? '') !== (input.title ?? ''),
  );
  const ctx = renderSearchContext(searchContext);
  const out: ChatMessage[] = [{ role: 'system', content: fill(t.system, promptVars(input, ctx, kMax), t.path) }];
  for (const e of shots) {
    out.push({ role: 'user', content: userMessage(t, e, '', kMax) });
    out.push({ role: 'assistant', content: JSON.stringify({ keywords: e.keywords.slice(0, kMax) }) });
  }
  out.push({ role: 'user', content: userMessage(t, input, ctx, kMax) });
  return out;
}
