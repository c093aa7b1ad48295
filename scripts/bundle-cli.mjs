// Bundles the CLI into dist/bin/ so `holdfast` starts fast: one parse instead of hundreds of
// ESM modules (kysely alone is ~280 files). Dynamic imports stay separate chunks, so drivers
// and SDKs still load only when a command needs them; native and heavy packages stay external.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * zod's namespace of locales (`z.locales`, `z.core.locales`) names every language it ships,
 * which no bundler can drop: ~370 KB of the CLI's ~2 MB of JavaScript, parsed by every command.
 * Holdfast's messages are English (zod's default, which its schemas register themselves), and it
 * calls no other locale; the namespace keeps only `en`.
 */
const englishOnlyZod = {
  name: 'zod-english-only',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      args.importer.includes(`${path.sep}node_modules${path.sep}zod${path.sep}`)
        ? { path: path.join(path.dirname(args.importer), '..', 'locales', 'index.js'), namespace: 'zod-en' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'zod-en' }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: path.dirname(args.path),
      loader: 'js',
    }));
  },
};

// Chunk names carry a content hash: without this, every build's chunks pile up beside the last.
fs.rmSync(path.join(root, 'dist', 'bin'), { recursive: true, force: true });

await build({
  entryPoints: { cli: 'dist/cli/main.js' },
  outdir: 'dist/bin',
  absWorkingDir: root,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  logLevel: 'warning',
  external: ['better-sqlite3', 'zstd-napi', 'pg', '@aws-sdk/*'],
  plugins: [englishOnlyZod],
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __holdfastRequire } from 'node:module'; const require = __holdfastRequire(import.meta.url);" },
});

// The bin is a two-line start: on Node 22.1+ V8 keeps the code it compiled for the CLI's chunks
// between runs (node's compile cache, under the system temp directory), which saves most of
// the ~2 MB parse and compile every command otherwise pays; older Nodes start as before. It
// must be turned on before the chunks are imported, hence an entry of its own.
fs.writeFileSync(
  path.join(root, 'dist', 'bin', 'main.js'),
  ['#!/usr/bin/env node', "import module from 'node:module';", '', 'module.enableCompileCache?.();', "await import('./cli.js');", ''].join(
    '\n',
  ),
  { mode: 0o755 },
);
