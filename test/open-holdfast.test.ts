import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openHoldfast } from '../src/index.js';
import { codeOf } from './support/error-code.js';

/** `openHoldfast` takes the same store URLs as the environment, or a store directory, as the README shows. */
describe('openHoldfast options', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-open-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('opens the stores named by URL strings, and by a store directory', async () => {
    const hf = await openHoldfast({
      meta: `sqlite:${dir}/urls/meta.db`,
      blobs: `file:${dir}/urls/blobs`,
      cacheDir: path.join(dir, 'cache'),
    });
    try {
      expect(hf.config).toEqual({
        meta: { kind: 'sqlite', path: `${dir}/urls/meta.db` },
        blobs: { kind: 'local-disk', path: `${dir}/urls/blobs` },
      });
      const work = path.join(dir, 'work');
      fs.mkdirSync(work);
      fs.writeFileSync(path.join(work, 'a.txt'), 'a\n');
      const { checkpoint } = await hf.snapshots.checkpoint({ dir: work, workspace: 'w' });
      expect(checkpoint.status).toBe('ready');
    } finally {
      await hf.close();
    }
    expect(fs.existsSync(path.join(dir, 'urls', 'meta.db'))).toBe(true);
    expect(fs.readdirSync(path.join(dir, 'urls', 'blobs')).length).toBeGreaterThan(0);

    const stored = await openHoldfast({ store: path.join(dir, 'store'), cacheDir: path.join(dir, 'cache') });
    try {
      expect(stored.config.meta).toEqual({ kind: 'sqlite', path: path.join(dir, 'store', 'meta.db') });
    } finally {
      await stored.close();
    }
  });

  it('refuses a bad URL with INVALID_INPUT naming the option, before opening anything', async () => {
    const error = await openHoldfast({ meta: 'mysql://nope', blobs: `file:${dir}/never` }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_INPUT', data: { variable: 'meta' } });
    expect(await codeOf(openHoldfast({ meta: `sqlite:${dir}/x.db`, blobs: 'ftp://nope' }))).toBe('INVALID_INPUT');
    expect(fs.existsSync(path.join(dir, 'never'))).toBe(false);
    expect(fs.existsSync(path.join(dir, 'x.db'))).toBe(false);
  });
});
