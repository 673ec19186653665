/** The injected logger: every component takes one; the default writes to stderr. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

function fmt(fields?: Record<string, unknown>): string {
  if (!fields) return '';
  const parts = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return parts.length ? ' ' + parts.join(' ') : '';
}

export const stderrLogger: Logger = {
  info: (m, f) => process.stderr.write(`${m}${fmt(f)}\n`),
  warn: (m, f) => process.stderr.write(`warning: ${m}${fmt(f)}\n`),
  debug: (m, f) => {
    if (process.env.COGR_DEBUG) process.stderr.write(`debug: ${m}${fmt(f)}\n`);
  },
};

export const silentLogger: Logger = { info: () => {}, warn: () => {}, debug: () => {} };

/** A logger that keeps its lines, for tests that assert on what was reported. */
export function memoryLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    info: (m, f) => lines.push(`info: ${m}${fmt(f)}`),
    warn: (m, f) => lines.push(`warning: ${m}${fmt(f)}`),
    debug: (m, f) => lines.push(`debug: ${m}${fmt(f)}`),
  };
}
