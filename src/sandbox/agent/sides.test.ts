import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The agent folder is split by the side of the process boundary each file runs on: `wire/`
 * (the protocol and its codec, both sides), `host/` (the client Holdfast runs) and `inside/`
 * (the agent bundled into a sandbox, which must stay free of dependencies). These checks keep
 * the split true as files are added.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const src = path.resolve(here, '..', '..');

/** Every relative import and package import of the TypeScript files in `dir`, resolved to `src/`-relative paths. */
function importsOf(dir: string): Array<{ file: string; spec: string; resolved: string }> {
  const out: Array<{ file: string; spec: string; resolved: string }> = [];
  for (const name of fs.readdirSync(path.join(here, dir))) {
    if (!name.endsWith('.ts') || name.endsWith('.test.ts')) continue;
    const file = path.join(here, dir, name);
    for (const m of fs.readFileSync(file, 'utf8').matchAll(/(?:from |import\()'([^']+)'/g)) {
      const spec = m[1] as string;
      const resolved = spec.startsWith('.') ? path.relative(src, path.resolve(path.dirname(file), spec)) : spec;
      out.push({ file: `${dir}/${name}`, spec, resolved });
    }
  }
  return out;
}

/** Modules outside the agent folder that the in-sandbox agent may use: plain code over `node:` built-ins. */
const INSIDE_MAY_USE = [
  'errors.js',
  'workspace-fs/atomic-file.js',
  'rules/excludes.js',
  'rules/ignore-files.js',
  'workspace-fs/fs-exact.js',
  'core/hash.js',
  'workspace-fs/long-paths.js',
  'core/name-bytes.js',
  'core/paths.js',
  'workspace-fs/remove-tree.js',
  'workspace-fs/scan.js',
  'workspace-fs/stat-cache.js',
];

describe('agent sides', () => {
  it('the inside imports only node built-ins, the wire format, itself and a fixed list of plain modules', () => {
    const found = importsOf('inside').filter(
      ({ spec, resolved }) =>
        !spec.startsWith('node:') &&
        !resolved.startsWith('sandbox/agent/inside/') &&
        !resolved.startsWith('sandbox/agent/wire/') &&
        !INSIDE_MAY_USE.includes(resolved),
    );
    expect(found).toEqual([]);
  });

  it('the host never imports the inside, and the wire format imports neither side', () => {
    const crossing = [
      ...importsOf('host').filter(({ resolved }) => resolved.startsWith('sandbox/agent/inside/')),
      ...importsOf('wire').filter(({ resolved }) => /^sandbox\/agent\/(host|inside)\//.test(resolved)),
    ];
    expect(crossing).toEqual([]);
    expect(importsOf('host').length).toBeGreaterThan(0);
  });

  it('nothing outside the agent folder imports the inside', () => {
    const outside: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (p !== path.join(here, 'inside')) walk(p);
        } else if (
          entry.name.endsWith('.ts') &&
          /\/agent\/inside\//.test(
            fs
              .readFileSync(p, 'utf8')
              .match(/from '[^']*'/g)
              ?.join('\n') ?? '',
          )
        ) {
          outside.push(path.relative(src, p));
        }
      }
    };
    walk(src);
    expect(outside).toEqual([]);
  });
});
