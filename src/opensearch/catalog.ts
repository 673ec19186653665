/**
 * A catalog write applied to the index an alias names, atomically for searches (which go
 * through the alias): the index is cloned (OpenSearch's `_clone`: the same shards, hard
 * links, no reindexing; the source write-blocked first, as `_clone` requires), the write's
 * items indexed and deleted in the clone (fields the mapping lacks added first), the clone
 * refreshed and counted, its `_meta.cogr` set to the new generation, then the alias swapped
 * in one `_aliases` call. A search sees the generation before or all of the write, never a
 * part of it. A failure before the swap deletes the clone and lifts the write block; the
 * alias still serves the generation before. The index two writes back is deleted after a
 * swap (the one just replaced stays for searches still running on it).
 *
 * An alias that does not serve the write's base generation (another export swapped it)
 * gets the whole new generation instead (`exportGeneration`).
 */
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { KeywordView } from '../../index/view/view.ts';
import type { OpenSearchNodes } from './client.ts';
import { bulk, exportGeneration, fieldTypes, generationDigest, itemDoc, readAlias, type BulkAction, type IndexMeta } from './index.ts';

export interface CatalogWrite {
  generation: number;
  base: number;
  set: readonly string[];
  removed: readonly string[];
}

export interface CatalogSource {
  dbPath: string;
  /** The committed generation's view. */
  view: KeywordView;
  titles: ReadonlyMap<string, string>;
  fields: ReadonlyMap<string, Readonly<Record<string, string>>>;
}

/** Apply one committed catalog write to the alias; the meta the alias serves after. */
export async function applyCatalogWrite(
  os: OpenSearchNodes,
  alias: string,
  write: CatalogWrite,
  src: CatalogSource,
  log: Logger,
): Promise<IndexMeta> {
  if (src.view.generation !== write.generation)
    throw cogrError('INTERNAL', `the view of generation ${src.view.generation} cannot apply catalog write ${write.generation}`);
  const before = await readAlias(os, alias);
  if (!before.index || !before.meta || before.meta.generation !== write.base) {
    log.warn('the alias does not serve the catalog write’s base generation: exporting the whole generation', {
      alias,
      serves: before.meta?.generation ?? null,
      base: write.base,
    });
    await exportGeneration({
      os,
      alias,
      dbPath: src.dbPath,
      dataset: before.meta?.dataset ?? null,
      round: before.meta?.round ?? null,
      view: src.view,
      titles: src.titles,
      fields: src.fields,
      shards: 1,
      replicas: 0,
      batchSize: 1000,
      force: false,
      log,
    });
    return (await readAlias(os, alias)).meta!;
  }
  const source = before.index;
  const digest = await generationDigest(src.dbPath, write.generation);
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').toLowerCase();
  const target = `${alias}-g${write.generation}-${digest.slice(0, 12)}-${stamp}`;
  const meta: IndexMeta & { previous?: string } = {
    ...before.meta,
    generation: write.generation,
    digest,
    items: src.view.size,
    exportedAt: new Date().toISOString(),
    previous: source,
  };
  // The clone keeps the source's shape (`_clone` copies its shards, not its replica count).
  const settings = await os.request<Record<string, { settings?: { index?: { number_of_replicas?: string } } }>>(
    'GET',
    `/${source}/_settings`,
  );
  const replicas = Number(settings.body[source]?.settings?.index?.number_of_replicas ?? 1);
  await os.request('PUT', `/${source}/_settings`, { index: { blocks: { write: true } } });
  let cloned = false;
  try {
    await os.request(
      'POST',
      `/${source}/_clone/${target}?wait_for_active_shards=1`,
      { settings: { index: { number_of_replicas: replicas } } },
      { timeoutMs: 120_000 },
    );
    cloned = true;
    await os.request('PUT', `/${target}/_settings`, { index: { blocks: { write: null } } });
    // Field names the mapping (strict) does not know yet, then the write's documents.
    const mapping = await os.request<
      Record<string, { mappings?: { properties?: { title?: unknown; fields?: { properties?: Record<string, unknown> } } } }>
    >('GET', `/${target}/_mapping`);
    const props = mapping.body[target]?.mappings?.properties;
    const known = new Set(Object.keys(props?.fields?.properties ?? {}));
    if (!props?.title && write.set.some((id) => src.titles.has(id)))
      await os.request('PUT', `/${target}/_mapping`, { properties: { title: { type: 'text', index: false } } });
    const docFields = new Map<string, Readonly<Record<string, string>>>();
    for (const id of write.set) {
      const f = src.fields.get(id);
      if (f) docFields.set(id, f);
    }
    const types = fieldTypes(docFields);
    const added: Record<string, { type: string }> = {};
    for (const [name, type] of types) if (!known.has(name)) added[name] = { type };
    if (Object.keys(added).length > 0)
      await os.request('PUT', `/${target}/_mapping`, { properties: { fields: { type: 'object', dynamic: 'strict', properties: added } } });
    const actions: BulkAction[] = [];
    for (const id of write.removed) actions.push({ delete: id });
    for (const id of write.set) {
      const e = src.view.ordinalOf(id);
      if (e < 0) throw cogrError('INTERNAL', `catalog write ${write.generation}: item ${id} is not in its generation`);
      actions.push({ index: itemDoc(src.view, e, src.titles.get(id), src.fields.get(id), types) });
    }
    for (let i = 0; i < actions.length; i += 1000) await bulk(os, target, actions.slice(i, i + 1000), log);
    await os.request('POST', `/${target}/_refresh`, undefined, { timeoutMs: 60_000 });
    const count = await os.request<{ count: number }>('GET', `/${target}/_count`);
    if (count.body.count !== src.view.size)
      throw cogrError(
        'BACKEND_ERROR',
        `opensearch: index ${target} holds ${count.body.count} documents, generation ${write.generation} ${src.view.size}`,
      );
    await os.request('PUT', `/${target}/_mapping`, { _meta: { cogr: meta } });
    await os.request(
      'POST',
      '/_aliases',
      { actions: [{ remove: { index: source, alias, must_exist: true } }, { add: { index: target, alias } }] },
      { timeoutMs: 60_000 },
    );
  } catch (e) {
    // Not swapped: the alias still serves the source, which takes writes again.
    if (cloned) await os.request('DELETE', `/${target}`, undefined, { allow404: true }).catch(() => undefined);
    await os.request('PUT', `/${source}/_settings`, { index: { blocks: { write: null } } }).catch(() => undefined);
    throw e;
  }
  log.info('opensearch: catalog write applied', {
    alias,
    index: target,
    generation: write.generation,
    set: write.set.length,
    removed: write.removed.length,
  });
  const older = (before.meta as IndexMeta & { previous?: string }).previous;
  if (older) await os.request('DELETE', `/${older}`, undefined, { allow404: true }).catch(() => undefined);
  return meta;
}
