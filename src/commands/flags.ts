/**
 * One parser for numeric command-line flags: every command reports a bad value the same
 * way, `error[INVALID_ARGUMENT]: --flag: expected an integer in [1, 10], got "x"`.
 */
import { cogrError } from '../../index/errors.ts';

export interface NumberFlagOptions {
  integer?: boolean;
  min?: number;
  max?: number;
}

export function parseNumberFlag(flag: string, value: string | undefined, opts: NumberFlagOptions = {}): number | undefined {
  if (value === undefined) return undefined;
  const s = value.trim();
  const n = Number(s);
  const bad =
    s === '' ||
    !Number.isFinite(n) ||
    (opts.integer === true && !/^-?\d+$/.test(s)) ||
    (opts.min !== undefined && n < opts.min) ||
    (opts.max !== undefined && n > opts.max);
  if (bad) {
    const kind = opts.integer ? 'an integer' : 'a number';
    const range =
      opts.min !== undefined && opts.max !== undefined
        ? ` in [${opts.min}, ${opts.max}]`
        : opts.min !== undefined
          ? ` ≥ ${opts.min}`
          : opts.max !== undefined
            ? ` ≤ ${opts.max}`
            : '';
    throw cogrError('INVALID_ARGUMENT', `${flag}: expected ${kind}${range}, got ${JSON.stringify(value)}`);
  }
  return n;
}
