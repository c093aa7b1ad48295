// Builds the inspector page (src/inspector/) into dist/inspector/assets/, where
// src/server/inspector-assets.ts serves it at /ui/: one minified script (plain
// TypeScript and DOM, no framework), one stylesheet, the HTML shell and the icon. Prints the
// sizes, which are the page's weight on first load.
import { copyFile, mkdir, stat } from 'node:fs/promises';
import { build } from 'esbuild';

const src = 'src/inspector';
const out = 'dist/inspector/assets';
await mkdir(out, { recursive: true });
await build({
  entryPoints: { app: `${src}/main.ts` },
  outdir: out,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['chrome120', 'firefox120', 'safari17'],
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
await build({ entryPoints: [`${src}/app.css`], outfile: `${out}/app.css`, bundle: true, minify: true, logLevel: 'warning' });
await copyFile(`${src}/index.html`, `${out}/index.html`);
await copyFile(`${src}/favicon.svg`, `${out}/favicon.svg`);
const sizes = await Promise.all(
  ['index.html', 'app.js', 'app.css', 'favicon.svg'].map(async (f) => `${f} ${(await stat(`${out}/${f}`)).size} B`),
);
if (process.env.HOLDFAST_BUILD_QUIET !== '1') console.error(`inspector: ${sizes.join(', ')}`);
