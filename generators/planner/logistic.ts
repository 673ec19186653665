/**
 * L2-regularised logistic regression on weighted, aggregated rows, fitted by Newton's
 * method (iteratively reweighted least squares). A row r has features x_r (x_r[0] = 1
 * is the bias), a weight n_r (how many pairs share these features) and y_r (how many
 * of them are positive, 0 ≤ y_r ≤ n_r). The objective maximised is
 *   Σ_r [y_r·ln σ(w·x_r) + (n_r − y_r)·ln(1 − σ(w·x_r))] − (λ/2)·Σ_{j ≥ 1} w_j²
 * (the bias is not penalised). Exact and calibrated: aggregation of identical rows
 * changes nothing in the objective.
 */
import { GrowableF64 } from '../../index/core/growable.ts';

export interface LogisticRows {
  dim: number;
  /** Row-major features, rows × dim. */
  x: Float64Array;
  n: Float64Array;
  y: Float64Array;
  rows: number;
}

/** A growable builder of aggregated rows; identical feature vectors can be merged by key. */
export class RowBuilder {
  private readonly x = new GrowableF64();
  private readonly n = new GrowableF64();
  private readonly y = new GrowableF64();
  private readonly merged = new Map<string, number>();
  private readonly mergedNum = new Map<number, number>();
  constructor(readonly dim: number) {}

  /** Add `weight` pairs with features x (all positive or all negative); rows with the same mergeKey are merged. */
  add(x: ArrayLike<number>, positive: boolean, mergeKey?: string, weight = 1): void {
    if (mergeKey !== undefined) {
      const r = this.merged.get(mergeKey);
      if (r !== undefined) return this.addTo(r, positive, weight);
      this.merged.set(mergeKey, this.n.length);
    }
    this.push(x, positive, weight);
  }

  /**
   * `add` with a numeric merge key: rows with the same key value are merged (a namespace
   * of its own, apart from the string keys; the value stands for its string, e.g. the
   * key `j${v}`, for non-negative values without -0).
   */
  addMerged(x: ArrayLike<number>, positive: boolean, key: number, weight = 1): void {
    const r = this.mergedNum.get(key);
    if (r !== undefined) return this.addTo(r, positive, weight);
    this.mergedNum.set(key, this.n.length);
    this.push(x, positive, weight);
  }

  private addTo(r: number, positive: boolean, weight: number): void {
    this.n.addAt(r, weight);
    if (positive) this.y.addAt(r, weight);
  }

  private push(x: ArrayLike<number>, positive: boolean, weight: number): void {
    for (let j = 0; j < this.dim; j++) this.x.push(x[j]);
    this.n.push(weight);
    this.y.push(positive ? weight : 0);
  }

  build(): LogisticRows {
    return { dim: this.dim, x: this.x.toArray(), n: this.n.toArray(), y: this.y.toArray(), rows: this.n.length };
  }
}

export function sigmoid(z: number): number {
  return z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z));
}

/** Solve A·v = b for a symmetric positive definite A (Cholesky); A is d×d row-major. */
function solveSpd(A: Float64Array, b: Float64Array, d: number): Float64Array {
  const L = new Float64Array(d * d);
  for (let i = 0; i < d; i++) {
    for (let j = 0; j <= i; j++) {
      let s = A[i * d + j];
      for (let k = 0; k < j; k++) s -= L[i * d + k] * L[j * d + k];
      if (i === j) L[i * d + i] = Math.sqrt(Math.max(s, 1e-12));
      else L[i * d + j] = s / L[j * d + j];
    }
  }
  const z = new Float64Array(d);
  for (let i = 0; i < d; i++) {
    let s = b[i];
    for (let k = 0; k < i; k++) s -= L[i * d + k] * z[k];
    z[i] = s / L[i * d + i];
  }
  const v = new Float64Array(d);
  for (let i = d - 1; i >= 0; i--) {
    let s = z[i];
    for (let k = i + 1; k < d; k++) s -= L[k * d + i] * v[k];
    v[i] = s / L[i * d + i];
  }
  return v;
}

export interface LogisticFit {
  weights: Float64Array;
  iterations: number;
  /** Mean log-likelihood per pair at the solution. */
  logLik: number;
}

export function fitLogistic(
  rows: LogisticRows,
  opts: { l2?: number; maxIter?: number; tol?: number; init?: Float64Array } = {},
): LogisticFit {
  const d = rows.dim;
  const l2 = opts.l2 ?? 1;
  const maxIter = opts.maxIter ?? 50;
  const tol = opts.tol ?? 1e-8;
  const w = opts.init ? Float64Array.from(opts.init) : new Float64Array(d);
  const g = new Float64Array(d);
  const H = new Float64Array(d * d);
  let it = 0;
  let ll = 0;
  let total = 0;
  for (; it < maxIter; it++) {
    g.fill(0);
    H.fill(0);
    ll = 0;
    total = 0;
    for (let r = 0; r < rows.rows; r++) {
      const o = r * d;
      let z = 0;
      for (let j = 0; j < d; j++) z += w[j] * rows.x[o + j];
      const p = sigmoid(z);
      const n = rows.n[r];
      const y = rows.y[r];
      total += n;
      ll += y * Math.log(Math.max(p, 1e-300)) + (n - y) * Math.log(Math.max(1 - p, 1e-300));
      const e = y - n * p;
      const h = n * p * (1 - p);
      for (let j = 0; j < d; j++) {
        const xj = rows.x[o + j];
        if (xj === 0) continue;
        g[j] += e * xj;
        const hx = h * xj;
        for (let k = 0; k <= j; k++) H[j * d + k] += hx * rows.x[o + k];
      }
    }
    for (let j = 0; j < d; j++) {
      for (let k = 0; k < j; k++) H[k * d + j] = H[j * d + k];
      const pen = j === 0 ? 1e-9 : l2;
      g[j] -= (j === 0 ? 0 : l2) * w[j];
      H[j * d + j] += pen;
    }
    const step = solveSpd(H, g, d);
    let mx = 0;
    for (let j = 0; j < d; j++) {
      w[j] += step[j];
      mx = Math.max(mx, Math.abs(step[j]));
    }
    if (mx < tol) {
      it++;
      break;
    }
  }
  return { weights: w, iterations: it, logLik: total > 0 ? ll / total : 0 };
}
