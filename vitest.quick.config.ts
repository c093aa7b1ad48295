import { configDefaults, defineConfig } from 'vitest/config';
import { SummaryReporter } from './test/support/summary-reporter.js';
import { SHARED_TEST_OPTIONS } from './vitest.config.js';

/**
 * The quick tier (`npm run test:quick`): unit tests beside the code and the engine's
 * end-to-end suites on SQLite + local disk; no sandbox provider but the local one, no
 * PostgreSQL, S3, Docker, bubblewrap, browser or built CLI. The whole suite (`npm test`) stays
 * the proof; this is the inner loop.
 */
export const QUICK_TESTS = [
  'src/**/*.test.ts',
  'test/snapshot.test.ts',
  'test/verify.test.ts',
  'test/gc.test.ts',
  'test/gc-compaction.test.ts',
  'test/gc-sweep.test.ts',
  'test/gc-stat-caches.test.ts',
  'test/gc-upload-intents.test.ts',
  'test/restore-reuse.test.ts',
  'test/restore-trees.test.ts',
  'test/restore-targets.test.ts',
  'test/restore-staging.test.ts',
  'test/fidelity.test.ts',
  'test/index-rebuild.test.ts',
  'test/folders.test.ts',
  'test/folders-stored.test.ts',
  'test/folders-group-commit.test.ts',
  'test/special-bits.test.ts',
  'test/fault-injecting-blob-store.test.ts',
  'test/repo-checkpoint-rules.test.ts',
  'test/folder-sync-namespace.test.ts',
  'test/open-holdfast.test.ts',
];

/** Files under `src/` that need a component the quick tier leaves out. */
const NEEDS_COMPONENTS = [
  'src/metadata/dialects/postgres.test.ts',
  'src/blob-store/drivers/s3.test.ts',
  'src/sandbox/providers/bwrap.test.ts',
  'src/sandbox/providers/bwrap/isolation.test.ts',
  'src/sandbox/providers/docker.test.ts',
];

export default defineConfig({
  test: {
    ...SHARED_TEST_OPTIONS,
    reporters: ['default', new SummaryReporter()],
    include: QUICK_TESTS,
    exclude: [...configDefaults.exclude, ...NEEDS_COMPONENTS],
    env: { ...SHARED_TEST_OPTIONS.env, HOLDFAST_TEST_TIER: 'quick' },
    // Measured on 2 cores: 3 workers 105 s, one worker (Vitest's default there) 173 s, 4 workers 117 s.
  },
});
