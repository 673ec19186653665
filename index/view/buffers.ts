/**
 * Typed arrays that may live on SharedArrayBuffer (so that worker threads read the same
 * memory without copies), and string tables stored as one UTF-8 blob with offsets,
 * decoded lazily once per thread. Views, relevance data, reward caches and judgement
 * data are all built from these.
 */
const enc = new TextEncoder();
const dec = new TextDecoder();

/** A buffer of `bytes` bytes, on SharedArrayBuffer when `shared` (worker threads read it without copies). */
export function alloc(bytes: number, shared: boolean): ArrayBufferLike {
  return shared ? new SharedArrayBuffer(Math.max(bytes, 8)) : new ArrayBuffer(bytes);
}
/** An Int32Array of length n, shared or not. */
export function i32(n: number, shared: boolean): Int32Array {
  return new Int32Array(alloc(n * 4, shared), 0, n);
}
export function encodeStrings(list: readonly string[], shared: boolean): { blob: Uint8Array; off: Int32Array } {
  const off = i32(list.length + 1, shared);
  // All ASCII (one UTF-8 byte per UTF-16 unit): one encode of the joined strings, offsets from lengths.
  let chars = 0;
  for (let i = 0; i < list.length; i++) chars += list[i].length;
  if (chars < 1 << 28) {
    const joined = list.join('');
    const bytes = enc.encode(joined);
    if (bytes.length === joined.length) {
      let total = 0;
      for (let i = 0; i < list.length; i++) {
        off[i] = total;
        total += list[i].length;
      }
      off[list.length] = total;
      const blob = new Uint8Array(alloc(total, shared), 0, total);
      blob.set(bytes);
      return { blob, off };
    }
  }
  // Otherwise (non-ASCII, or more characters than one string may hold): byte lengths
  // first, then chunks of strings encoded straight into the blob. No per-string arrays:
  // a list of 10⁸ keywords would need tens of GB of them.
  let total = 0;
  for (let i = 0; i < list.length; i++) {
    off[i] = total;
    total += Buffer.byteLength(list[i], 'utf8');
  }
  if (total > 0x7fffffff) throw new RangeError(`a string table of ${total} bytes does not fit 32-bit offsets`);
  off[list.length] = total;
  const blob = new Uint8Array(alloc(total, shared), 0, total);
  const CHUNK = 1 << 14;
  for (let start = 0; start < list.length; start += CHUNK) {
    const end = Math.min(list.length, start + CHUNK);
    const joined = list.slice(start, end).join('');
    const r = enc.encodeInto(joined, blob.subarray(off[start], off[end]));
    // The UTF-8 of a concatenation is the concatenation of the UTF-8s unless a lone
    // surrogate at one string's end pairs with one at the next one's start: then the
    // sizes differ and the chunk is encoded string by string.
    if (r.read !== joined.length || r.written !== off[end] - off[start]) {
      for (let i = start; i < end; i++) enc.encodeInto(list[i], blob.subarray(off[i], off[i + 1]));
    }
  }
  return { blob, off };
}
/** A table of strings stored as a UTF-8 blob with offsets; decoded once, on first use, with a reverse index on demand. */
export class StringTable {
  private decoded: string[] | null = null;
  private index: Map<string, number> | null = null;
  constructor(
    private readonly blob: Uint8Array,
    private readonly off: Int32Array,
    readonly size: number,
  ) {}
  get(i: number): string {
    if (this.decoded) return this.decoded[i];
    // TextDecoder cannot decode views on SharedArrayBuffer: copy the slice then.
    const sub = this.blob.subarray(this.off[i], this.off[i + 1]);
    return dec.decode(this.blob.buffer instanceof ArrayBuffer ? sub : sub.slice());
  }
  all(): string[] {
    if (!this.decoded) {
      const out = new Array<string>(this.size);
      // TextDecoder cannot decode views on SharedArrayBuffer; copy slices.
      const isShared = typeof SharedArrayBuffer !== 'undefined' && this.blob.buffer instanceof SharedArrayBuffer;
      // An all-ASCII blob decodes once (byte offsets are then character offsets).
      let ascii = this.blob.length < 1 << 28;
      for (let i = 0; ascii && i < this.blob.length; i++) ascii = this.blob[i] < 0x80;
      if (ascii) {
        const whole = dec.decode(isShared ? this.blob.slice() : this.blob);
        for (let i = 0; i < this.size; i++) out[i] = whole.slice(this.off[i], this.off[i + 1]);
      } else {
        for (let i = 0; i < this.size; i++) {
          const sub = this.blob.subarray(this.off[i], this.off[i + 1]);
          out[i] = dec.decode(isShared ? sub.slice() : sub);
        }
      }
      this.decoded = out;
    }
    return this.decoded;
  }
  lookup(s: string): number {
    if (!this.index) {
      const m = new Map<string, number>();
      const all = this.all();
      for (let i = 0; i < all.length; i++) m.set(all[i], i);
      this.index = m;
    }
    return this.index.get(s) ?? -1;
  }
}
