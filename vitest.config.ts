import { defineConfig } from 'vitest/config';
import { SummaryReporter } from './test/support/summary-reporter.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    reporters: ['default', new SummaryReporter()],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default is one worker per core less one: a single worker on a 2-core machine,
    // while most files wait on sandboxes, PostgreSQL, S3 and child processes, not the CPU.
    maxWorkers: 3,
    // The AWS SDK prints a Node 20 support warning in every worker; it says nothing about the code under test.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
