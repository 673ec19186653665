/**
 * OpenAPI 3.1 from the same zod schemas the handlers validate with (zod 4's
 * `z.toJSONSchema`, JSON Schema 2020-12, which OpenAPI 3.1 uses as is), and a
 * self-contained HTML docs page rendered from that document.
 *
 * Schemas registered with an id (e.g. the recursive `ProgramNode`) are emitted once
 * under `components.schemas` and referenced from the operations.
 */
import { z } from 'zod';

export interface RouteDoc {
  method: 'get' | 'post' | 'put' | 'delete';
  /** OpenAPI path, e.g. `/v1/items/{id}`. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  query?: z.ZodObject;
  params?: z.ZodObject;
  body?: z.ZodType;
  response?: z.ZodType;
  /** Content type of a non-JSON 200 answer. */
  responseType?: string;
  auth?: boolean;
  /** Error statuses of the route's own (those every route can answer are added: statusesOf). */
  errors?: number[];
}

type Json = Record<string, unknown>;

const ERROR_SCHEMA: Json = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'a code of the error catalogue (index/core/errors.ts)' },
        message: { type: 'string', description: 'names the offending field or JSON path' },
        details: { type: 'object' },
      },
    },
  },
};

const STATUS_TEXT: Record<number, string> = {
  400: 'a parameter or the body does not validate; the message names the field',
  401: 'a bearer token is missing or wrong',
  404: 'not found',
  408: 'the request (line, headers and body) did not arrive within the time-out',
  409: 'the database is locked or has another format version, or the write conflicts with the catalog (an id that exists or does not)',
  413: 'the body is larger than the limit',
  414: 'a path parameter is longer than the limit',
  415: 'the body is not JSON (application/json; text/plain included) or not UTF-8',
  417: 'an Expect header other than 100-continue',
  422: 'a data file or line is malformed (named)',
  431: 'the request line and headers are larger than the limit',
  500: 'internal error',
  501: 'this server does not serve the request (e.g. writes on a server started without --writable)',
  502: 'the search backend or the item generator (an LLM endpoint) failed',
  503: 'the database cannot be written (read-only file system or no permission)',
  504: 'the search backend did not answer within its deadline',
  507: 'no space left on the device',
};

/**
 * The statuses a route can answer beside its own (src/server/http.ts answers them before
 * any route runs): any request can be malformed (400), too slow (408), carry an unknown
 * Expect (417) or headers over the limit (431), and meet an internal error (500); a POST's
 * body can be too large (413), not JSON (415) or not valid JSON (400), whether the route
 * reads a body or not; a path parameter can be too long (414); a route with a token answers 401.
 */
function statusesOf(r: RouteDoc): number[] {
  const all = new Set([...(r.errors ?? []), 400, 408, 417, 431, 500]);
  if (r.method === 'post') for (const s of [413, 415]) all.add(s);
  if (r.params) all.add(414);
  if (r.auth) all.add(401);
  return [...all].sort((a, b) => a - b);
}

function rewriteRefs(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rewriteRefs);
  if (v && typeof v === 'object') {
    const out: Json = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string' && x.startsWith('#/$defs/')) out[k] = '#/components/schemas/' + x.slice(8);
      else if (k !== '$schema') out[k] = rewriteRefs(x);
    }
    return out;
  }
  return v;
}

export class SchemaConverter {
  readonly components: Record<string, unknown> = {};
  private readonly metadata = z.registry<{ id: string }>();

  /** Emit this schema under components.schemas/<id> wherever it is used. */
  name(schema: z.ZodType, id: string): void {
    this.metadata.add(schema, { id });
  }

  convert(schema: z.ZodType, io: 'input' | 'output'): Json {
    const raw = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'any',
      metadata: this.metadata,
    }) as Json;
    const defs = raw.$defs as Record<string, unknown> | undefined;
    delete raw.$defs;
    if (defs) for (const [id, s] of Object.entries(defs)) this.components[id] = rewriteRefs(s);
    return rewriteRefs(raw) as Json;
  }
}

function parametersOf(conv: SchemaConverter, obj: z.ZodObject | undefined, where: 'query' | 'path'): Json[] {
  if (!obj) return [];
  const js = conv.convert(obj, 'input');
  const props = (js.properties ?? {}) as Record<string, Json>;
  const required = new Set((js.required as string[] | undefined) ?? []);
  return Object.entries(props).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return {
      name,
      in: where,
      required: where === 'path' || required.has(name),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    };
  });
}

export function buildOpenApi(
  info: { title: string; version: string; description: string },
  routes: readonly RouteDoc[],
  conv = new SchemaConverter(),
): Json {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const responses: Record<string, unknown> = {};
    responses['200'] = r.responseType
      ? { description: 'OK', content: { [r.responseType]: { schema: { type: 'string' } } } }
      : {
          description: 'OK',
          content: { 'application/json': { schema: r.response ? conv.convert(r.response, 'output') : { type: 'object' } } },
        };
    for (const s of statusesOf(r)) {
      responses[String(s)] = {
        description: STATUS_TEXT[s] ?? 'error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    const op: Json = {
      summary: r.summary,
      tags: [r.tag],
      operationId: `${r.method}${r.path.replace(/[^a-zA-Z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      parameters: [...parametersOf(conv, r.params, 'path'), ...parametersOf(conv, r.query, 'query')],
      responses,
    };
    if (r.description) op.description = r.description;
    if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: conv.convert(r.body, 'input') } } };
    if (r.auth) op.security = [{ bearer: [] }];
    (paths[r.path] ??= {})[r.method] = op;
  }
  return {
    openapi: '3.1.0',
    info,
    paths,
    components: {
      schemas: { Error: ERROR_SCHEMA, ...conv.components },
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'required only when the server was started with --token' },
      },
    },
  };
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A self-contained HTML page (no scripts, no external assets) describing every operation. */
export function renderDocsHtml(doc: Json): string {
  const info = doc.info as { title: string; version: string; description: string };
  const paths = doc.paths as Record<string, Record<string, Json>>;
  const sections: string[] = [];
  const toc: string[] = [];
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const anchor = String(op.operationId);
      toc.push(`<li><a href="#${esc(anchor)}"><code>${method.toUpperCase()} ${esc(path)}</code></a> ${esc(String(op.summary))}</li>`);
      const params = (op.parameters as Json[]) ?? [];
      const rows = params
        .map(
          (p) =>
            `<tr><td><code>${esc(String(p.name))}</code></td><td>${esc(String(p.in))}</td><td>${p.required ? 'yes' : 'no'}</td><td><code>${esc(JSON.stringify(p.schema))}</code></td><td>${esc(String(p.description ?? ''))}</td></tr>`,
        )
        .join('');
      const body = op.requestBody as Json | undefined;
      const responses = op.responses as Record<string, Json>;
      sections.push(
        [
          `<section id="${esc(anchor)}"><h2><span class="m">${method.toUpperCase()}</span> <code>${esc(path)}</code></h2>`,
          `<p>${esc(String(op.summary))}</p>`,
          op.description ? `<p>${esc(String(op.description))}</p>` : '',
          op.security
            ? '<p><strong>Requires</strong> <code>Authorization: Bearer &lt;token&gt;</code> when the server has a token.</p>'
            : '',
          rows ? `<table><tr><th>name</th><th>in</th><th>required</th><th>schema</th><th>description</th></tr>${rows}</table>` : '',
          body ? `<h3>Request body</h3><pre>${esc(JSON.stringify(body, null, 2))}</pre>` : '',
          `<h3>Responses</h3><pre>${esc(JSON.stringify(responses, null, 2))}</pre></section>`,
        ].join('\n'),
      );
    }
  }
  const components = (doc.components as Json).schemas;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(info.title)} ${esc(info.version)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}
pre{background:#f5f5f5;padding:.75rem;overflow:auto;font-size:.85rem}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top;font-size:.9rem}.m{color:#06c}</style></head>
<body><h1>${esc(info.title)} <small>${esc(info.version)}</small></h1><p>${esc(info.description)}</p>
<p>Generated from the OpenAPI document at <a href="/openapi.json"><code>/openapi.json</code></a>.</p>
<ul>${toc.join('\n')}</ul>
${sections.join('\n')}
<h2>Schemas</h2><pre>${esc(JSON.stringify(components, null, 2))}</pre>
</body></html>
`;
}
