import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints one final line `N passed, N failed` that CI reads. A test file that fails to load,
 * and any unhandled error, counts as a failure; skipped tests are listed on their own line
 * so a skip is never silent.
 */
export class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    const skipped: string[] = [];
    for (const mod of testModules) {
      if (mod.errors().length > 0) failed += 1;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped.push(`${mod.moduleId}: ${test.fullName}`);
      }
    }
    if (skipped.length > 0) process.stdout.write(`${skipped.length} skipped:\n  ${skipped.join('\n  ')}\n`);
    process.stdout.write(`${passed} passed, ${failed} failed\n`);
  }
}
