import { defineConfig } from 'vitest/config';
import { SummaryReporter } from './test/support/summary-reporter.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    reporters: ['default', new SummaryReporter()],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One worker (Vitest's default on 2 cores): the suite is CPU-bound here. Two workers took
    // 1086 s against about 900 s, and starved the kill -9 test's timing (no checkpoint finished
    // before its kill); three pushed CPU-heavy files past their timeouts.
    // The AWS SDK prints a Node 20 support warning in every worker; it says nothing about the code under test.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
