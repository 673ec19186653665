/**
 * cogr's own JSON-lines format: a folder with three files, one JSON object per line
 * (empty lines are skipped; ids may be strings or numbers and are kept as strings).
 *
 * - `items.jsonl`:   `{"id": "i1", "title": "Red sofa", "text": "A three-seat ...",
 *                     "fields": {"brand": "Acme"}}`  (`fields` optional, string values; a
 *                     field named `__proto__` is refused with DATA_FORMAT)
 * - `queries.jsonl`: `{"id": "q1", "text": "red couch"}`
 * - `qrels.jsonl`:   `{"query_id": "q1", "item_id": "i1", "grade": 2}`  (`grade` a
 *                     number, optional, default 1; grade >= 1 is relevant, 0 is judged
 *                     not relevant)
 *
 * `title` may be empty but must be present; `text` must be present.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { cogrError } from '../../index/core/errors.ts';
import type { Logger } from '../../index/core/log.ts';
import type { Item } from '../../index/core/types.ts';
import { CorpusBuilder, type ParsedDataset, idSchema, readJsonl } from './common.ts';

/**
 * An item's fields: string values. A field named `__proto__` is refused (DATA_FORMAT at
 * its file and line), as the HTTP API refuses such keys: JSON.parse keeps it as an own
 * key, but a plain object built from it would drop it (assigning `__proto__` sets the
 * prototype), so it would vanish without a word. It is checked on the parsed value,
 * before the record is copied.
 */
export const itemFieldsSchema = z
  .unknown()
  .superRefine((v, ctx) => {
    if (v !== null && typeof v === 'object' && Object.prototype.hasOwnProperty.call(v, '__proto__')) {
      ctx.addIssue({ code: 'custom', path: ['__proto__'], message: 'a field may not be named "__proto__" (rename it)' });
    }
  })
  .pipe(z.record(z.string(), z.string()));

const itemLine = z.object({
  id: idSchema,
  title: z.string(),
  text: z.string(),
  fields: itemFieldsSchema.optional(),
});
const queryLine = z.object({ id: idSchema, text: z.string().min(1) });
const qrelLine = z.object({ query_id: idSchema, item_id: idSchema, grade: z.number().finite().optional().default(1) });

export function jsonlFiles(dir: string): { items: string; queries: string; qrels: string } {
  const f = { items: join(dir, 'items.jsonl'), queries: join(dir, 'queries.jsonl'), qrels: join(dir, 'qrels.jsonl') };
  const missing = Object.values(f).filter((p) => !existsSync(p));
  if (missing.length > 0)
    throw cogrError('DATA_MISSING', `${dir}: cogr JSONL dataset needs ${missing.map((p) => p.slice(dir.length + 1)).join(', ')}`);
  return f;
}

export function loadJsonl(dir: string, name: string, logger?: Logger): ParsedDataset {
  const files = jsonlFiles(dir);
  const b = new CorpusBuilder();
  for (const { value, line } of readJsonl(files.items, itemLine)) {
    const item: Item = { id: value.id, title: value.title.trim(), text: value.text.trim() };
    if (value.fields && Object.keys(value.fields).length > 0) item.fields = value.fields;
    b.addItem(item, `${files.items}:${line}`);
  }
  for (const { value, line } of readJsonl(files.queries, queryLine)) {
    b.addQuery({ id: value.id, text: value.text.trim() }, `${files.queries}:${line}`);
  }
  for (const { value, line } of readJsonl(files.qrels, qrelLine)) {
    b.addJudgement(value.query_id, value.item_id, value.grade, `${files.qrels}:${line}`);
  }
  return b.build(name, logger);
}
