/**
 * The one argument parser of the benchmarks: `--name value` options and `--flag`
 * switches after `npm run bench -- <name>`. A bad value stops the benchmark with a
 * message naming the option.
 */
export interface BenchArgs {
  /** True when the switch is present (e.g. --json). */
  has(name: string): boolean;
  /** A string option's value, or the default. */
  string(name: string, def: string): string;
  /** A numeric option's value (default when absent), checked against the bounds. */
  number(name: string, def: number, opts?: { min?: number; integer?: boolean }): number;
}

export function parseBenchArgs(args: readonly string[]): BenchArgs {
  const value = (name: string): string | undefined => {
    const i = args.indexOf(name);
    return i >= 0 && i + 1 < args.length ? args[i + 1] : undefined;
  };
  return {
    has: (name) => args.includes(name),
    string: (name, def) => value(name) ?? def,
    number(name, def, opts = {}) {
      const raw = value(name);
      const v = raw === undefined ? def : Number(raw);
      const min = opts.min ?? 0;
      if (!Number.isFinite(v) || v < min || (opts.integer && !Number.isInteger(v))) {
        throw new Error(`${name} must be ${opts.integer ? 'an integer' : 'a number'} ≥ ${min} (got ${JSON.stringify(raw)})`);
      }
      return v;
    },
  };
}
