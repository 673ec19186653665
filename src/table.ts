/**
 * The one plain-text table renderer of the CLI (and the benchmarks): columns padded to
 * their widest cell, two spaces apart, trailing spaces trimmed, a newline after every row.
 * Columns are left-aligned unless listed in `right`; `rule` adds a line of dashes under
 * the header.
 */
export interface TableOptions {
  /** Indices of right-aligned columns. */
  right?: Iterable<number>;
  /** A line of dashes under the header (default true). */
  rule?: boolean;
}

export function renderTable(header: readonly string[], rows: readonly (readonly string[])[], opts: TableOptions = {}): string {
  const right = new Set(opts.right ?? []);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    widths
      .map((w, i) => (right.has(i) ? (cells[i] ?? '').padStart(w) : (cells[i] ?? '').padEnd(w)))
      .join('  ')
      .trimEnd();
  const lines = [line(header)];
  if (opts.rule ?? true) lines.push(line(widths.map((w) => '-'.repeat(w))));
  for (const r of rows) lines.push(line(r));
  return lines.join('\n') + '\n';
}

/** Column indices from `from` to the last of `n` columns (the usual "numbers on the right"). */
export function columnsFrom(from: number, n: number): number[] {
  return Array.from({ length: Math.max(0, n - from) }, (_, i) => from + i);
}
