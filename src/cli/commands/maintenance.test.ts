import { describe, expect, it } from 'vitest';
import { parseDuration } from './maintenance.js';

describe('parseDuration', () => {
  it('reads ms, s, m, h and d, fractions included', () => {
    expect(parseDuration('0s')).toBe(0);
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('90m')).toBe(90 * 60_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('1.5d')).toBe(129_600_000);
  });

  it('rejects anything else as an invalid argument (a usage error)', () => {
    for (const bad of ['', '24', 'h', '-1h', '1w', '1 h h']) expect(() => parseDuration(bad), bad).toThrow(/duration/);
  });
});
