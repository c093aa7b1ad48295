import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { IntegrityError, NotFoundError } from '../errors.js';
import { BUNDLE_WORKSPACE } from '../model/workspace-names.js';
import type { SandboxEndpoints } from '../sandbox/endpoints/sandbox-endpoints.js';
import { viewOf } from '../sandbox/handle-views.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import { runSetupCommand } from '../sandbox/setup-command.js';
import type { RestoreReceipt } from '../snapshot/restore/restore.js';
import type { Snapshots } from '../snapshot/snapshots.js';
import { bundleDirIn } from './bundle-record.js';
import type { DeploymentSpec } from './deployment-spec.js';

/** The variable that tells commands in the sandbox where the deployment's bundle is. */
export const BUNDLE_DIR_ENV = 'HOLDFAST_BUNDLE_DIR';
/** Deadline of each shell step of an install (clearing the old copy, making it read-only). */
const INSTALL_STEP_TIMEOUT_MS = 120_000;
/** Output a shell step of an install may print. */
const INSTALL_STEP_OUTPUT_BYTES = 64 * 1024;

/** What {@link installBundle} did. */
export interface BundleInstall {
  /** The bundle directory inside the sandbox (absolute; a host path for the local provider). */
  readonly dir: string;
  /** Add to the environment of the sandbox's commands (setup, validation, turns): `HOLDFAST_BUNDLE_DIR`. */
  readonly env: { readonly [BUNDLE_DIR_ENV]: string };
  /** The verified restore: its `rootTree` is the deployment's bundle. */
  readonly receipt: RestoreReceipt;
}

/**
 * Installs the bundle a deployment names into a sandbox: whatever is at the bundle path is
 * removed (an agent's edits, another deployment's bundle, a symlink put in its place), the
 * bundle is restored there, verified, through the same endpoint as workspace restores (and
 * its `rootTree` checked against the deployment's), and the copy is made read-only
 * (`chmod -R a-w`: advisory against a sandbox user who owns it or is root, which is every
 * shipped provider; see docs). Resolves `null` when the deployment has no bundle.
 *
 * `sandbox` is the handle rooted at the deployment's workspace root (`deploymentHandle`): the
 * bundle path must lie outside that root and the home's reserved directories
 * (`INVALID_INPUT`). `snapshots` is the deployment's tenant's (`NOT_FOUND` when that tenant
 * never captured the bundle); a restore that comes out different is `RESTORE_INCOMPLETE`, a
 * failed shell step `SETUP_FAILED`.
 */
export async function installBundle(
  endpoints: SandboxEndpoints,
  snapshots: Snapshots,
  sandbox: SandboxHandle,
  deployment: { readonly spec: DeploymentSpec },
): Promise<BundleInstall | null> {
  const { bundle, bundlePath } = deployment.spec;
  if (bundle === null || bundle === undefined) return null;
  const dir = bundleDirIn(bundlePath ?? null, sandbox);
  const checkpoint = (await snapshots.log(BUNDLE_WORKSPACE)).find((c) => c.status === 'ready' && c.rootTree === bundle.rootTree);
  if (checkpoint === undefined) {
    throw new NotFoundError(`bundle ${bundle.rootTree} of this deployment is not among the tenant's captured bundles`, {
      data: { rootTree: bundle.rootTree },
    });
  }
  // Restored beside its place under a fresh name, then renamed: every install is a cold restore
  // of its own (no earlier restore there is resumed or reused), and the path never holds half a bundle.
  const leftovers = path.posix.join(path.posix.dirname(dir), `.${path.posix.basename(dir)}.install-`);
  const fresh = `${leftovers}${randomBytes(8).toString('hex')}`;
  await shellStep(sandbox, CLEAR_SCRIPT, [dir, leftovers, ...ownedComponents(dir, sandbox.agentHome)], 'clearing the bundle directory');
  const receipt = await endpoints.restore(snapshots, viewOf(sandbox, { root: fresh }), {
    workspace: BUNDLE_WORKSPACE,
    checkpoint: checkpoint.id,
    replace: true,
  });
  if (receipt.rootTree !== bundle.rootTree) {
    throw new IntegrityError(
      'RESTORE_INCOMPLETE',
      `bundle restore into ${sandbox.id} produced tree ${receipt.rootTree}, expected ${bundle.rootTree}`,
      {
        data: { rootTree: bundle.rootTree, restored: receipt.rootTree },
      },
    );
  }
  await shellStep(sandbox, PLACE_SCRIPT, [fresh, dir], 'making the bundle read-only in place');
  return { dir, env: { [BUNDLE_DIR_ENV]: dir }, receipt };
}

/**
 * `$1` is the bundle directory, `$2` the name prefix of install directories beside it, the rest
 * the components of its path that a sandbox user may have made (below the home, or all for a
 * path outside it): none may be a symlink, so nothing is led elsewhere. The old copy (or
 * whatever took its place, a symlink removed as a link) and any interrupted install are made
 * writable again and removed; the parent is created.
 */
const CLEAR_SCRIPT = [
  'sh',
  '-c',
  [
    'dir=$1; prefix=$2; shift 2',
    'for p in "$@"; do if [ -L "$p" ]; then echo "$p is a symlink" >&2; exit 3; fi; done',
    'for p in "$dir" "$prefix"*; do',
    '  if [ -L "$p" ]; then rm -f -- "$p" || exit 4',
    '  elif [ -e "$p" ]; then chmod -R u+w -- "$p" && rm -rf -- "$p" || exit 4; fi',
    'done',
    'mkdir -p -- "$(dirname -- "$dir")"',
  ].join('\n'),
  'holdfast-bundle',
];

/** Renames the restored install directory `$1` to the bundle directory `$2` (which must still be absent) and makes it read-only. */
const PLACE_SCRIPT = [
  'sh',
  '-c',
  [
    'if [ -e "$2" ] || [ -L "$2" ]; then echo "$2 appeared during the install" >&2; exit 5; fi',
    'mv -- "$1" "$2" && chmod -R a-w -- "$2"',
  ].join('\n'),
  'holdfast-bundle',
];

/** The ancestors of `dir` (and `dir`'s parent chain) that are not the home or above it. */
function ownedComponents(dir: string, home: string): string[] {
  const out: string[] = [];
  for (let p = path.posix.dirname(dir); p !== '/' && !isAncestorOrSelf(p, home); p = path.posix.dirname(p)) out.push(p);
  return out;
}

function isAncestorOrSelf(p: string, of: string): boolean {
  const rel = path.posix.relative(p, of);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !path.posix.isAbsolute(rel));
}

/** Runs one shell step of an install in the sandbox's home; a non-zero exit is `SETUP_FAILED` with its stderr (credentials withheld). */
function shellStep(sandbox: SandboxHandle, argv: readonly string[], args: readonly string[], what: string): Promise<void> {
  return runSetupCommand(sandbox, {
    argv: [...argv, ...args],
    cwd: sandbox.agentHome,
    timeoutMs: INSTALL_STEP_TIMEOUT_MS,
    maxOutputBytes: INSTALL_STEP_OUTPUT_BYTES,
    what,
    data: { step: what },
  });
}
