/** Markdown and number formatting shared by the generated pages (scripts/docs.ts). */

export const f3 = (x: number) => x.toFixed(3);
export const f4 = (x: number) => x.toFixed(4);
export const signed = (x: number, d = 3) => (x < 0 ? `−${(-x).toFixed(d)}` : `+${x.toFixed(d)}`);
export const pm = (g: { gain: number; se: number }) => `${signed(g.gain)} ± ${g.se.toFixed(3)}`;
export const pct = (x: number) => `${Math.round(100 * x)} %`;
export const med = (x: number | null) => (x === null ? '—' : String(Math.round(x * 10) / 10));
export const row = (cells: readonly (string | number)[]) => `| ${cells.join(' | ')} |`;
export const header = (cells: readonly string[], right: readonly number[] = []) =>
  [row(cells), row(cells.map((_, i) => (right.includes(i) ? '---:' : '---')))].join('\n');

/** A markdown table whose rows are padded to its header. */
export class Table {
  private readonly rows: string[] = [];
  constructor(
    private readonly columns: readonly string[],
    private readonly right: readonly number[] = [],
  ) {}
  add(cells: readonly (string | number)[]): void {
    this.rows.push(row([...cells, ...Array<string>(Math.max(0, this.columns.length - cells.length)).fill('')]));
  }
  get size(): number {
    return this.rows.length;
  }
  toString(): string {
    return [header(this.columns, this.right), ...this.rows].join('\n');
  }
}

export const NAMES: Record<string, string> = { med: 'MED', cisi: 'CISI', nfcorpus: 'NFCorpus' };
export const ORDER = ['med', 'cisi', 'nfcorpus'];
export const display = (dataset: string) => NAMES[dataset] ?? dataset;

/** A table cell: pipes escaped, lines joined. */
export const cell = (x: string) => x.replace(/\|/g, '\\|').replace(/\n\s*/g, ' ');
