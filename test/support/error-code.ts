/** `codeOf` moved into the package's testkit (`src/testkit/code-of.ts`), where the contract suites that use it ship. */
export { codeOf } from '../../src/testkit/code-of.js';
