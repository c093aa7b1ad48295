// Bundles the CLI into dist/bin/ so `holdfast` starts fast: one parse instead of hundreds of
// ESM modules (kysely alone is ~280 files). Dynamic imports stay separate chunks, so drivers
// and SDKs still load only when a command needs them; native and heavy packages stay external.
import { build } from 'esbuild';

await build({
  entryPoints: { main: 'dist/cli/main.js' },
  outdir: 'dist/bin',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  sourcemap: true,
  logLevel: 'warning',
  external: ['better-sqlite3', 'zstd-napi', 'pg', '@aws-sdk/*'],
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __holdfastRequire } from 'node:module'; const require = __holdfastRequire(import.meta.url);" },
});
