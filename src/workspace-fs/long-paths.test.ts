import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { byteLength } from '../core/name-bytes.js';
import { LongPaths, SYSCALL_PATH_BYTES } from './long-paths.js';

const roots: string[] = [];
afterEach(() => {
  // GNU rm walks relative to open directories; fs.rmSync fails with ENAMETOOLONG here.
  for (const r of roots.splice(0)) execFileSync('rm', ['-rf', r]);
});

describe('LongPaths', () => {
  it('creates, lists, reads and stats a file 10,000 bytes deep, with a name that is not UTF-8', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-long-'));
    roots.push(root);
    const reach = new LongPaths();
    let dir = root;
    for (let i = 0; byteLength(dir) < 10_000; i += 1) {
      dir = `${dir}/${String(i).padStart(3, '0')}${'d'.repeat(200)}`;
      fs.mkdirSync(reach.at(dir));
    }
    const file = `${dir}/caf\udce9.txt`;
    expect(() => fs.writeFileSync(file, 'x')).toThrow(expect.objectContaining({ code: 'ENAMETOOLONG' }));
    fs.writeFileSync(reach.at(file), 'deep bytes');
    expect(fs.readFileSync(reach.at(file), 'utf8')).toBe('deep bytes');
    expect(fs.lstatSync(reach.at(file)).size).toBe(10);
    const names = fs.readdirSync(reach.at(dir), { encoding: 'buffer' });
    expect(names.map((n) => n.toString('hex'))).toEqual([
      Buffer.from([...Buffer.from('caf'), 0xe9, ...Buffer.from('.txt')]).toString('hex'),
    ]);
    reach.close();
    // Closed descriptors are opened again on the next use.
    expect(fs.readFileSync(reach.at(file), 'utf8')).toBe('deep bytes');
    reach.close();
  });

  it('hands short paths through unchanged', () => {
    const reach = new LongPaths();
    expect(reach.at('/tmp/a/b')).toBe('/tmp/a/b');
    expect(SYSCALL_PATH_BYTES).toBeLessThan(4096);
  });
});
