import { describe, expect, it } from 'vitest';
import { parseIntFlag, parseNumberFlag, parseToken } from '../../../src/commands/options.ts';

describe('shared option parsers', () => {
  it('integer flags take decimal digits only', () => {
    expect(parseIntFlag('--k', '10', 0)).toBe(10);
    expect(parseIntFlag('--k', ' 7 ', 0)).toBe(7);
    expect(parseIntFlag('--port', '0', 0, 65535)).toBe(0);
    for (const bad of ['0x10', '1e2', '+5', '2.5', '1_000', '0b11', '', 'ten', '99999999999999999999']) {
      expect(() => parseIntFlag('--k', bad, 0), bad).toThrow(`--k: expected an integer ≥ 0, got ${JSON.stringify(bad)}`);
    }
    expect(() => parseIntFlag('--port', '65536', 0, 65535)).toThrow('--port: expected an integer in [0, 65535], got "65536"');
    // Non-integer flags take decimals (and exponents), not other notations.
    expect(parseNumberFlag('--b', '0.75', { min: 0, max: 1 })).toBe(0.75);
    expect(parseNumberFlag('--t', '.5')).toBe(0.5);
    expect(parseNumberFlag('--t', '2.')).toBe(2);
    expect(parseNumberFlag('--t', '1e-3')).toBe(0.001);
    expect(parseNumberFlag('--t', '-1.5')).toBe(-1.5);
    for (const bad of ['0x1', '0b1', '0o7', 'Infinity', '+1', '1_0', '.', '1e', 'e3']) {
      expect(() => parseNumberFlag('--temperature', bad), bad).toThrow(`--temperature: expected a number, got ${JSON.stringify(bad)}`);
    }
  });

  it('an empty bearer token is refused, from the flag or the environment', () => {
    expect(parseToken(undefined, {})).toBeUndefined();
    expect(parseToken('s3cret', { COGR_TOKEN: 'other' })).toBe('s3cret');
    expect(parseToken(undefined, { COGR_TOKEN: 'other' })).toBe('other');
    expect(() => parseToken('', {})).toThrow(/^--token: the token is empty/);
    expect(() => parseToken('  ', {})).toThrow(/^--token: the token is empty/);
    expect(() => parseToken(undefined, { COGR_TOKEN: '' })).toThrow(/^COGR_TOKEN: the token is empty/);
  });
});
