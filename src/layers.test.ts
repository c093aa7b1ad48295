import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of `src/`, written as a test (the idea of `sandbox/agent/sides.test.ts`, widened
 * to the whole tree). Each top-level folder, and each file at the top of `src/`, is a unit with
 * a rank; a unit may import only units of a lower rank (or itself), so there is no circle and
 * no arrow back up. Across units, an import reaches only a unit's face: the files at its top
 * level, plus the files of its sub-folders listed in {@link SUB_FACES}. Tests and contract
 * suites (`*.test.ts`, `*.contract.ts`) are not part of the product and are not checked.
 */
const src = path.dirname(fileURLToPath(import.meta.url));

/** Lowest first. Units on one line share a rank and may not import each other. */
const LAYERS: readonly (readonly string[])[] = [
  ['errors.ts'],
  ['config-errors.ts'],
  ['config-git.ts'],
  ['config-env.ts'],
  ['config.ts', 'core'],
  ['rules', 'model'],
  ['workspace-fs'],
  ['blob-store', 'metadata'],
  ['objects'],
  ['tenants', 'snapshot'],
  ['sandbox'],
  ['deployments'],
  ['runs'],
  ['folders'],
  ['git'],
  ['holdfast.ts'],
  ['index.ts', 'tanstack'],
  ['server', 'inspector'],
  ['cli'],
  ['testkit'],
];

/** Files inside a unit's sub-folders that other units may import (its top-level files always may). */
const SUB_FACES: readonly string[] = [
  'blob-store/drivers/local-disk.ts',
  'blob-store/drivers/s3.ts',
  'folders/sync/sync-engine.ts',
  'folders/sync/sync-namespace.ts',
  'runs/sandbox/sandbox-lifecycle.ts',
  'runs/sandbox/stray-sweep.ts',
  'sandbox/agent/host/agent-pool.ts',
  'sandbox/agent/host/git-relay-host.ts',
  'sandbox/endpoints/sandbox-endpoints.ts',
  'sandbox/file-api/directory-files.ts',
  'sandbox/file-api/file-api-endpoints.ts',
  'sandbox/file-api/sandbox-files.ts',
  'sandbox/file-api/tanstack-files.ts',
  'sandbox/providers/bwrap.ts',
  'sandbox/providers/docker.ts',
  'sandbox/providers/local.ts',
  'snapshot/checkpoint/checkpoint.ts',
  'snapshot/checkpoint/content-sink.ts',
  'snapshot/checkpoint/file-reader.ts',
  'snapshot/checkpoint/tree-builder.ts',
  'snapshot/checkpoint/untrusted-source.ts',
  'snapshot/gc/gc.ts',
  'snapshot/gc/gc-sweeper.ts',
  'snapshot/gc/retention.ts',
  'snapshot/inspect/browse.ts',
  'snapshot/inspect/diff.ts',
  'snapshot/inspect/verify.ts',
  'snapshot/restore/restore.ts',
  'snapshot/restore/restore-files.ts',
];

/** Inside `snapshot/`, the algorithms' folders sit under the `Snapshots` facade and never import it. */
const SNAPSHOT_FACADE = 'snapshot/snapshots.ts';

interface Edge {
  readonly from: string;
  readonly to: string;
}

function productFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...productFiles(p));
    else if (/\.ts$/.test(entry.name) && !/\.(test|contract)\.ts$/.test(entry.name)) out.push(p);
  }
  return out;
}

/** Every relative import and re-export (static and dynamic) of product code, as `src/`-relative `.ts` paths. */
function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of productFiles(src)) {
    const from = path.relative(src, file);
    if (from.startsWith('inspector/')) continue; // the browser page, built on its own (see below)
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^import\s+)'(\.[^']+)'/gm)) {
      const to = path.relative(src, path.resolve(path.dirname(file), m[1] as string)).replace(/\.js$/, '.ts');
      out.push({ from, to });
    }
  }
  return out;
}

function unitOf(rel: string): string {
  return rel.split('/')[0] as string;
}

const RANK = new Map<string, number>(LAYERS.flatMap((units, rank) => units.map((u) => [u, rank] as const)));

describe('layers of src/', () => {
  const all = edges();

  it('every top-level folder and file has a rank', () => {
    const unranked = fs.readdirSync(src).filter((name) => !/\.(test|contract)\.ts$/.test(name) && !RANK.has(name));
    expect(unranked).toEqual([]);
    expect(all.length).toBeGreaterThan(500);
  });

  it('no import points to a unit of the same or a higher rank', () => {
    const upward = all
      .filter(({ from, to }) => unitOf(from) !== unitOf(to))
      .filter(({ from, to }) => (RANK.get(unitOf(to)) ?? Number.POSITIVE_INFINITY) >= (RANK.get(unitOf(from)) ?? -1))
      .map(({ from, to }) => `${from} -> ${to}`);
    expect(upward).toEqual([]);
  });

  it('across units an import reaches only a face', () => {
    const faces = new Set(SUB_FACES);
    const deep = all
      .filter(({ from, to }) => unitOf(from) !== unitOf(to) && to.split('/').length > 2 && !faces.has(to))
      .map(({ from, to }) => `${from} -> ${to}`);
    expect(deep).toEqual([]);
  });

  it('the snapshot algorithms never import their facade', () => {
    const back = all
      .filter(({ from, to }) => /^snapshot\/[^/]+\//.test(from) && to === SNAPSHOT_FACADE)
      .map(({ from, to }) => `${from} -> ${to}`);
    expect(back).toEqual([]);
  });

  it('the inspector page imports nothing of the service but the error codes', () => {
    const page = productFiles(path.join(src, 'inspector')).flatMap((file) =>
      [...fs.readFileSync(file, 'utf8').matchAll(/\bfrom\s*'(\.[^']+)'/g)]
        .map((m) => path.relative(src, path.resolve(path.dirname(file), m[1] as string)))
        .filter((to) => !to.startsWith('inspector/'))
        .map((to) => `${path.relative(src, file)} -> ${to}`),
    );
    expect(page.filter((edge) => !edge.endsWith('-> errors.js'))).toEqual([]);
  });
});
