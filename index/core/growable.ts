/**
 * Growable typed arrays (capacity doubling): storage past a JS array's length limit (about
 * 2^27 numbers in V8) without a copy per push. The relevance fit's rows and the item
 * reward cache's query lists grow this way.
 */

/** A Float64Array or Int32Array that grows by doubling; values past `length` are not part of it. */
abstract class Growable<T extends Float64Array | Int32Array> {
  protected a: T;
  length = 0;
  constructor(capacity: number) {
    this.a = this.alloc(Math.max(1, capacity));
  }
  protected abstract alloc(n: number): T;

  private reserve(extra: number): void {
    const need = this.length + extra;
    if (need <= this.a.length) return;
    let cap = this.a.length * 2;
    while (cap < need) cap *= 2;
    const next = this.alloc(cap);
    next.set(this.a.subarray(0, this.length));
    this.a = next;
  }
  push(v: number): void {
    this.reserve(1);
    this.a[this.length++] = v;
  }
  /** Append every value of `list`. */
  pushAll(list: ArrayLike<number>): void {
    this.reserve(list.length);
    this.a.set(list, this.length);
    this.length += list.length;
  }
  addAt(i: number, v: number): void {
    this.a[i] += v;
  }
  /** The first `length` values, a view (valid until the next push). */
  view(): T {
    return this.a.subarray(0, this.length) as T;
  }
  /** A copy of the first `length` values. */
  toArray(): T {
    return this.a.slice(0, this.length) as T;
  }
}

export class GrowableF64 extends Growable<Float64Array> {
  constructor(capacity = 1024) {
    super(capacity);
  }
  protected alloc(n: number): Float64Array {
    return new Float64Array(n);
  }
}

export class GrowableI32 extends Growable<Int32Array> {
  constructor(capacity = 1024) {
    super(capacity);
  }
  protected alloc(n: number): Int32Array {
    return new Int32Array(n);
  }
}
