/**
 * Serves the inspector's built files (`npm run build` puts them in `dist/inspector/assets/`,
 * see `scripts/bundle-inspector.mjs`) at `/ui/`, with headers that keep the page to itself: a
 * Content-Security-Policy allowing only its own script and style (no inline script, nothing
 * from elsewhere), no framing, no sniffing, no referrer. The files are read once and kept in
 * memory (they are a few tens of KiB); the page itself holds no secret, so no token is needed
 * to fetch it: it asks for one and sends it with every API call.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Hono } from 'hono';
import { z } from 'zod';
import { NotFoundError } from '../errors.js';
import type { AppEnv } from './app-env.js';
import type { RouteDoc } from './openapi.js';

/** Where the page lives. */
export const INSPECTOR_BASE_PATH = '/ui/';

/**
 * The page's policy: only its own files; images also from `blob:` URLs (previews of verified
 * downloads); preview frames only `srcdoc` ones, which inherit this policy and are sandboxed
 * without scripts.
 */
export const INSPECTOR_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob:",
  "connect-src 'self'",
  "frame-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers on every inspector file. */
export const INSPECTOR_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': INSPECTOR_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
  // Revalidated on every load (cheap: an ETag match answers 304), so an upgraded server never serves a stale page.
  'cache-control': 'no-cache',
};

/** The files of the page, by the name they are served under, with their types. */
const ASSET_TYPES: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'application/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

interface Asset {
  readonly body: Uint8Array;
  readonly type: string;
  readonly etag: string;
}

/** The routes {@link mountInspector} mounts, documented with the API. */
export const INSPECTOR_DOCS: readonly RouteDoc[] = [
  {
    method: 'get',
    path: '/ui',
    operationId: 'openInspector',
    summary: 'The inspector: a redirect to its page, /ui/',
    auth: false,
    tags: ['ops'],
    responseStatus: 308,
    responseHeaders: { Location: { description: '`/ui/`', required: true, schema: z.literal(INSPECTOR_BASE_PATH) } },
  },
  {
    method: 'get',
    path: '/ui/:file{[a-z0-9.-]*}',
    operationId: 'getInspectorFile',
    summary: `A file of the inspector page (${Object.keys(ASSET_TYPES).join(', ')}); /ui/ itself is index.html`,
    description:
      'The inspector is a web page over this API: it asks for a token and sends it with every call. Its files are served with a strict Content-Security-Policy and revalidated on every load.',
    auth: false,
    tags: ['ops'],
    produces: '*/*',
    responseHeaders: {
      'Content-Type': { description: Object.values(ASSET_TYPES).join(', '), required: true },
      ETag: { description: 'Of the file: send it as If-None-Match to get 304', required: true },
      'Content-Security-Policy': { description: 'The page policy', required: true, schema: z.literal(INSPECTOR_CSP) },
      'Cache-Control': { description: '`no-cache`: revalidated on every load', required: true, schema: z.literal('no-cache') },
    },
    headers: z.object({ 'if-none-match': z.string().max(256).optional().describe('The ETag of a copy the client holds') }),
    responses: { 304: { description: 'The copy the client holds (If-None-Match) is current', headers: { ETag: 'Of the file' } } },
    errors: ['NOT_FOUND'],
  },
];

/** What {@link mountInspector} takes. */
export interface InspectorOptions {
  /** Directory of the built files; default `dist/inspector/assets` of the installed package. */
  readonly assetsDir?: string;
}

/**
 * Mounts `GET /ui` (a redirect to `/ui/`) and `GET /ui/<file>` on `app`; `/ui/` is
 * `index.html`. An unknown file is `NOT_FOUND`; so is every file before the page has been built
 * (the message names `npm run build`; the next request looks again).
 */
export function mountInspector(app: Hono<AppEnv>, options: InspectorOptions = {}): void {
  let loaded: Promise<Map<string, Asset>> | undefined;
  const assets = (): Promise<Map<string, Asset>> => {
    loaded ??= loadAssets(options.assetsDir ?? defaultAssetsDir());
    loaded.catch(() => {
      loaded = undefined;
    });
    return loaded;
  };
  app.get('/ui', (c) => c.redirect(INSPECTOR_BASE_PATH, 308));
  app.get('/ui/:file{[a-z0-9.-]*}', async (c) => {
    const name = c.req.param('file') || 'index.html';
    const asset = (await assets()).get(name);
    if (asset === undefined) throw new NotFoundError(`no inspector file ${name}`, { data: {} });
    const headers = { ...INSPECTOR_HEADERS, 'content-type': asset.type, etag: asset.etag };
    if (c.req.header('if-none-match') === asset.etag) return c.body(null, 304, headers);
    return c.body(asset.body as Uint8Array<ArrayBuffer>, 200, headers);
  });
}

async function loadAssets(dir: string): Promise<Map<string, Asset>> {
  const out = new Map<string, Asset>();
  for (const [name, type] of Object.entries(ASSET_TYPES)) {
    let body: Buffer;
    try {
      body = await fs.readFile(path.join(dir, name));
    } catch (cause) {
      throw new NotFoundError(`the inspector is not built (${path.join(dir, name)} is missing): run npm run build`, {
        cause,
        data: {},
      });
    }
    out.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"` });
  }
  return out;
}

/**
 * `dist/inspector/assets` under the package root: the nearest directory above this module
 * holding a `package.json` (the module runs from `src/` under tests, `dist/` as a library and
 * `dist/bin/` in the bundled CLI, so a fixed relative path would not do).
 */
function defaultAssetsDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const parent = path.dirname(dir);
    if (parent === dir) break;
    if (existsSync(path.join(dir, 'package.json'))) return path.join(dir, 'dist', 'inspector', 'assets');
    dir = parent;
  }
  return path.join(process.cwd(), 'dist', 'inspector', 'assets');
}
