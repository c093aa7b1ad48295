import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openMetadataStore } from '../src/metadata/metadata-store.js';
import { generateToken, hashToken } from '../src/tenants/tokens.js';
import { createTestDatabase, type TestDatabase } from './support/postgres.js';
import { type S3TestTarget, startS3Target } from './support/s3-server.js';

const MAIN = path.resolve('dist/bin/main.js');
/** Writes racing on the two servers at once. */
const CONCURRENT_WRITES = 120;
/** Paths the racing writes share (the rest each write their own path). */
const SHARED_PATHS = 4;
/** Sequential writes to one path, alternating between the servers. */
const ALTERNATING_WRITES = 20;
/** `parent` as a file against `parent/child` on the other server, this many times. */
const KIND_RACES = 12;
/** How long a server may take to print its listening line. */
const SERVE_START_TIMEOUT_MS = 20_000;

interface Server {
  readonly child: ChildProcess;
  readonly url: string;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Two `holdfast serve` processes on one PostgreSQL database and one S3 endpoint writing the
 * same collection: every acknowledged write is there afterwards, mutations of the collection
 * are serialised across the processes, and a kind clash between them has exactly one winner.
 */
describe('work folders: two holdfast serve processes on one PostgreSQL + S3', () => {
  let dir: string;
  let db: TestDatabase;
  let s3: S3TestTarget;
  let env: NodeJS.ProcessEnv;
  let token: string;
  const servers: Server[] = [];

  const start = async (name: string): Promise<Server> => {
    const child = spawn(process.execPath, [MAIN, 'serve', '--port', '0'], {
      env: { ...env, HOLDFAST_CACHE_DIR: path.join(dir, `cache-${name}`) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const logs: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not listen: ${logs.join('\n')}`)), SERVE_START_TIMEOUT_MS);
      let buffered = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          logs.push(line);
          const parsed = JSON.parse(line) as { msg?: string; url?: string };
          if (parsed.msg === 'listening' && parsed.url !== undefined) {
            clearTimeout(timer);
            resolve(parsed.url);
          }
        }
      });
      child.stderr?.on('data', (chunk: Buffer) => logs.push(chunk.toString()));
      child.on('exit', (code) => reject(new Error(`${name} exited with ${code} before listening: ${logs.join('\n')}`)));
    });
    const server = { child, url };
    servers.push(server);
    return server;
  };
  const route = (suffix: string, query: Record<string, string> = {}) => {
    const search = new URLSearchParams(query).toString();
    return `/api/companies/default/work-folders/project/shared-project${suffix}${search === '' ? '' : `?${search}`}`;
  };
  const put = async (server: Server, filePath: string, content: string, key: string) => {
    const response = await fetch(`${server.url}${route('/content', { path: filePath })}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream', 'idempotency-key': key },
      body: content,
    });
    // biome-ignore lint/suspicious/noExplicitAny: JSON answers
    return { status: response.status, body: (await response.json()) as any };
  };
  const get = async (server: Server, filePath: string) => {
    const response = await fetch(`${server.url}${route('/content', { path: filePath })}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: response.status, text: await response.text() };
  };
  const listAll = async (server: Server) => {
    const files: { path: string; kind: string; sha256: string | null }[] = [];
    let cursor: string | null = null;
    do {
      const response = await fetch(`${server.url}${route('', { limit: '1000', ...(cursor === null ? {} : { cursor }) })}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(response.status).toBe(200);
      const page = (await response.json()) as { files: typeof files; nextCursor: string | null };
      files.push(...page.files);
      cursor = page.nextCursor;
    } while (cursor !== null);
    return files;
  };

  beforeAll(async () => {
    expect(existsSync(MAIN), `${MAIN} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'hf-folders-cluster-'));
    db = await createTestDatabase();
    s3 = await startS3Target();
    env = {
      ...process.env,
      HOLDFAST_META: db.url,
      HOLDFAST_BLOBS: `s3://${s3.bucket}/${s3.prefix}?endpoint=${encodeURIComponent(s3.endpoint)}&region=${s3.region}&forcePathStyle=true`,
      AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
      HOLDFAST_SANDBOX_DIR: path.join(dir, 'sandboxes'),
    };
    const meta = await openMetadataStore({ kind: 'postgres', url: db.url });
    try {
      const tenant = await meta.tenants.create({ name: 'default' });
      token = generateToken();
      await meta.tokens.create({ tenantId: tenant.id, name: 'folders-cluster', hash: hashToken(token), admin: false });
    } finally {
      await meta.close();
    }
    await start('a');
    await start('b');
  });

  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGKILL');
    await s3?.close();
    await db?.drop();
    if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
  });

  it(`${CONCURRENT_WRITES} writes racing on both servers: every acknowledged one is there, shared paths hold one acknowledged version`, async () => {
    const [a, b] = servers as [Server, Server];
    const writes = Array.from({ length: CONCURRENT_WRITES }, (_, i) => {
      const shared = i % 3 === 0;
      const filePath = shared ? `shared/s${i % SHARED_PATHS}.txt` : `own/f${i}.txt`;
      return { i, filePath, content: `write ${i} via ${i % 2 === 0 ? 'a' : 'b'}`, server: i % 2 === 0 ? a : b };
    });
    const answers = await Promise.all(writes.map((w) => put(w.server, w.filePath, w.content, `race-${w.i}`)));
    for (const [i, answer] of answers.entries()) expect(answer.status, `write ${i}: ${JSON.stringify(answer.body)}`).toBe(200);

    const listed = new Map((await listAll(b)).map((f) => [f.path, f]));
    for (const w of writes.filter((x) => !x.filePath.startsWith('shared/'))) {
      expect(listed.get(w.filePath)?.sha256, w.filePath).toBe(sha256(w.content));
      expect((await get(w.i % 2 === 0 ? b : a, w.filePath)).text).toBe(w.content);
    }
    for (let s = 0; s < SHARED_PATHS; s += 1) {
      const filePath = `shared/s${s}.txt`;
      const candidates = writes.filter((w) => w.filePath === filePath).map((w) => w.content);
      const { text } = await get(a, filePath);
      expect(candidates).toContain(text);
      expect(listed.get(filePath)?.sha256).toBe(sha256(text));
    }
    // Each operation id was applied once: replaying any of them on the other server changes nothing.
    const replay = await put(b, writes[0]?.filePath ?? '', writes[0]?.content ?? '', 'race-0');
    expect(replay.body.applied).toBe(false);
  });

  it(`${ALTERNATING_WRITES} acknowledged writes to one path, alternating servers: the last acknowledged one is what both serve`, async () => {
    const [a, b] = servers as [Server, Server];
    let last = '';
    for (let i = 0; i < ALTERNATING_WRITES; i += 1) {
      last = `version ${i}`;
      const answer = await put(i % 2 === 0 ? a : b, 'alternating.txt', last, `alt-${i}`);
      expect(answer.status).toBe(200);
      // Any server reads what was just acknowledged on the other one.
      expect((await get(i % 2 === 0 ? b : a, 'alternating.txt')).text).toBe(last);
    }
    // Old operations replayed late on either server never overwrite the newer content.
    for (let i = 0; i < ALTERNATING_WRITES - 1; i += 5) {
      expect((await put(i % 2 === 0 ? b : a, 'alternating.txt', `version ${i}`, `alt-${i}`)).body.applied).toBe(false);
    }
    expect((await get(a, 'alternating.txt')).text).toBe(last);
    expect((await get(b, 'alternating.txt')).text).toBe(last);
  });

  it(`\`parent\` as a file on one server against \`parent/child\` on the other, ${KIND_RACES} times: exactly one wins, the other is 409, and the collection is consistent`, async () => {
    const [a, b] = servers as [Server, Server];
    for (let i = 0; i < KIND_RACES; i += 1) {
      const parent = `race/p${i}`;
      const [file, child] = await Promise.all([
        put(i % 2 === 0 ? a : b, parent, 'a file', `kind-file-${i}`),
        put(i % 2 === 0 ? b : a, `${parent}/child`, 'a child', `kind-child-${i}`),
      ]);
      const statuses = [file.status, child.status].sort();
      expect(statuses, `${parent}: ${JSON.stringify([file.body, child.body])}`).toEqual([200, 409]);
      const loser = file.status === 409 ? file : child;
      expect(loser.body.error.code).toBe('CONFLICT');
      const rows = (await listAll(a)).filter((f) => f.path === parent || f.path.startsWith(`${parent}/`));
      if (file.status === 200) expect(rows.map((r) => `${r.kind}:${r.path}`)).toEqual([`file:${parent}`]);
      else expect(rows.map((r) => `${r.kind}:${r.path}`)).toEqual([`directory:${parent}`, `file:${parent}/child`]);
    }
  });
});
