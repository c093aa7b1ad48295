/**
 * Downloading a file's bytes, checking them against the SHA-256 the service listed, then
 * showing them (text as text, images from a `blob:` URL, HTML only in a sandboxed frame that
 * runs no script) or saving them. Bytes that do not hash as listed are never shown or saved.
 */
import { ApiError, request } from './api.js';
import { h } from './dom.js';
import { formatBytes } from './format.js';
import { sha256Hex } from './sha256.js';

/** Largest file previewed in the page. */
export const MAX_PREVIEW_BYTES = 8 * 1024 * 1024;
/** Largest file the page downloads (it holds the bytes in memory to verify them); larger ones: the CLI. */
export const MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024;
/** Bytes looked at to tell text from binary. */
const SNIFF_BYTES = 8192;

/** Verified bytes of a file. */
export interface VerifiedFile {
  readonly bytes: Uint8Array<ArrayBuffer>;
  readonly sha256: string;
}

/**
 * GETs `url` and checks the body against `expectedSha256` (else against the `X-File-SHA256`
 * the answer carries). Rejects with `INTEGRITY` on a mismatch, `LIMIT_EXCEEDED` past `maxBytes`.
 */
export async function fetchVerified(url: string, expectedSha256: string | null, maxBytes = MAX_DOWNLOAD_BYTES): Promise<VerifiedFile> {
  const response = await request(url);
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw new ApiError(0, 'LIMIT_EXCEEDED', `the file is ${formatBytes(declared)}: larger than the page handles`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes.length > maxBytes)
    throw new ApiError(0, 'LIMIT_EXCEEDED', `the file is ${formatBytes(bytes.length)}: larger than the page handles`);
  const expected = (expectedSha256 ?? response.headers.get('x-file-sha256') ?? '').toLowerCase();
  const sha256 = await sha256Hex(bytes);
  if (expected === '' || sha256 !== expected) {
    throw new ApiError(0, 'INTEGRITY', `the downloaded bytes hash to ${sha256}, not ${expected || 'a listed hash'}: not shown`);
  }
  return { bytes, sha256 };
}

/** Hands verified bytes to the browser as a download named `name`. */
export function saveBytes(file: VerifiedFile, name: string): void {
  const url = URL.createObjectURL(new Blob([file.bytes], { type: 'application/octet-stream' }));
  const anchor = h('a', { href: url, download: name, hidden: true });
  document.body.appendChild(anchor);
  anchor.click();
  anchor.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

const IMAGE_TYPES: readonly (readonly [string, (b: Uint8Array) => boolean])[] = [
  ['image/png', (b) => b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47],
  ['image/jpeg', (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
  ['image/gif', (b) => b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46],
  ['image/webp', (b) => b[8] === 0x57 && b[9] === 0x45 && b[10] === 0x42 && b[11] === 0x50],
];

/** What kind of preview `bytes` named `name` get. */
export function previewKind(name: string, bytes: Uint8Array): 'image' | 'svg' | 'html' | 'text' | 'binary' {
  if (IMAGE_TYPES.some(([, test]) => test(bytes))) return 'image';
  const lower = name.toLowerCase();
  if (lower.endsWith('.svg')) return 'svg';
  if (bytes.subarray(0, SNIFF_BYTES).includes(0)) return 'binary';
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, SNIFF_BYTES));
  } catch {
    // A cut multi-byte character at the sniff boundary is not binary; anything else is.
    if (bytes.length <= SNIFF_BYTES) return 'binary';
  }
  return /\.x?html?$/.test(lower) ? 'html' : 'text';
}

/**
 * The preview of verified bytes: an image through a `blob:` URL (SVG too: an image runs no
 * script), text in a `<pre>`, HTML as text with a button that renders it in a frame sandboxed
 * without scripts (and bound by the page's CSP), anything else a note to download it.
 */
export function previewOf(name: string, file: VerifiedFile): HTMLElement {
  const kind = previewKind(name, file.bytes);
  if (kind === 'image' || kind === 'svg') {
    const type = kind === 'svg' ? 'image/svg+xml' : (IMAGE_TYPES.find(([, test]) => test(file.bytes))?.[0] ?? 'application/octet-stream');
    const url = URL.createObjectURL(new Blob([file.bytes], { type }));
    const img = h('img', { src: url, alt: `Preview of ${name}`, class: 'preview-image' });
    img.addEventListener('load', () => URL.revokeObjectURL(url), { once: true });
    return h('figure', { class: 'preview' }, img, h('figcaption', {}, `${name} · ${formatBytes(file.bytes.length)}`));
  }
  if (kind === 'binary')
    return h('p', { class: 'preview' }, `${name} is binary (${formatBytes(file.bytes.length)}): download it to open it.`);
  const text = new TextDecoder('utf-8').decode(file.bytes);
  const pre = h('pre', { class: 'preview-text', tabindex: 0, 'aria-label': `Contents of ${name}` });
  pre.textContent = text;
  if (kind === 'text') return h('div', { class: 'preview' }, pre);
  const holder = h('div', { class: 'preview' }, pre);
  const render = h('button', { type: 'button' }, 'Show rendered (sandboxed, scripts off)');
  render.addEventListener('click', () => {
    const frame = h('iframe', { sandbox: '', title: `Rendered preview of ${name}`, class: 'preview-frame', referrerpolicy: 'no-referrer' });
    frame.srcdoc = text;
    render.replaceWith(frame);
  });
  holder.prepend(render);
  return holder;
}
