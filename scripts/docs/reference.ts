/**
 * The generated reference pages (scripts/docs.ts): docs/http-api.md from the OpenAPI
 * documents `cogr serve` and `cogr reward-server` publish, docs/cli.md from the commands'
 * own definitions.
 */
import type { Command, Option } from 'commander';
import { buildProgram } from '../../src/cli.ts';
import { searchOpenApi } from '../../src/server/app.ts';
import { SearchLimitsSchema } from '../../src/server/api.ts';
import { rewardOpenApi, RewardLimitsSchema } from '../../src/server/rewardServer.ts';
import { cell, header, row } from './markdown.ts';

// ---------------------------------------------------------------------------
// The HTTP reference, from the OpenAPI documents.

type Json = Record<string, unknown>;

/** A JSON schema as a compact type: `{ a: string, b?: number[] }`. */
export function shape(schema: unknown, components: Json, depth = 0): string {
  if (!schema || typeof schema !== 'object') return 'any';
  const s = schema as Json;
  const pad = '  '.repeat(depth + 1);
  const end = '  '.repeat(depth);
  if (typeof s.$ref === 'string') return s.$ref.split('/').pop()!;
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return s.enum.map((x) => JSON.stringify(x)).join(' | ');
  for (const k of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(s[k])) return (s[k] as unknown[]).map((x) => shape(x, components, depth)).join(' | ');
  }
  if (Array.isArray(s.allOf)) return (s.allOf as unknown[]).map((x) => shape(x, components, depth)).join(' & ');
  const type = s.type;
  if (Array.isArray(type)) return type.map((t) => shape({ ...s, type: t }, components, depth)).join(' | ');
  if (type === 'array') {
    const it = (s.items ?? {}) as Json;
    const union =
      Array.isArray(it.anyOf) || Array.isArray(it.oneOf) || Array.isArray(it.type) || (Array.isArray(it.enum) && it.enum.length > 1);
    const inner = shape(it, components, depth);
    return union ? `(${inner})[]` : `${inner}[]`;
  }
  if (type === 'object' || s.properties) {
    const props = (s.properties ?? {}) as Record<string, unknown>;
    const required = new Set((s.required as string[] | undefined) ?? []);
    const entries = Object.entries(props);
    if (entries.length === 0) {
      const extra = s.additionalProperties;
      return extra && typeof extra === 'object' ? `{ [key: string]: ${shape(extra, components, depth)} }` : 'object';
    }
    return `{\n${entries.map(([k, v]) => `${pad}${k}${required.has(k) ? '' : '?'}: ${shape(v, components, depth + 1)}`).join(',\n')}\n${end}}`;
  }
  if (type === 'integer') return 'integer';
  if (typeof type === 'string') return type;
  return 'any';
}

function constraints(s: Json): string {
  const parts: string[] = [];
  if (s.minimum !== undefined || s.maximum !== undefined) parts.push(`${s.minimum ?? ''}…${s.maximum ?? ''}`);
  if (s.minLength !== undefined || s.maxLength !== undefined) parts.push(`length ${s.minLength ?? 0}…${s.maxLength ?? ''}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.join(', ');
}

function openApiMarkdown(doc: Json, command: string): string {
  const info = doc.info as { title: string; description: string; version: string };
  const components = ((doc.components as Json).schemas ?? {}) as Json;
  const out: string[] = [`## ${info.title} (\`${command}\`)`, '', info.description, ''];
  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      out.push(
        `### \`${method.toUpperCase()} ${path}\``,
        '',
        String(op.summary) + (op.security ? ' Needs `Authorization: Bearer <token>` when the server has a token.' : ''),
        '',
      );
      if (op.description) out.push(String(op.description), '');
      const params = (op.parameters as Json[] | undefined) ?? [];
      if (params.length > 0) {
        out.push(header(['parameter', 'in', 'required', 'type', 'limits', 'description']));
        for (const p of params) {
          const sch = p.schema as Json;
          out.push(
            row([
              `\`${String(p.name)}\``,
              String(p.in),
              p.required ? 'yes' : 'no',
              cell(`\`${shape(sch, components)}\``),
              constraints(sch),
              cell(String(p.description ?? sch.description ?? '')),
            ]),
          );
        }
        out.push('');
      }
      const body = op.requestBody as Json | undefined;
      if (body) {
        const sch = ((body.content as Json)['application/json'] as Json).schema;
        out.push('Request body (JSON):', '', '```ts', shape(sch, components), '```', '');
      }
      const responses = op.responses as Record<string, Json>;
      const ok = responses['200'];
      const okContent = ok?.content as Record<string, Json> | undefined;
      if (okContent) {
        const [type, media] = Object.entries(okContent)[0];
        out.push(type === 'application/json' ? 'Answer `200` (JSON):' : `Answer \`200\` (\`${type}\`).`, '');
        if (type === 'application/json') out.push('```ts', shape(media.schema, components), '```', '');
      }
      const errors = Object.entries(responses).filter(([code]) => code !== '200');
      if (errors.length > 0) {
        out.push(header(['status', 'when']));
        for (const [code, r] of errors) out.push(row([code, cell(String(r.description))]));
        out.push('');
      }
    }
  }
  const shared = Object.entries(components).filter(([k]) => k !== 'Error');
  if (shared.length > 0) {
    out.push('### Shared schemas', '');
    for (const [k, v] of shared) out.push(`\`${k}\`:`, '', '```ts', shape(v, components), '```', '');
  }
  return out.join('\n');
}

export function httpApiMarkdown(): string {
  const search = searchOpenApi(SearchLimitsSchema.parse({}));
  const reward = rewardOpenApi(RewardLimitsSchema.parse({}));
  const errorShape = shape(((search.components as Json).schemas as Json).Error, {});
  return [
    '<!-- Generated by `npm run docs` from the OpenAPI documents the servers publish at /openapi.json (src/server/openapi.ts); edit the route docs in src/server/, not this file. -->',
    '',
    '# HTTP reference',
    '',
    'Both servers publish this document themselves at `GET /openapi.json` (OpenAPI 3.1) and as a page at `GET /docs`. ' +
      'Limits are the defaults; the flags of `cogr serve --help` and `cogr reward-server --help` change them. ' +
      'Every error answer, of the routes and of the HTTP layer alike, has one shape:',
    '',
    '```ts',
    errorShape,
    '```',
    '',
    'How serving works, and what each answer means: [serving.md](serving.md).',
    '',
    openApiMarkdown(search, 'cogr serve'),
    openApiMarkdown(reward, 'cogr reward-server'),
  ]
    .join('\n')
    .trimEnd()
    .concat('\n');
}

// ---------------------------------------------------------------------------
// The command reference, from the commands' own definitions (src/cli.ts, src/commands/).

function optionRow(o: Option): string {
  const dflt = o.defaultValue === undefined || o.defaultValue === false ? '' : `\`${String(o.defaultValue)}\``;
  return row([cell(`\`${o.flags}\``), cell(o.description ?? ''), dflt]);
}

function commandSection(c: Command, path: string, out: string[]): void {
  const name = `${path} ${c.name()}`.trim();
  const subs = c.commands as Command[];
  const opts = (c.options as Option[]).filter((o) => !o.hidden);
  const args = c.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`)).join(' ');
  out.push(`### \`cogr ${name}${args ? ` ${args}` : ''}\``, '', cell(c.description()), '');
  if (opts.length > 0) out.push(header(['option', 'what', 'default']), ...opts.map(optionRow), '');
  else if (subs.length > 0) out.push(`Subcommands: ${subs.map((x) => `\`${x.name()}\``).join(', ')}.`, '');
  for (const s of subs) commandSection(s, name, out);
}

export async function cliMarkdown(): Promise<string> {
  const program = await buildProgram();
  const out = [
    "<!-- Generated by `npm run docs` from the commands' definitions (src/cli.ts, src/commands/); edit those, not this file. -->",
    '',
    '# Command reference',
    '',
    '`cogr <command> --help` prints the same. Every command that takes `--dataset` accepts a shipped name (`med`, `cisi`, `nfcorpus`), a registered one or a folder ([data.md](data.md)); state goes to `$COGR_HOME` (default `.cogr/`).',
    '',
    header(['command', 'what it does']),
    ...(program.commands as Command[]).map((c) => row([`[\`${c.name()}\`](#cogr-${c.name()})`, cell(c.description())])),
    '',
  ];
  for (const c of program.commands as Command[]) commandSection(c, '', out);
  return out.join('\n').trimEnd() + '\n';
}
