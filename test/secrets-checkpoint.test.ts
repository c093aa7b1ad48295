import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../src/blob-store/blob-store.js';
import { decompress } from '../src/objects/content-workers.js';
import { decodeFooter, decodeTrailer, PACK_FOOTER_BYTES, packIdFromKey } from '../src/objects/pack-format.js';
import { readLargeFile, WHOLE_READ_BYTES } from '../src/snapshot/checkpoint/file-reader.js';
import { type EndpointContext, LocalWorkspaceSource, type WorkspaceSource } from '../src/snapshot/workspace-source.js';
import { generateToken } from '../src/tenants/tokens.js';
import { BACKENDS, type OpenedBackends } from './support/backends.js';
import { codeOf } from './support/error-code.js';
import { ALNUM, credentialSamples, generator, legacyHoldfastToken, serviceAccountJwt } from './support/secret-samples.js';
import { seededBytes, writeFile } from './support/trees.js';

const random = generator(77);

/** Every object of every pack in the store, decompressed, as latin1 text. */
async function* storedObjects(blobs: BlobStore): AsyncGenerator<string> {
  for await (const { key, size } of blobs.list('packs/')) {
    const packId = packIdFromKey(key) ?? '';
    const footer = await blobs.get(key, { offset: size - PACK_FOOTER_BYTES, length: PACK_FOOTER_BYTES });
    const trailerLength = decodeFooter(packId, footer, size);
    const trailer = decodeTrailer(
      packId,
      await blobs.get(key, { offset: size - PACK_FOOTER_BYTES - trailerLength, length: trailerLength }),
      footer,
    );
    const bytes = Buffer.from(await blobs.get(key));
    for (const o of trailer.objects)
      yield Buffer.from(decompress(bytes.subarray(o.offset, o.offset + o.length), o.codec)).toString('latin1');
  }
}

/** Fails the test if any stored object holds one of `needles`; returns how many objects were searched. */
async function expectNoneStored(blobs: BlobStore, needles: readonly string[]): Promise<number> {
  let objects = 0;
  for await (const raw of storedObjects(blobs)) {
    for (const needle of needles) expect(raw.includes(needle), `${needle.slice(0, 24)}… stored`).toBe(false);
    objects += 1;
  }
  return objects;
}

/**
 * A local source whose large-file reads let `between` rewrite the file after the secret scan
 * and before the chunks are read: the attacker's window in a two-pass read. `before` runs
 * ahead of each read.
 */
function racingSource(dir: string, b: OpenedBackends, before: (abs: string) => void, between: (abs: string) => void) {
  return ({ workspace }: EndpointContext): WorkspaceSource => {
    const local = new LocalWorkspaceSource(dir, workspace.id, path.join(b.dir, 'cache'), b.workers);
    return Object.assign(Object.create(local) as LocalWorkspaceSource, {
      readLarge: (file: { path: string }, onChunk: Parameters<WorkspaceSource['readLarge']>[1]) => {
        const abs = path.join(dir, file.path);
        before(abs);
        return readLargeFile(abs, onChunk, { afterScan: () => between(abs) });
      },
    });
  };
}

/** Reads a whole async stream; rejects as the stream does. */
async function collect(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const piece of stream) parts.push(Buffer.from(piece));
  return Buffer.concat(parts);
}

/** Writes `text` over the file at `offset`, keeping its size (and inode). */
function overwrite(abs: string, offset: number, text: string | Buffer): void {
  const fd = fs.openSync(abs, 'r+');
  try {
    fs.writeSync(fd, typeof text === 'string' ? Buffer.from(text) : text, 0, text.length, offset);
  } finally {
    fs.closeSync(fd);
  }
}

describe.each(BACKENDS)('secrets through a real checkpoint on $name', (backend) => {
  let b: OpenedBackends;

  beforeAll(async () => {
    b = await backend.open();
  }, 120_000);
  afterAll(async () => {
    await b?.cleanup();
  });

  it('stores no chunk of a large file that gains a secret between the scan and the chunking pass', async () => {
    const dir = path.join(b.dir, 'race');
    const size = WHOLE_READ_BYTES + 3 * 1024 * 1024;
    writeFile(dir, 'data/big.bin', seededBytes(size, 'race'));
    writeFile(dir, 'src/app.ts', 'export const x = 1;\n');
    const token = `gh${'p'}_${random(ALNUM, 36)}`;
    const where = 40 * 1024 * 1024;
    let raced = 0;
    const result = await b.snapshots.checkpoint({
      workspace: 'race',
      source: racingSource(
        dir,
        b,
        () => undefined,
        (abs) => {
          raced += 1;
          overwrite(abs, where, `\n${token}\n`);
        },
      ),
    });
    // The retry scans the file again, now holding the token, and leaves it out with its rule.
    expect(raced).toBe(1);
    expect(result.checkpoint.status).toBe('ready');
    expect(result.stats.attempts).toBeGreaterThanOrEqual(2);
    expect(result.excluded).toContainEqual({ path: 'data/big.bin', reason: 'secret-content', rule: 'github-token' });
    expect(await expectNoneStored(b.blobs, [token])).toBeGreaterThan(0);
  }, 180_000);

  it('fails with WORKSPACE_CHANGED, head unmoved, when every attempt is raced, and stores none of the secret', async () => {
    const dir = path.join(b.dir, 'race-always');
    const size = WHOLE_READ_BYTES + 1024 * 1024;
    const clean = seededBytes(size, 'race-always');
    writeFile(dir, 'big.bin', clean);
    const first = await b.snapshots.checkpoint({ dir, workspace: 'race-always' });
    const pem = `-----BEGIN ${['PRIVATE', 'KEY'].join(' ')}-----\n${random(`${ALNUM}+/`, 64)}\n${random(`${ALNUM}+/`, 64)}\n`;
    const jwt = serviceAccountJwt();
    const where = 20 * 1024 * 1024;
    writeFile(dir, 'big.bin', Buffer.concat([clean.subarray(0, size - 1), Buffer.from('!')]));
    const failed = b.snapshots.checkpoint({
      workspace: 'race-always',
      source: racingSource(
        dir,
        b,
        // Each attempt's scan sees clean bytes; each chunking pass would see the secrets.
        (abs) => overwrite(abs, where, clean.subarray(where, where + pem.length + jwt.length + 2)),
        (abs) => overwrite(abs, where, `${pem}\n${jwt}\n`),
      ),
    });
    expect(await codeOf(failed)).toBe('WORKSPACE_CHANGED');
    const workspace = (await b.snapshots.workspaces()).find((w) => w.name === 'race-always');
    expect(workspace?.headCheckpointId).toBe(first.checkpoint.id);
    const [latest] = await b.snapshots.log('race-always', 1);
    expect(latest?.status).toBe('failed');
    await expectNoneStored(b.blobs, [pem.slice(0, 80), jwt]);
  }, 180_000);

  it("leaves out files holding Holdfast's own tokens, both formats, and stores none of their bytes", async () => {
    const dir = path.join(b.dir, 'holdfast-tokens');
    const [token, legacy] = [generateToken(), legacyHoldfastToken()];
    const files: Record<string, string> = {
      'notes/session.md': `# Resume\n\nexport HOLDFAST_RUN_TOKEN=${token}\n`,
      'config/client.json': `{"url": "http://holdfast:7420", "token": "${legacy}"}\n`,
      // Printed with no separator: the checksum ends the token, not a word boundary.
      'logs/curl.log': `> X-Run-Token: ${token}HTTP/1.1 200 OK\r\n`,
    };
    const kept: Record<string, string> = {
      'src/hub.py': `from huggingface_hub import h${'f'}_hub_download\n`,
      'docs/tokens.md': `Tokens look like \`hold${'fast'}_…\`; an older one \`h${'f'}_…\`.\n`,
    };
    for (const [rel, text] of Object.entries({ ...files, ...kept })) writeFile(dir, rel, text);
    const result = await b.snapshots.checkpoint({ dir, workspace: 'holdfast-tokens' });
    expect(Object.fromEntries(result.excluded.map((e) => [e.path, `${e.reason} ${e.rule}`]))).toEqual({
      'notes/session.md': 'secret-content holdfast-token',
      'config/client.json': 'secret-content holdfast-legacy-token',
      'logs/curl.log': 'secret-content holdfast-token',
    });
    for (const rel of Object.keys(kept)) {
      const parts: Buffer[] = [];
      for await (const piece of b.snapshots.cat(result.checkpoint.id, rel)) parts.push(Buffer.from(piece));
      expect(Buffer.concat(parts).toString(), rel).toBe(kept[rel]);
    }
    for (const rel of Object.keys(files)) expect(await codeOf(collect(b.snapshots.cat(result.checkpoint.id, rel)))).toBe('NOT_FOUND');
    expect(await expectNoneStored(b.blobs, [token, legacy, token.slice(9, 40), legacy.slice(3, 40)])).toBeGreaterThan(0);
  }, 120_000);

  it('leaves out credential paths and credential lines, each with its reason, and keeps look-alikes', async () => {
    const dir = path.join(b.dir, 'creds');
    const samples = new Map(credentialSamples().map(([rule, text]) => [rule, text]));
    const sample = (rule: string): string => samples.get(rule) ?? '';
    const pgpass = `db.internal:5432:app:app:${random(ALNUM, 24)}\n`;
    const pypirc = `[pypi]\nusername = __token__\npassword = ${sample('pypi-token')}\n`;
    const kube = `apiVersion: v1\nkind: Config\nusers:\n- name: ci\n  user:\n    token: ${serviceAccountJwt()}\n`;
    const adc = `{\n  "client_id": "${random('0123456789', 12)}-${random(ALNUM, 32).toLowerCase()}.apps.googleusercontent.com",\n  "client_secret": "${sample('google-oauth-client-secret')}",\n  "${sample('google-oauth-refresh-token')},\n  "type": "authorized_user"\n}\n`;
    const files: Record<string, string> = {
      '.pgpass': pgpass,
      'home/.pypirc': pypirc,
      'home/.kube/config': kube,
      'home/.config/gcloud/application_default_credentials.json': adc,
      'home/.config/gcloud/credentials.db': `SQLite format 3\0${random(ALNUM, 200)}`,
      'home/.config/gcloud/legacy_credentials/ci@example.iam/adc.json': adc,
      'home/.terraform.d/credentials.tfrc.json': `{"credentials":{"app.terraform.io":{"token":"${random(ALNUM, 14)}.atlasv1.${random(ALNUM, 67)}"}}}`,
      '.npmrc': `registry=https://registry.npmjs.org/\n//registry.npmjs.org/:${sample('npmrc-auth')}\n`,
      'deploy/registry.json': `{"auths":{"registry.internal":{${sample('docker-auth')}}}}`,
      'deploy/sts.json': `{"Credentials":{"${sample('aws-secret-access-key')},"Expiration":"2026-12-01T10:00:00Z"}}`,
      'k8s/tls.yaml': `apiVersion: v1\nkind: Secret\ndata:\n  tls.key: ${sample('base64-private-key')}\n`,
      'src/db.ts': `export const url = '${sample('url-password')}';\n`,
      'ci/notify.sh': `curl -X POST ${sample('slack-webhook')} -d @msg.json\n`,
    };
    const kept: Record<string, string> = {
      'web/.npmrc': `//registry.npmjs.org/:_authToken=\${NPM_TOKEN}\nengine-strict=true\n`,
      'README.md': 'Connect with postgres://user:password@localhost:5432/db and export NPM_TOKEN.\n',
      'home/.config/gcloud/configurations/config_default': '[core]\nproject = demo\n',
      'home/.docker/daemon.json': '{"features":{"buildkit":true}}\n',
    };
    for (const [rel, text] of Object.entries({ ...files, ...kept })) writeFile(dir, rel, text);
    const result = await b.snapshots.checkpoint({ dir, workspace: 'creds' });
    const reasons = Object.fromEntries(result.excluded.map((e) => [e.path, `${e.reason} ${e.rule}`]));
    expect(reasons).toEqual({
      '.pgpass': 'secret-path .pgpass',
      'home/.pypirc': 'secret-path .pypirc',
      'home/.kube/config': 'secret-path .kube/config',
      'home/.config/gcloud/application_default_credentials.json': 'secret-path gcloud/application_default_credentials.json',
      'home/.config/gcloud/credentials.db': 'secret-path gcloud/credentials.db',
      'home/.config/gcloud/legacy_credentials': 'secret-path gcloud/legacy_credentials/',
      'home/.terraform.d/credentials.tfrc.json': 'secret-path .terraform.d/credentials.tfrc.json',
      '.npmrc': 'secret-content npmrc-auth',
      'deploy/registry.json': 'secret-content docker-auth',
      'deploy/sts.json': 'secret-content aws-secret-access-key',
      'k8s/tls.yaml': 'secret-content base64-private-key',
      'src/db.ts': 'secret-content url-password',
      'ci/notify.sh': 'secret-content slack-webhook',
    });
    for (const rel of Object.keys(kept)) {
      const parts: Buffer[] = [];
      for await (const piece of b.snapshots.cat(result.checkpoint.id, rel)) parts.push(Buffer.from(piece));
      expect(Buffer.concat(parts).toString(), rel).toBe(kept[rel]);
    }
    const needles = Object.values(files).map((text) => text.slice(text.length >> 2, (text.length >> 2) + 32));
    expect(await expectNoneStored(b.blobs, needles)).toBeGreaterThan(0);
  }, 120_000);
});
