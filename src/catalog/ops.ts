/**
 * Catalog operations and their schemas, validated at the boundary: the lines of a
 * `cogr items …  --from <file.jsonl>` file (errors name file:line and the field) and the
 * bodies of the HTTP write routes (errors name the field). Every operation keeps where it
 * came from, so the writer's own refusals (an id added twice, an item that is not there)
 * name the line or the field too.
 *
 *   add | update | upsert   {"id", "title", "text", "fields"?}   (upsert: PUT /v1/items/{id})
 *   delete                  {"id"}
 *   keywords                {"id", "keywords": ["…", …] | null}  (hand-set; null clears)
 */
import { z } from 'zod';
import { K_MAX } from '../../index/core/defaults.ts';
import { cogrError, type ErrorCode } from '../../index/core/errors.ts';
import { idSchema, jsonlRecords } from '../datasets/common.ts';
import { itemFieldsSchema } from '../datasets/jsonl.ts';

export type CatalogOp =
  | { op: 'add' | 'update' | 'upsert'; id: string; title: string; text: string; fields?: Record<string, string> }
  | { op: 'delete'; id: string }
  | { op: 'keywords'; id: string; keywords: string[] | null };

/** An operation and where it came from: `file.jsonl:3`, `ops[2]`, or the request's path parameter. */
export interface LocatedOp {
  op: CatalogOp;
  where: string;
}

/** Where a batch came from: a file (refusals are DATA_FORMAT naming file:line) or a request (INVALID_BODY naming the field). */
export type OpSource = 'file' | 'request';

const MAX_ID = 1024;
const id = z.string().min(1, 'must not be empty').max(MAX_ID, `longer than ${MAX_ID} characters`);
export const ItemDocSchema = z.strictObject({
  title: z.string({ error: 'required, a string (may be empty)' }).max(10_000, 'longer than 10000 characters'),
  text: z.string({ error: 'required, a string' }).max(1_000_000, 'longer than 1000000 characters'),
  fields: itemFieldsSchema.optional(),
});
export const KeywordListSchema = z
  .array(z.string({ error: 'expected a string' }).max(100, 'longer than 100 characters (the keyword limit)'), {
    error: 'expected an array of strings',
  })
  .max(K_MAX, `at most ${K_MAX} keywords (K_max)`);

const putLine = z.strictObject({ id: idSchema, ...ItemDocSchema.shape });
const deleteLine = z.strictObject({ id: idSchema });
const keywordsLine = z.strictObject({ id: idSchema, keywords: KeywordListSchema.nullable() });

/** One operation of a batch request (`POST /v1/items/batch`). */
export const BatchOpSchema = z.discriminatedUnion(
  'op',
  [
    z.strictObject({ op: z.enum(['add', 'update', 'upsert']), id, ...ItemDocSchema.shape }),
    z.strictObject({ op: z.literal('delete'), id }),
    z.strictObject({ op: z.literal('keywords'), id, keywords: KeywordListSchema.nullable() }),
  ],
  { error: 'expected op add, update, upsert, delete or keywords' },
);

/** The operations of a `cogr items <kind> --from <file>` file, each with its file:line. */
export function readOpsFile(path: string, kind: 'add' | 'update' | 'delete' | 'keywords'): LocatedOp[] {
  const out: LocatedOp[] = [];
  const opts = { uniqueId: (v: { id: string }) => v.id };
  const where = (line: number) => `${path}:${line}`;
  if (kind === 'delete')
    for (const r of jsonlRecords(path, deleteLine, opts)) out.push({ op: { op: 'delete', id: r.value.id }, where: where(r.line) });
  else if (kind === 'keywords')
    for (const r of jsonlRecords(path, keywordsLine, opts))
      out.push({ op: { op: 'keywords', id: r.value.id, keywords: r.value.keywords }, where: where(r.line) });
  else
    for (const r of jsonlRecords(path, putLine, opts)) {
      const v = r.value;
      out.push({
        op: { op: kind, id: v.id, title: v.title, text: v.text, ...(v.fields ? { fields: v.fields } : {}) },
        where: where(r.line),
      });
    }
  return out;
}

/** A refusal of one operation, named by where it came from, with the code its source calls for. */
export function opError(source: OpSource, at: LocatedOp, code: ErrorCode, message: string) {
  const c: ErrorCode = code === 'INVALID_ARGUMENT' ? (source === 'file' ? 'DATA_FORMAT' : 'INVALID_BODY') : code;
  return cogrError(c, `${at.where}: ${message}`, { where: at.where, id: at.op.id });
}
