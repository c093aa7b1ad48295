/**
 * `holdfast/testkit`: the contract suites an outside adapter runs against its own driver, from
 * the installed package, exactly as Holdfast runs them against its own:
 *
 * - {@link describeSandboxProviderContract}: every `SandboxProvider` (create, get, list,
 *   destroy; caller-chosen ids and labels; exec with stdin, env, cwd, timeouts, pids and
 *   signals; and every declared capability, checked both ways);
 * - {@link describeWorkspaceEndpointContract}: every workspace endpoint (a `WorkspaceSource`
 *   and `WorkspaceTarget` pair) checkpoints the shared fixture to the same tree and restores it
 *   exactly.
 *
 * The suites call Vitest's `describe`/`it`/`expect`, so call them from a Vitest test file;
 * `vitest` is an optional peer dependency of `holdfast` that the adapter brings. Nothing here
 * is loaded by the library itself (`import 'holdfast'` never imports Vitest).
 */
export {
  checkKillableProcesses,
  checkLocalPath,
  checkNetworkIsolation,
  checkResume,
  checkStdin,
  describeSandboxProviderContract,
  type SandboxProviderContractOptions,
} from '../sandbox/sandbox.contract.js';
export {
  describeWorkspaceEndpointContract,
  type EndpointUnderTest,
  type WorkspaceEndpointContractOptions,
} from '../snapshot/workspace-endpoint.contract.js';
export { codeOf } from './code-of.js';
export {
  endpointFixture,
  FIXTURE_SECRETS,
  type FixtureEntry,
  fillLocal,
  fillScriptNode,
  fillScriptShell,
  fixtureBytes,
  fixtureSha256,
} from './endpoint-fixture.js';
