/**
 * Progress for long work: on a TTY one line rewritten in place (phase, counts, rate,
 * ETA); otherwise (CI, pipes) a line at most every `intervalMs` and one at the end.
 * Always on stderr, so stdout stays clean for --json.
 */
export interface ProgressSink {
  start(phase: string, total: number): void;
  tick(done?: number): void;
  end(summary?: string): void;
}

function fmtDuration(s: number): string {
  if (!Number.isFinite(s)) return '?';
  if (s < 60) return `${s.toFixed(0)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.round(s - m * 60)).padStart(2, '0')}s`;
}

export function createProgress(opts: { stream?: NodeJS.WriteStream; intervalMs?: number; enabled?: boolean } = {}): ProgressSink {
  const stream = opts.stream ?? process.stderr;
  const tty = Boolean(stream.isTTY);
  const interval = opts.intervalMs ?? (tty ? 100 : 5000);
  const enabled = opts.enabled ?? true;
  let phase = '';
  let total = 0;
  let done = 0;
  let t0 = 0;
  let last = 0;
  const line = (final: boolean): string => {
    const el = (Date.now() - t0) / 1000;
    const rate = el > 0 ? done / el : 0;
    const eta = rate > 0 ? (total - done) / rate : Infinity;
    const pct = total > 0 ? ((100 * done) / total).toFixed(0).padStart(3) : '  ?';
    const width = 24;
    const fill = total > 0 ? Math.round((width * done) / total) : 0;
    const bar = tty ? `[${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ` : '';
    return `${phase} ${bar}${pct}% ${done}/${total} ${rate.toFixed(1)}/s ${final ? `in ${fmtDuration(el)}` : `ETA ${fmtDuration(eta)}`}`;
  };
  return {
    start(p, t) {
      phase = p;
      total = t;
      done = 0;
      t0 = Date.now();
      last = 0;
    },
    tick(n = 1) {
      done += n;
      if (!enabled) return;
      const now = Date.now();
      if (now - last >= interval) {
        last = now;
        stream.write(tty ? `\r\x1b[2K${line(false)}` : `${line(false)}\n`);
      }
    },
    end(summary) {
      if (!enabled) return;
      stream.write(`${tty ? '\r\x1b[2K' : ''}${line(true)}${summary ? `  ${summary}` : ''}\n`);
    },
  };
}

export const silentProgress: ProgressSink = { start() {}, tick() {}, end() {} };
