/** The endpoint fixture moved into the package's testkit (`src/testkit/endpoint-fixture.ts`), where the contract suites that use it ship. */
export * from '../../src/testkit/endpoint-fixture.js';
