import path from 'node:path';
import { posixWithin } from '../core/paths.js';
import type { SandboxHandle } from './sandbox-provider.js';

/** What a view of a sandbox changes: where its workspace root is, and what every command also gets. */
export interface HandleView {
  /** The workspace root the view reports (default: the handle's). */
  readonly root?: string;
  /**
   * Variables every command (`exec` and `run`) also gets, asked at the time of the call; the
   * command's own `options.env` wins, as it wins over the sandbox's create-time environment in
   * every provider.
   */
  readonly env?: () => Readonly<Record<string, string>>;
}

/**
 * The same sandbox seen another way: the one way Holdfast makes a view of a handle (a
 * deployment's workspace root, a work-folder scope, a bundle directory, a command
 * environment). The view's host path follows its root: the root itself when the provider maps
 * the workspace at the same path on the host, the matching host path when the root lies inside
 * a mapped workspace, and none otherwise (the view is then reached over exec).
 */
export function viewOf(handle: SandboxHandle, view: HandleView): SandboxHandle {
  const root = view.root ?? handle.workspaceRoot;
  const localPath = hostPathOf(handle, root);
  const { env } = view;
  const merged = <O extends { env?: Record<string, string> }>(options: O | undefined): O | undefined =>
    env === undefined ? options : ({ ...options, env: { ...env(), ...options?.env } } as O);
  return {
    id: handle.id,
    provider: handle.provider,
    workspaceRoot: root,
    agentHome: handle.agentHome,
    labels: handle.labels,
    ...(localPath === undefined ? {} : { localPath }),
    exec: (argv, options) => handle.exec(argv, merged(options)),
    run: (argv, options) => handle.run(argv, merged(options)),
  };
}

/** Whether `root` is the handle's workspace root or lies inside it. */
export function insideWorkspace(handle: SandboxHandle, root: string): boolean {
  return posixWithin(root, handle.workspaceRoot);
}

function hostPathOf(handle: SandboxHandle, root: string): string | undefined {
  if (handle.localPath === undefined) return undefined;
  if (root === handle.workspaceRoot) return handle.localPath;
  if (handle.localPath === handle.workspaceRoot) return root;
  if (!insideWorkspace(handle, root)) return undefined;
  return path.join(handle.localPath, ...path.posix.relative(handle.workspaceRoot, root).split('/'));
}

/** The sandbox rooted at `dir` of its home (`$HOME/<dir>`: a work-folder scope, a repository checkout). */
export function homeView(handle: SandboxHandle, dir: string): SandboxHandle {
  return viewOf(handle, { root: path.posix.join(handle.agentHome, dir) });
}
