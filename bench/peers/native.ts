/**
 * Native peers of `npm run bench -- index`: SQLite FTS5 (fts5_peer.py) and Xapian
 * (xapian_peer.py), driven from the bench through Debian's /usr/bin/python3.
 *
 * - `nativeSetup` checks each peer and installs what is missing and installable:
 *   Debian's python3-xapian through apt-get when running as root. A peer that cannot
 *   run is skipped with a line saying why.
 * - `writePeerInput` writes the same keyword bags and probes the bench indexes into a
 *   folder (format in _common.py): keywords and words become opaque ASCII tokens
 *   ("k…", "w…"), so no tokenizer splits, folds or drops anything, and a term query on
 *   a keyword token is a whole-keyword match, the CoGR rule.
 * - `runPeer` runs one peer on that folder; the peer times every query inside its own
 *   process and prints one JSON object, read back here.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keywordWords } from '../../index/text/normalize.ts';
import { packageRoot } from '../../index/core/paths.ts';

export const PYTHON = '/usr/bin/python3';
/** The Python scripts stay in the source tree (the build compiles TypeScript only). */
const here = join(packageRoot(), 'bench', 'peers');

export type NativePeer = 'fts5' | 'xapian';
export const NATIVE_PEERS: readonly NativePeer[] = ['fts5', 'xapian'];
const SCRIPT: Record<NativePeer, string> = { fts5: 'fts5_peer.py', xapian: 'xapian_peer.py' };

export interface Latency {
  p50_us: number;
  p99_us: number;
  samples: number;
}
export interface PeerResult {
  system: string;
  version: string;
  built: number;
  complete: boolean;
  build_s: number;
  rss_mb: number;
  disk_mb?: number;
  /** Size and Σ input index of the first `check` matched sets. */
  sets?: [number, number][];
  match?: Latency;
  topk?: Latency;
}

function python(code: string): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync(PYTHON, ['-c', code], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim() };
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    return { ok: false, out: (err.stderr || err.message).trim().split('\n').pop() ?? '' };
  }
}

const PROBE: Record<NativePeer, string> = {
  fts5: "import sqlite3; c = sqlite3.connect(':memory:'); c.execute('CREATE VIRTUAL TABLE t USING fts5(x)'); print(sqlite3.sqlite_version)",
  xapian: 'import xapian; print(xapian.version_string())',
};

/**
 * Which native peers can run: name → version, or the reason it is skipped. Installs
 * python3-xapian with apt-get when it is missing and this process runs as root.
 */
export function nativeSetup(
  peers: readonly NativePeer[],
  log: (s: string) => void,
): Map<NativePeer, { version?: string; skipped?: string }> {
  const out = new Map<NativePeer, { version?: string; skipped?: string }>();
  if (!existsSync(PYTHON)) {
    for (const p of peers) out.set(p, { skipped: `${PYTHON} not found (Debian's python3 is needed for the native peers)` });
    return out;
  }
  for (const p of peers) {
    let r = python(PROBE[p]);
    if (!r.ok && p === 'xapian') {
      if (process.getuid?.() !== 0) {
        out.set(p, { skipped: `python3-xapian is not installed and this process is not root (run: apt-get install -y python3-xapian)` });
        continue;
      }
      log('  setup: installing python3-xapian (apt-get install -y python3-xapian)');
      const apt = (args: string[]) => {
        try {
          execFileSync('apt-get', args, {
            stdio: ['ignore', 'ignore', 'pipe'],
            env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
          });
          return '';
        } catch (e) {
          return ((e as { stderr?: Buffer }).stderr?.toString() ?? (e as Error).message).trim().split('\n').pop() ?? '';
        }
      };
      let err = apt(['install', '-y', '-q', 'python3-xapian']);
      if (err) err = apt(['update', '-q']) || apt(['install', '-y', '-q', 'python3-xapian']);
      r = python(PROBE[p]);
      if (!r.ok) {
        out.set(p, { skipped: `python3-xapian could not be installed (${err || r.out})` });
        continue;
      }
    }
    out.set(p, r.ok ? { version: r.out } : { skipped: `${p} is not available in ${PYTHON} (${r.out})` });
  }
  return out;
}

/**
 * Write the peers' input: docs.tsv in entity input order (rowid = input index + 1),
 * probes.tsv and config.json. `bags` are the entities' keyword match keys (self
 * included, analysed as our view analyses them), `probeBags` the probes' keys (self
 * included); their words are the analysed words our BM25 counts.
 */
export async function writePeerInput(
  dir: string,
  bags: readonly (readonly string[])[],
  probeBags: readonly (readonly string[])[],
  config: { time_ms: number; budget_s: number; k: number; check: number },
): Promise<void> {
  const kwTok = new Map<string, string>();
  const wordTok = new Map<string, string>();
  const kt = (k: string) => {
    let t = kwTok.get(k);
    if (t === undefined) kwTok.set(k, (t = `k${kwTok.size.toString(36)}`));
    return t;
  };
  const wt = (w: string) => {
    let t = wordTok.get(w);
    if (t === undefined) wordTok.set(w, (t = `w${wordTok.size.toString(36)}`));
    return t;
  };
  const line = (kws: readonly string[], distinctWords: boolean) => {
    const words: string[] = [];
    const seen = new Set<string>();
    for (const k of kws) {
      for (const w of keywordWords(k)) {
        if (distinctWords) {
          if (seen.has(w)) continue;
          seen.add(w);
        }
        words.push(wt(w));
      }
    }
    return `${kws.map(kt).join(' ')}\t${words.join(' ')}\n`;
  };
  const stream = createWriteStream(join(dir, 'docs.tsv'));
  let chunk: string[] = [];
  const flush = async () => {
    if (!stream.write(chunk.join(''))) await new Promise<void>((r) => stream.once('drain', () => r()));
    chunk = [];
  };
  for (const b of bags) {
    chunk.push(line(b, false));
    if (chunk.length === 8192) await flush();
  }
  await flush();
  await new Promise<void>((res, rej) => stream.end((e?: Error | null) => (e ? rej(e) : res())));
  writeFileSync(join(dir, 'probes.tsv'), probeBags.map((p) => line(p, true)).join(''));
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
}

/** Run one peer on a folder written by writePeerInput; rejects with the peer's error. */
export function runPeer(peer: NativePeer, dir: string, timeoutS: number): Promise<PeerResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [join(here, SCRIPT[peer]), dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutS * 1000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) {
        try {
          resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as PeerResult);
        } catch (e) {
          reject(new Error(`${peer}: unreadable output (${(e as Error).message})`));
        }
      } else {
        reject(
          new Error(
            `${peer} ${signal ? `killed by ${signal} after ${timeoutS} s` : `exited with ${code}`}: ${err.trim().split('\n').slice(-3).join(' | ')}`,
          ),
        );
      }
    });
  });
}
