import path from 'node:path';
import { BwrapSandboxProvider } from '../../src/sandbox/providers/bwrap.js';
import { DockerSandboxProvider } from '../../src/sandbox/providers/docker.js';
import type { SandboxProvider } from '../../src/sandbox/sandbox-provider.js';
import { nodeImage } from './docker-images.js';
import { expectBwrapInstalled } from './sandbox-processes.js';

/** A sandbox provider runs are tested on, with the image a deployment for it names. */
export interface RunProviderCase {
  readonly name: 'bwrap' | 'docker';
  /** The deployment's image (`null` for a provider without images). */
  readonly image: () => string | null;
  /** Opens the provider for a test file whose temporary directory is `dir`. */
  readonly open: (dir: string) => SandboxProvider;
}

/** bwrap, with its sandboxes under the test's directory; fails (never skips) without bubblewrap. */
export const BWRAP_RUNS: RunProviderCase = {
  name: 'bwrap',
  image: () => null,
  open: (dir) => {
    expectBwrapInstalled();
    return new BwrapSandboxProvider({ root: path.join(dir, 'sandboxes') });
  },
};

/**
 * Docker with the Node test image (or `image`, e.g. `gitImage`), in a scope of its own
 * (`<scope>-<test dir name>`): `list()` and the stray sweep see only this file's containers.
 */
export function dockerRuns(scope: string, image: () => string = nodeImage): RunProviderCase {
  return {
    name: 'docker',
    image,
    open: (dir) => new DockerSandboxProvider({ image: image(), scope: `${scope}-${path.basename(dir).replace(/[^A-Za-z0-9._-]/g, '')}` }),
  };
}
