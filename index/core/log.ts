/** The injected logger: every component takes one; the default writes to stderr. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

export function fmt(fields?: Record<string, unknown>): string {
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
