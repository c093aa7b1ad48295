import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `holdfast/testkit` as an outside adapter gets it: `npm pack` of this build, the tarball
 * installed into a fresh project with `npm install --offline` (its dependencies, and the
 * adapter's own vitest, linked from this repository's node_modules first, so nothing is
 * fetched), and the shipped contract suites run there, with that project's Vitest, against the
 * local provider and the local-directory endpoint, importing only `holdfast` and
 * `holdfast/testkit`. Needs `npm run build` first (the tarball packs `dist/`).
 */
const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const modules = fs.realpathSync(path.join(repo, 'node_modules'));
const pkg = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  exports: Record<string, unknown>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
};

/** What the adapter's test file holds: the two suites, over the installed package. */
const ADAPTER_TEST = `import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LocalSandboxProvider, openHoldfast } from 'holdfast';
import { describeSandboxProviderContract, describeWorkspaceEndpointContract, fillLocal } from 'holdfast/testkit';

let root = '';
describeSandboxProviderContract({
  name: 'local, from the installed package',
  create: async () => {
    root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hf-adapter-sbx-')));
    const provider = new LocalSandboxProvider({ root });
    return {
      provider,
      cleanup: async () => {
        for (const info of await provider.list()) await provider.destroy(info.id);
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  },
  reopen: () => new LocalSandboxProvider({ root }),
});

describeWorkspaceEndpointContract({
  name: 'local directory, from the installed package',
  open: async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-adapter-ep-'));
    const hf = await openHoldfast({ store: path.join(dir, 'store'), cacheDir: path.join(dir, 'cache') });
    return {
      snapshots: hf.snapshots,
      blobs: hf.blobs,
      meta: hf.meta,
      fresh: async () => {
        const ws = fs.mkdtempSync(path.join(dir, 'ws-'));
        return {
          fill: async (fixture) => fillLocal(ws, fixture),
          checkpoint: (workspace, o = {}) => hf.snapshots.checkpoint({ dir: ws, workspace, ...o }),
          restore: (workspace, o = {}) => hf.snapshots.restore({ dir: ws, workspace, ...o }),
        };
      },
      cleanup: async () => {
        await hf.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
});
`;

describe('holdfast/testkit from the packed package', () => {
  let work = '';
  let project = '';

  beforeAll(() => {
    expect(fs.existsSync(path.join(repo, 'dist/testkit/index.js')), 'run npm run build first').toBe(true);
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-testkit-pack-'));
    execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', work], { cwd: repo, stdio: 'pipe' });
    project = path.join(work, 'adapter');
    fs.mkdirSync(path.join(project, 'node_modules'), { recursive: true });
    for (const dep of [...Object.keys(pkg.dependencies), 'vitest']) {
      const link = path.join(project, 'node_modules', dep);
      fs.mkdirSync(path.dirname(link), { recursive: true });
      fs.symlinkSync(path.join(modules, dep), link);
    }
    fs.writeFileSync(
      path.join(project, 'package.json'),
      JSON.stringify({
        name: 'adapter',
        version: '1.0.0',
        private: true,
        type: 'module',
        devDependencies: { vitest: `file:${path.join(modules, 'vitest')}` },
      }),
    );
    const tarball = path.join(work, `holdfast-${pkg.version}.tgz`);
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: project, stdio: 'pipe' });
    fs.writeFileSync(path.join(project, 'adapter.test.js'), ADAPTER_TEST);
  }, 180_000);
  afterAll(() => {
    if (work !== '') fs.rmSync(work, { recursive: true, force: true });
  });

  it('ships ./testkit as a subpath export with vitest an optional peer', () => {
    expect(pkg.exports['./testkit']).toEqual({ types: './dist/testkit/index.d.ts', default: './dist/testkit/index.js' });
    expect(pkg.peerDependencies?.vitest).toBeDefined();
    expect(pkg.peerDependenciesMeta?.vitest?.optional).toBe(true);
    const installed = path.join(project, 'node_modules/holdfast');
    expect(fs.lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(fs.existsSync(path.join(installed, 'dist/testkit/index.d.ts'))).toBe(true);
    // The library's own face never loads vitest.
    expect(fs.readFileSync(path.join(installed, 'dist/index.js'), 'utf8')).not.toMatch(/from 'vitest'/);
  });

  it('an outside adapter runs both contract suites from the installed package, and they pass', () => {
    const vitest = path.join(project, 'node_modules/vitest/vitest.mjs');
    const out = execFileSync(process.execPath, [vitest, 'run', '--root', project, '--reporter', 'json', '--outputFile', 'report.json'], {
      cwd: project,
      stdio: 'pipe',
      env: { ...process.env, CI: '1' },
      timeout: 600_000,
    });
    void out;
    const report = JSON.parse(fs.readFileSync(path.join(project, 'report.json'), 'utf8')) as {
      numTotalTests: number;
      numPassedTests: number;
      numFailedTests: number;
      testResults: Array<{ assertionResults: Array<{ fullName: string; status: string }> }>;
    };
    const names = report.testResults.flatMap((r) => r.assertionResults.map((a) => a.fullName));
    expect(report.numFailedTests).toBe(0);
    expect(report.numPassedTests).toBe(report.numTotalTests);
    expect(names.some((n) => n.includes('SandboxProvider contract: local, from the installed package'))).toBe(true);
    expect(names.some((n) => n.includes('workspace endpoint contract: local directory, from the installed package'))).toBe(true);
    expect(names.some((n) => n.includes('caller-chosen id'))).toBe(true);
  }, 600_000);
});
