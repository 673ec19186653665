/**
 * One item generation as an OpenSearch index, and cogr's search on it.
 *
 * The index (strict mapping, `dynamic: strict`):
 *   keys      keyword   the item's match keys exactly as cogr's analyzer made them (S_e ∪ {self_e});
 *                       the CoGR match rule is a `terms` filter on the query's keys
 *   words     text      the item's keyword-bag words (each word tf times), split on white space
 *                       only (cogr already analysed them), scored with BM25 at cogr's k1 and b
 *   self, keywords      keyword, not indexed: the surface forms, for display
 *   title     text      the dataset's title, when known (display)
 *   fields.*  keyword | double   the dataset's item fields, double when every value is a number
 * Its `_meta.cogr` records the database, run, round, generation and the generation's digest
 * (SHA-256 over its published files' SHA-256s), the analyzer and BM25 parameters; a
 * re-export of the generation the alias already serves is a no-op.
 *
 * Search: `bool { filter: terms(keys), should: match(words) }` with dfs_query_then_fetch
 * (collection-wide statistics across shards), ties by id as cogr breaks them. Scores are
 * Lucene's BM25 times (k1 + 1), the factor cogr's formula keeps (index/text/bm25.ts);
 * Lucene encodes document lengths in one byte, so they are close to cogr's, not equal.
 */
import { createHash } from 'node:crypto';
import { DEFAULTS } from '../../index/core/defaults.ts';
import { cogrError, isCogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { AnalyzerName } from '../../index/text/analyzer.ts';
import { keywordWords, sharedKeywordNormalizer } from '../../index/text/normalize.ts';
import { PublishedIndex } from '../../index/store/published.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { OpenSearchNodes } from './client.ts';

export const META_FORMAT = 'cogr-opensearch-index';
/** Lucene's limit on one indexed term, in UTF-8 bytes. */
const MAX_TERM_BYTES = 32_766;

export interface IndexMeta {
  format: typeof META_FORMAT;
  version: 1;
  db: string;
  dataset: string | null;
  round: number | null;
  side: 'item';
  generation: number;
  digest: string;
  analyzer: AnalyzerName;
  k1: number;
  b: number;
  items: number;
  exportedAt: string;
}

/** The digest of a published generation: SHA-256 over its files' names and SHA-256s. */
export async function generationDigest(dbPath: string, generation: number): Promise<string> {
  const m = await new PublishedIndex(dbPath).manifest('item', generation);
  const h = createHash('sha256');
  for (const f of m.files) h.update(`${f.name}\u0000${f.sha256}\n`);
  return h.digest('hex');
}

/** Field name → OpenSearch type: double when every value is a finite number, keyword otherwise. */
export function fieldTypes(fields: ReadonlyMap<string, Readonly<Record<string, string>>>): Map<string, 'double' | 'keyword'> {
  const out = new Map<string, 'double' | 'keyword'>();
  for (const rec of fields.values())
    for (const [name, value] of Object.entries(rec)) {
      if (name === '' || name.includes('.') || name.startsWith('_'))
        throw cogrError(
          'INVALID_ARGUMENT',
          `item field '${name}': OpenSearch field names may not be empty, contain '.' or start with '_'`,
          {
            field: name,
          },
        );
      const numeric = value.trim() !== '' && Number.isFinite(Number(value));
      if (!numeric) out.set(name, 'keyword');
      else if (!out.has(name)) out.set(name, 'double');
    }
  return out;
}

/** The index body: settings (shards, replicas, the BM25 similarity, the white-space analyzer) and the strict mapping. */
function indexBody(
  meta: IndexMeta,
  types: ReadonlyMap<string, 'double' | 'keyword'>,
  hasTitles: boolean,
  shape: { shards: number; replicas: number },
) {
  const fieldProps: Record<string, unknown> = {};
  for (const [name, type] of types) fieldProps[name] = { type };
  return {
    settings: {
      index: {
        number_of_shards: shape.shards,
        number_of_replicas: shape.replicas,
        max_result_window: Math.max(10_000, meta.items),
        refresh_interval: '-1',
        similarity: { cogr_bm25: { type: 'BM25', k1: meta.k1, b: meta.b } },
        analysis: {
          tokenizer: { cogr_space: { type: 'whitespace', max_token_length: 16_384 } },
          analyzer: { cogr_words: { type: 'custom', tokenizer: 'cogr_space', filter: [] } },
        },
      },
    },
    mappings: {
      dynamic: 'strict',
      _meta: { cogr: meta },
      properties: {
        id: { type: 'keyword' },
        keys: { type: 'keyword' },
        words: { type: 'text', analyzer: 'cogr_words', similarity: 'cogr_bm25', index_options: 'freqs' },
        self: { type: 'keyword', index: false, doc_values: false },
        keywords: { type: 'keyword', index: false, doc_values: false },
        ...(hasTitles ? { title: { type: 'text', index: false } } : {}),
        ...(types.size > 0 ? { fields: { type: 'object', dynamic: 'strict', properties: fieldProps } } : {}),
      },
    },
  };
}

export interface ItemDoc {
  id: string;
  keys: string[];
  words: string;
  self: string;
  keywords: string[];
  title?: string;
  fields?: Record<string, string | number>;
}

/** Entity `e` of the view as its document: its posted keys and its bag's words (each tf times). */
export function itemDoc(
  view: KeywordView,
  e: number,
  title: string | undefined,
  fields: Readonly<Record<string, string>> | undefined,
  types: ReadonlyMap<string, 'double' | 'keyword'>,
): ItemDoc {
  const d = view.data;
  const keys: string[] = [];
  for (let j = d.fwdOff[e]; j < d.fwdOff[e + 1]; j++) keys.push(view.keyword(d.fwd[j]));
  if (d.self[e] >= 0 && !keys.includes(view.keyword(d.self[e]))) keys.push(view.keyword(d.self[e]));
  const id = view.id(e);
  for (const k of keys)
    if (Buffer.byteLength(k) > MAX_TERM_BYTES)
      throw cogrError('INVALID_ARGUMENT', `item ${id}: a match key is ${Buffer.byteLength(k)} bytes, over Lucene's ${MAX_TERM_BYTES}`, {
        id,
      });
  const words: string[] = [];
  for (let j = d.bagOff[e]; j < d.bagOff[e + 1]; j++) {
    const w = view.word(d.bagWord[j]);
    for (let t = 0; t < d.bagTf[j]; t++) words.push(w);
  }
  const doc: ItemDoc = { id, keys, words: words.join(' '), self: view.selfOf(e), keywords: view.keywordsOf(e) };
  if (title !== undefined) doc.title = title;
  if (fields && Object.keys(fields).length > 0) {
    doc.fields = {};
    for (const [k, v] of Object.entries(fields)) doc.fields[k] = types.get(k) === 'double' ? Number(v) : v;
  }
  return doc;
}

interface AliasState {
  /** The concrete index the alias points at, null when the alias does not exist. */
  index: string | null;
  meta: IndexMeta | null;
}

/** Which index an alias names and its cogr meta; INVALID_ARGUMENT when the name is a concrete index. */
export async function readAlias(os: OpenSearchNodes, alias: string): Promise<AliasState> {
  const got = await os.request<Record<string, { aliases?: Record<string, unknown> }>>(
    'GET',
    `/_alias/${encodeURIComponent(alias)}`,
    undefined,
    {
      allow404: true,
    },
  );
  const names = got.status === 404 ? [] : Object.keys(got.body ?? {});
  if (names.length === 0) {
    const concrete = await os.request('HEAD', `/${encodeURIComponent(alias)}`, undefined, { allow404: true });
    if (concrete.status !== 404)
      throw cogrError(
        'INVALID_ARGUMENT',
        `--index: '${alias}' is a concrete index, not an alias; cogr publishes through an alias (give another name)`,
        {
          index: alias,
        },
      );
    return { index: null, meta: null };
  }
  if (names.length > 1)
    throw cogrError(
      'INVALID_ARGUMENT',
      `--index: the alias '${alias}' points at ${names.length} indexes (${names.join(', ')}); cogr serves one`,
      {
        index: alias,
      },
    );
  const index = names[0];
  const mapping = await os.request<Record<string, { mappings?: { _meta?: { cogr?: unknown } } }>>(
    'GET',
    `/${encodeURIComponent(index)}/_mapping`,
  );
  const raw = mapping.body[index]?.mappings?._meta?.cogr as Partial<IndexMeta> | undefined;
  return { index, meta: raw && raw.format === META_FORMAT ? (raw as IndexMeta) : null };
}

export interface ExportOptions {
  os: OpenSearchNodes;
  alias: string;
  dbPath: string;
  dataset: string | null;
  round: number | null;
  view: KeywordView;
  titles: ReadonlyMap<string, string>;
  fields: ReadonlyMap<string, Readonly<Record<string, string>>>;
  shards: number;
  replicas: number;
  batchSize: number;
  /** Build a new index even when the alias already serves this generation. */
  force: boolean;
  log: Logger;
  /** Attempts of one batch's rejected documents (429, 503) before the export fails. */
  maxAttempts?: number;
}

export interface ExportResult {
  alias: string;
  index: string;
  previous: string | null;
  generation: number;
  digest: string;
  items: number;
  unchanged: boolean;
  retried: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One bulk action: a document indexed (added or replaced) or an id deleted. */
export type BulkAction = { index: ItemDoc } | { delete: string };

/**
 * One bulk request: actions rejected for load (429, 503) are sent again with back-off, any
 * other rejection (a delete of a missing id aside) is BACKEND_ERROR naming the item. Returns
 * how many actions were sent again.
 */
export async function bulk(
  os: OpenSearchNodes,
  index: string,
  actions: readonly BulkAction[],
  log: Logger,
  maxAttempts = 8,
): Promise<number> {
  let retried = 0;
  let pending = actions;
  for (let attempt = 1; pending.length > 0; attempt++) {
    const body = pending
      .map((a) =>
        'index' in a
          ? `${JSON.stringify({ index: { _id: a.index.id } })}\n${JSON.stringify(a.index)}\n`
          : `${JSON.stringify({ delete: { _id: a.delete } })}\n`,
      )
      .join('');
    const res = await os.request<{
      errors: boolean;
      items: Record<string, { _id: string; status: number; error?: { type: string; reason: string } }>[];
    }>('POST', `/${index}/_bulk`, body, { ndjson: true, timeoutMs: 120_000 });
    if (!res.body.errors) break;
    const again: BulkAction[] = [];
    res.body.items.forEach((it, i) => {
      const [op, r] = Object.entries(it)[0];
      if (r.status < 300 || (op === 'delete' && r.status === 404)) return;
      if (r.status === 429 || r.status === 503) again.push(pending[i]);
      else
        throw cogrError(
          'BACKEND_ERROR',
          `opensearch bulk: item ${r._id}: HTTP ${r.status} ${r.error?.type ?? ''}: ${r.error?.reason ?? ''}`,
          {
            id: r._id,
            status: r.status,
          },
        );
    });
    if (again.length === 0) break;
    if (attempt >= maxAttempts)
      throw cogrError('BACKEND_ERROR', `opensearch bulk: ${again.length} documents still rejected after ${attempt} attempts`);
    retried += again.length;
    log.warn('bulk: documents rejected, retrying', { rejected: again.length, attempt });
    await sleep(Math.min(10_000, 250 * 2 ** attempt));
    pending = again;
  }
  return retried;
}

/**
 * Create `index` (settings, strict mapping, `meta`) and bulk-load every entity of the view:
 * rejected documents (429, 503) sent again with back-off, then refresh, health and a count
 * check; a failed load deletes the index. Returns how many documents were sent again.
 */
export async function loadIndex(
  os: OpenSearchNodes,
  index: string,
  view: KeywordView,
  meta: IndexMeta,
  o: Pick<ExportOptions, 'titles' | 'fields' | 'shards' | 'replicas' | 'batchSize' | 'maxAttempts' | 'log'>,
): Promise<number> {
  const log = o.log;
  const types = fieldTypes(o.fields);
  await os.request('PUT', `/${index}`, indexBody(meta, types, o.titles.size > 0, { shards: o.shards, replicas: o.replicas }), {
    timeoutMs: 60_000,
  });
  log.info('index created', { index, shards: o.shards, replicas: o.replicas, generation: view.generation });
  let retried = 0;
  try {
    for (let start = 0; start < view.size; start += o.batchSize) {
      const end = Math.min(view.size, start + o.batchSize);
      const docs: BulkAction[] = [];
      for (let e = start; e < end; e++) {
        const id = view.id(e);
        docs.push({ index: itemDoc(view, e, o.titles.get(id), o.fields.get(id), types) });
      }
      retried += await bulk(os, index, docs, log, o.maxAttempts);
      log.info('bulk', { indexed: end, of: view.size });
    }
    await os.request('PUT', `/${index}/_settings`, { index: { refresh_interval: '1s' } });
    await os.request('POST', `/${index}/_refresh`, undefined, { timeoutMs: 60_000 });
    const health = await os.request<{ status: string; timed_out: boolean }>(
      'GET',
      `/_cluster/health/${index}?wait_for_status=${o.replicas === 0 ? 'green' : 'yellow'}&timeout=60s`,
      undefined,
      { timeoutMs: 70_000 },
    );
    if (health.body.timed_out)
      throw cogrError('BACKEND_ERROR', `opensearch: index ${index} has no active primary of every shard after 60 s`);
    const count = await os.request<{ count: number }>('GET', `/${index}/_count`);
    if (count.body.count !== view.size)
      throw cogrError('BACKEND_ERROR', `opensearch: index ${index} holds ${count.body.count} documents, the generation ${view.size}`);
  } catch (e) {
    // A half-loaded index is never aliased; remove it (best effort) so a retry starts clean.
    await os.request('DELETE', `/${index}`, undefined, { allow404: true }).catch(() => undefined);
    throw e;
  }
  return retried;
}

/** Export one generation: create the index, bulk-load it, check the count, swap the alias. */
export async function exportGeneration(o: ExportOptions): Promise<ExportResult> {
  const { os, alias, view, log } = o;
  const digest = await generationDigest(o.dbPath, view.generation);
  const before = await readAlias(os, alias);
  if (!o.force && before.meta?.digest === digest) {
    log.info('the alias already serves this generation: nothing to do', { alias, index: before.index, generation: view.generation });
    return {
      alias,
      index: before.index!,
      previous: before.index,
      generation: view.generation,
      digest,
      items: view.size,
      unchanged: true,
      retried: 0,
    };
  }
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').toLowerCase();
  const index = `${alias}-g${view.generation}-${digest.slice(0, 12)}-${stamp}`;
  const meta: IndexMeta = {
    format: META_FORMAT,
    version: 1,
    db: o.dbPath,
    dataset: o.dataset,
    round: o.round,
    side: 'item',
    generation: view.generation,
    digest,
    analyzer: view.analyzer.name,
    k1: DEFAULTS.bm25.k1,
    b: DEFAULTS.bm25.b,
    items: view.size,
    exportedAt: new Date().toISOString(),
  };
  const retried = await loadIndex(os, index, view, meta, o);
  const actions = [...(before.index ? [{ remove: { index: before.index, alias, must_exist: true } }] : []), { add: { index, alias } }];
  await os.request('POST', '/_aliases', { actions }, { timeoutMs: 60_000 });
  log.info('alias swapped', { alias, index, previous: before.index });
  return { alias, index, previous: before.index, generation: view.generation, digest, items: view.size, unchanged: false, retried };
}

export interface BackendHits {
  matched: number;
  items: { id: string; score: number }[];
}

/** The query's match keys and distinct words as cogr's view derives them (index/view/view.ts probeOrdinals). */
export function probeTerms(analyzer: AnalyzerName, self: string, keywords: readonly string[]): { keys: string[]; words: string[] } {
  const norm = sharedKeywordNormalizer(analyzer);
  const keys = new Set<string>();
  for (const raw of keywords) {
    const k = norm.key(raw);
    if (k !== null) keys.add(k);
  }
  const s = norm.selfKey(self);
  if (s.length > 0) keys.add(s);
  const words = new Set<string>();
  for (const k of keys) for (const w of keywordWords(k)) words.add(w);
  return { keys: [...keys], words: [...words] };
}

/** cogr's search on the index an alias names: matched set by the match rule, top k by BM25. */
export async function searchIndex(
  os: OpenSearchNodes,
  alias: string,
  meta: Pick<IndexMeta, 'analyzer' | 'k1' | 'items'>,
  probe: { self: string; keywords: readonly string[] },
  k: number,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<BackendHits> {
  const { keys, words } = probeTerms(meta.analyzer, probe.self, probe.keywords);
  if (keys.length === 0) return { matched: 0, items: [] };
  const body = {
    // No more than the index holds: OpenSearch refuses a size over its result window (max(10,000, items), set at export).
    size: Math.min(k, meta.items),
    track_total_hits: true,
    _source: false,
    query: {
      bool: {
        filter: [{ terms: { keys } }],
        ...(words.length > 0 ? { should: [{ match: { words: { query: words.join(' ') } } }] } : {}),
      },
    },
    sort: [{ _score: 'desc' }, { id: 'asc' }],
    track_scores: true,
  };
  return runSearch(os, alias, meta, body, opts);
}

/** The exception types OpenSearch names when a node a search was using went away (its transport layer's). */
const NODE_LOSS_TYPES = new Set([
  'node_disconnected_exception',
  'node_not_connected_exception',
  'node_closed_exception',
  'connect_transport_exception',
]);

/**
 * A search that failed because a node was lost while it ran: a 5xx answer (the client does
 * not fail 500s over) whose causes (client.ts: the root causes' and failed shards' exception
 * types) include a disconnected, unconnected or closed node — a node killed between a
 * search's query and fetch phases answers `search_phase_execution_exception` with a
 * `node_disconnected_exception` root cause. An answer that names no cause types (not
 * OpenSearch's JSON error) is judged by its reason's wording instead. A search reads only,
 * so it is safe to ask again.
 */
export function isNodeLoss(e: unknown): boolean {
  if (!isCogrError(e, 'BACKEND_ERROR')) return false;
  const status = e.details?.status;
  if (typeof status !== 'number' || status < 500) return false;
  const causes = e.details?.causes;
  if (Array.isArray(causes) && causes.length > 0) return causes.some((t) => typeof t === 'string' && NODE_LOSS_TYPES.has(t));
  return /disconnected|not connected|node[ _]?closed/i.test(e.message);
}

/**
 * One search body on the alias, its hits scaled to cogr's BM25 (× (k1 + 1)). A shard copy
 * lost mid-search (a node killed) answers 200 with failed shards, or 500 naming the lost
 * node (`isNodeLoss`): a partial matched set is never served; asked again (another node
 * coordinates; after a node-loss failure, 100 ms × the attempt later), three tries in all,
 * then an error.
 */
export async function runSearch(
  os: OpenSearchNodes,
  alias: string,
  meta: Pick<IndexMeta, 'k1'>,
  body: unknown,
  opts: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<BackendHits> {
  type Answer = {
    timed_out?: boolean;
    _shards?: { total: number; successful: number; failed: number };
    hits: { total: { value: number; relation: string } | number; hits: { _id: string; _score: number | null }[] };
  };
  let res: { body: Answer } | null = null;
  let partial = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    let r: { body: Answer };
    try {
      r = await os.request<Answer>('POST', `/${encodeURIComponent(alias)}/_search?search_type=dfs_query_then_fetch`, body, opts);
    } catch (e) {
      if (!isNodeLoss(e) || attempt === 2) throw e;
      partial = (e as Error).message;
      await new Promise((done) => setTimeout(done, 100 * (attempt + 1)));
      continue;
    }
    const sh = r.body._shards;
    if (!r.body.timed_out && (!sh || (sh.failed === 0 && sh.successful === sh.total))) {
      res = r;
      break;
    }
    partial = `${sh?.successful ?? '?'} of ${sh?.total ?? '?'} shards answered${r.body.timed_out ? ', timed out' : ''}`;
  }
  if (!res) throw cogrError('BACKEND_ERROR', `opensearch search on ${alias}: a partial answer three times (${partial})`, { index: alias });
  const total = res.body.hits.total;
  const matched = typeof total === 'number' ? total : total.value;
  return { matched, items: res.body.hits.hits.map((h) => ({ id: h._id, score: (h._score ?? 0) * (meta.k1 + 1) })) };
}
