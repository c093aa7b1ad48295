import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { writeFile } from './support/trees.js';

/**
 * A workspace holding setuid, setgid and sticky entries (the tests run as root, so a restore
 * that applied them would make a root-owned setuid binary): the checkpoint keeps permission
 * bits only and reports each strip, and the restore creates no special bit anywhere.
 */
describe.each(BACKENDS)('setuid, setgid and sticky bits on $name', (backend) => {
  let b: OpenedBackends;

  beforeAll(async () => {
    b = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('are stripped at checkpoint, reported as mode-stripped, and never restored', async () => {
    const source = path.join(b.dir, 'source');
    writeFile(source, 'bin/su-shell', '#!/bin/sh\nid\n', 0o755);
    fs.chmodSync(path.join(source, 'bin/su-shell'), 0o4755);
    writeFile(source, 'bin/sg-tool', 'x', 0o755);
    fs.chmodSync(path.join(source, 'bin/sg-tool'), 0o2755);
    fs.mkdirSync(path.join(source, 'tmp'));
    fs.chmodSync(path.join(source, 'tmp'), 0o1777);
    fs.mkdirSync(path.join(source, 'shared'));
    fs.chmodSync(path.join(source, 'shared'), 0o2775);
    writeFile(source, 'plain.txt', 'plain', 0o644);

    const result = await b.snapshots.checkpoint({ dir: source, workspace: 'special' });
    expect(
      result.excluded
        .filter((e) => e.reason === 'mode-stripped')
        .map((e) => e.path)
        .sort(),
    ).toEqual(['bin/sg-tool', 'bin/su-shell', 'shared', 'tmp']);
    const id = result.checkpoint.id;
    const modeOf = async (rel: string): Promise<number | undefined> => {
      const found = await b.snapshots.ls(id, rel);
      return found.kind === 'entry' && found.entry.type === 'file' ? found.entry.mode : undefined;
    };
    expect(await modeOf('bin/su-shell')).toBe(0o755);
    expect(await modeOf('bin/sg-tool')).toBe(0o755);
    const root = await b.snapshots.ls(id, '');
    const dirModes = root.kind === 'dir' ? Object.fromEntries(root.entries.map((e) => [e.name, e.type === 'dir' ? e.mode : -1])) : {};
    expect(dirModes).toMatchObject({ tmp: 0o777, shared: 0o775 });

    const target = path.join(b.dir, 'restored');
    await b.snapshots.restore({ dir: target, workspace: 'special' });
    const modes = (rel: string): number => fs.lstatSync(path.join(target, rel)).mode & 0o7777;
    expect(modes('bin/su-shell')).toBe(0o755);
    expect(modes('bin/sg-tool')).toBe(0o755);
    expect(modes('tmp')).toBe(0o777);
    expect(modes('shared')).toBe(0o775);

    // A second checkpoint of the unchanged workspace (stat cache warm) reports the strips again.
    const again = await b.snapshots.checkpoint({ dir: source, workspace: 'special' });
    expect(again.excluded.filter((e) => e.reason === 'mode-stripped')).toHaveLength(4);
  });
});
