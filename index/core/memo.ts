/**
 * A bounded memo of a one-argument string function: results are kept in a Map that is
 * dropped whole when it reaches `max` entries (cheap, no eviction order to keep; the hot
 * keys come back at once). `max` ≤ 0 returns `fn` itself.
 */
export function boundedMemo<T>(fn: (s: string) => T, max: number): (s: string) => T {
  if (max <= 0) return fn;
  let memo = new Map<string, T>();
  return (s: string): T => {
    let v = memo.get(s);
    if (v === undefined && !memo.has(s)) {
      v = fn(s);
      if (memo.size >= max) memo = new Map();
      memo.set(s, v);
    }
    return v as T;
  };
}
