/**
 * Prompt files (generators/prompts/<side>.md), read at run time so that users can read
 * and change them. Syntax:
 * - lines starting with `%%` are comments and are dropped;
 * - a line `=== user ===` separates the system message (above) from the user message;
 * - `{{name}}` placeholders are replaced: `query`, `title`, `text`, `k_max`,
 *   `search_context`; an unknown placeholder is an error (so typos do not go unnoticed).
 * Item input is cut to ITEM_TEXT_BUDGET characters (title to TITLE_BUDGET) before it is
 * placed in the prompt; query input to QUERY_TEXT_BUDGET.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cogrError } from '../index/errors.ts';
import type { Side } from '../index/types.ts';
import { K_MAX } from '../index/defaults.ts';
import { packageRoot } from '../index/paths.ts';
import type { GenerateInput } from './types.ts';

export const ITEM_TEXT_BUDGET = 2000;
export const TITLE_BUDGET = 300;
export const QUERY_TEXT_BUDGET = 1000;

/** The shipped prompts (generators/prompts/ in the package, also when running from dist/). */
export const DEFAULT_PROMPT_DIR = join(packageRoot(), 'generators', 'prompts');

export interface PromptTemplate {
  side: Side;
  path: string;
  system: string;
  user: string;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

const SEPARATOR = '=== user ===';

export function parsePromptTemplate(side: Side, path: string, source: string): PromptTemplate {
  const lines = source.split(/\r?\n/).filter((l) => !l.startsWith('%%'));
  const at = lines.findIndex((l) => l.trim() === SEPARATOR);
  if (at < 0) throw cogrError('DATA_FORMAT', `prompt file ${path} has no "${SEPARATOR}" line separating system and user messages`);
  return { side, path, system: lines.slice(0, at).join('\n').trim(), user: lines.slice(at + 1).join('\n').trim() };
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
  if (ctx.items.length) parts.push('Top search results for this query:\n' + ctx.items.map((s, i) => `${i + 1}. ${cut(s, TITLE_BUDGET)}`).join('\n'));
  if (ctx.keywords && ctx.keywords.length) parts.push('Index keywords that retrieve them: ' + ctx.keywords.map((k) => cut(k, 100)).join('; '));
  return parts.join('\n');
}

/** The chat messages for one input; `searchContext` gives top search results (query side). */
export function renderPrompt(t: PromptTemplate, input: GenerateInput, searchContext: readonly string[] | SearchContext = [], kMax = K_MAX): ChatMessage[] {
  const ctx = renderSearchContext(searchContext);
  const vars: Record<string, string> = {
    query: cut(input.text, QUERY_TEXT_BUDGET),
    title: cut(input.title ?? '', TITLE_BUDGET),
    text: cut(input.text, ITEM_TEXT_BUDGET),
    k_max: String(kMax),
    search_context: ctx,
  };
  const user = fill(t.user, vars, t.path).replace(/\n{3,}/g, '\n\n');
  return [
    { role: 'system', content: fill(t.system, vars, t.path) },
    { role: 'user', content: user },
  ];
}
