import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_DIRS, DEFAULT_MAX_ENTRIES, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES } from '../workspace-fs/scan.js';
import { checkpointLimits } from './tree-walk.js';

const GIB = 1024 ** 3;

describe('checkpointLimits', () => {
  it("is a scan's defaults for a checkpoint whose row records nothing, or nonsense", () => {
    const defaults = {
      maxEntries: DEFAULT_MAX_ENTRIES,
      maxDirs: DEFAULT_MAX_DIRS,
      maxFileBytes: DEFAULT_MAX_FILE_BYTES,
      maxTotalBytes: DEFAULT_MAX_TOTAL_BYTES,
    };
    expect(checkpointLimits({ stats: null })).toEqual(defaults);
    expect(checkpointLimits({ stats: { files: -5, dirs: 'many', bytes: 1.5 } })).toEqual(defaults);
    expect(checkpointLimits({ stats: { files: 10, symlinks: 2, dirs: 3, bytes: 100 } })).toEqual(defaults);
  });

  it('rises to what a checkpoint taken with raised limits recorded, never lower', () => {
    const limits = checkpointLimits({ stats: { files: 150_000, symlinks: 10, dirs: 120_000, bytes: 300 * GIB } });
    expect(limits).toEqual({ maxEntries: 150_010, maxDirs: 120_000, maxFileBytes: 300 * GIB, maxTotalBytes: 300 * GIB });
  });

  it('takes limits the caller sets over both', () => {
    expect(checkpointLimits({ stats: { files: 150_000 } }, { maxEntries: 7 }).maxEntries).toBe(7);
  });
});
