/**
 * `cogr serve --backend opensearch`: GET /v1/search's matched set and BM25 ranking from an
 * OpenSearch alias that `cogr export opensearch` published (src/opensearch/index.ts).
 *
 * The alias's record (`_meta.cogr`: analyzer, k1, generation) is read when the server
 * starts (an alias without one is refused, naming --index) and again, in the background,
 * when a search finds it older than `refreshMs`, so an alias swapped to a new generation is
 * reported within that time; searches always go to the alias, so they see the swap at once.
 * With the database's path (`cogr serve --writable`) it follows catalog writes: each one is
 * applied to a clone of the alias's index, swapped in atomically (catalog.ts).
 */
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { SearchBackend } from '../server/engine.ts';
import type { OpenSearchNodes } from './client.ts';
import { readAlias, searchIndex, type IndexMeta } from './index.ts';
import { searchProgram } from './program.ts';
import { applyCatalogWrite } from './catalog.ts';

export async function openSearchBackend(
  os: OpenSearchNodes,
  alias: string,
  log: Logger,
  opts: { refreshMs?: number; dbPath?: string } = {},
): Promise<SearchBackend & { meta(): IndexMeta }> {
  const refreshMs = opts.refreshMs ?? 10_000;
  const read = async (): Promise<IndexMeta> => {
    const a = await readAlias(os, alias);
    if (!a.index)
      throw cogrError('NOT_FOUND', `--index: no alias '${alias}' on ${os.nodes.join(', ')} (publish one with \`cogr export opensearch\`)`, {
        index: alias,
      });
    if (!a.meta)
      throw cogrError(
        'INVALID_ARGUMENT',
        `--index: the alias '${alias}' names ${a.index}, which cogr export did not write (no _meta.cogr)`,
        {
          index: alias,
        },
      );
    return a.meta;
  };
  let meta = await read();
  let readAt = Date.now();
  let refreshing: Promise<void> | null = null;
  const refresh = () => {
    refreshing ??= read()
      .then((m) => {
        if (m.generation !== meta.generation)
          log.info('the alias serves another generation', { alias, generation: m.generation, was: meta.generation });
        meta = m;
      })
      .catch((e: unknown) =>
        log.warn('reading the alias record failed; keeping the last one', { alias, error: e instanceof Error ? e.message : String(e) }),
      )
      .finally(() => {
        readAt = Date.now();
        refreshing = null;
      });
  };
  return {
    name: 'opensearch',
    meta: () => meta,
    generation: () => meta.generation,
    async search(probe, k) {
      if (Date.now() - readAt > refreshMs) refresh();
      return searchIndex(os, alias, meta, probe, k);
    },
    async searchProgram(node, terms, k) {
      if (Date.now() - readAt > refreshMs) refresh();
      return searchProgram(os, alias, meta, node, terms, k);
    },
    ...(opts.dbPath !== undefined
      ? {
          async applyCatalog(commit, snap) {
            meta = await applyCatalogWrite(
              os,
              alias,
              commit,
              { dbPath: opts.dbPath!, view: snap.item, titles: snap.titles, fields: snap.fields },
              log,
            );
            readAt = Date.now();
          },
        }
      : {}),
  };
}
