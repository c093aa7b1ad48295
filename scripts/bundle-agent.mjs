// Bundles the in-sandbox agent into ONE self-contained file, dist/agent/holdfast-agent.mjs,
// plus its SHA-256 (dist/agent/holdfast-agent.sha256) that names it when staged into a sandbox.
// Built straight from the TypeScript sources (esbuild strips types), target node18 because a
// sandbox may run an older Node than the host; nothing is external, and a native or heavy
// package reaching the bundle fails the build. Outputs are replaced atomically, so test
// workers running this concurrently never see a half-written agent.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outDir = path.join(root, 'dist', 'agent');
const FORBIDDEN = ['better-sqlite3', 'zstd-napi', 'pg', '@aws-sdk/', 'kysely', 'commander'];

const result = await build({
  entryPoints: [path.join(root, 'src', 'sandbox', 'agent', 'inside', 'agent-main.ts')],
  bundle: true,
  write: false,
  metafile: true,
  format: 'esm',
  platform: 'node',
  target: 'node18',
  logLevel: 'warning',
  legalComments: 'none',
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __holdfastRequire } from 'node:module'; const require = __holdfastRequire(import.meta.url);" },
});

const inputs = Object.keys(result.metafile.inputs);
const forbidden = inputs.filter((input) => FORBIDDEN.some((name) => input.includes(`node_modules/${name}`)) || input.endsWith('.node'));
if (forbidden.length > 0) throw new Error(`the agent bundle must not contain native or heavy packages: ${forbidden.join(', ')}`);

const bytes = result.outputFiles[0].contents;
const hash = createHash('sha256').update(bytes).digest('hex');
fs.mkdirSync(outDir, { recursive: true });
const replace = (name, content) => {
  const file = path.join(outDir, name);
  const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(temp, content);
  fs.renameSync(temp, file);
};
replace('holdfast-agent.mjs', bytes);
replace('holdfast-agent.sha256', `${hash}\n`);
if (process.argv.includes('--report')) console.log(`dist/agent/holdfast-agent.mjs ${bytes.length} bytes sha256 ${hash}`);
