import { defineConfig } from 'vitest/config';
import { SummaryReporter } from './test/support/summary-reporter.js';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // Waits for the work-folder save state route (GET …/work-folders/:scope/:ownerId/sync): remove once it is merged.
    reporters: ['default', new SummaryReporter()],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // The AWS SDK prints a Node 20 support warning in every worker; it says nothing about the code under test.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
