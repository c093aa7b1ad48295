/**
 * The agent reads its stdin in a thread of its own (`inside/stdin-thread.ts`), so requests cross
 * the pipe while it applies the one before. What that must keep: every byte in order whatever
 * the pace on either side, backpressure (a paused reader resumes and loses nothing), a bound on
 * what the thread takes while the main thread is too busy to take it, an exit
 * while the host still holds stdin open, and a stdin that is not a pipe (a file), read the old way.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder } from '../../src/sandbox/agent/wire/frame-codec.js';
import { PROTOCOL_VERSION } from '../../src/sandbox/agent/wire/protocol.js';
import { buildAgentBundle, connectAgent, tempDir } from './agent-harness.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function dir(prefix: string): string {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}

describe('the agent reading stdin in a thread', () => {
  it('a stdin that is a regular file (not a pipe) is read the old way: every request answered, then exit 0 at its end', async () => {
    const home = dir('stdin-file');
    const requests = path.join(home, 'requests.bin');
    const frames = [
      ...encodeFrame({ id: 1, op: 'hello', version: PROTOCOL_VERSION }),
      ...encodeFrame({ id: 2, op: 'probe' }),
      ...encodeFrame({ id: 3, op: 'stage-abort', stagingId: 'none' }),
    ];
    fs.writeFileSync(requests, Buffer.concat(frames));
    const stdin = fs.openSync(requests, 'r');
    const child = spawn(process.execPath, [buildAgentBundle(), '--home', home], { stdio: [stdin, 'pipe', 'pipe'] });
    fs.closeSync(stdin);
    const decoder = new FrameDecoder();
    const answers: Array<Record<string, unknown>> = [];
    child.stdout?.on('data', (c: Buffer) => {
      for (const d of decoder.push(c)) if (d.kind === 'frame') answers.push(d.frame.header);
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(answers.map((a) => [a.id, (a.error as { code?: string } | undefined)?.code ?? 'ok'])).toEqual([
      [1, 'ok'],
      [2, 'ok'],
      [3, 'ok'],
    ]);
  });

  it("64 MiB of write batches pipelined 16 deep (past the reader's and the queue's pause marks): every file lands whole", async () => {
    const home = dir('stdin-pipe');
    const target = path.join(dir('stdin-target'), 'ws');
    const { client, channel } = await connectAgent(home);
    try {
      const stagingId = 'rpipelined';
      await client.stageBegin({ stagingId, target, replace: false });
      const files: Array<{ path: string; bytes: Buffer }> = [];
      const sent: Array<Promise<unknown>> = [];
      for (let b = 0; b < 16; b += 1) {
        // 4 MiB a batch, each file's bytes derived from its index so any reorder or loss shows in its hash.
        const bytes = Buffer.alloc(4 * 1024 * 1024);
        for (let at = 0; at < bytes.length; at += 32) createHash('sha256').update(`${b}:${at}`).digest().copy(bytes, at);
        const file = { path: `f${b}.bin`, bytes };
        files.push(file);
        const sha256 = createHash('sha256').update(bytes).digest('hex');
        const op = {
          op: 'file' as const,
          path: file.path,
          size: bytes.length,
          sha256,
          at: 0,
          offset: 0,
          length: bytes.length,
          mode: 0o644,
          mtimeMs: 1_700_000_000_000,
        };
        sent.push(client.write({ stagingId, batchId: `b${b}`, ops: [op], payload: bytes }));
      }
      const results = await Promise.all(sent);
      expect(results).toEqual(files.map(() => ({ applied: true, ops: 1 })));
      await client.publish({ stagingId, target });
      for (const f of files)
        expect(
          createHash('sha256')
            .update(fs.readFileSync(path.join(target, f.path)))
            .digest('hex'),
        ).toBe(createHash('sha256').update(f.bytes).digest('hex'));
      expect(fs.readdirSync(target).sort()).toEqual(files.map((f) => f.path).sort());
    } finally {
      await client.close();
      await channel.exit;
    }
  });

  it('while the main thread is blocked the thread takes no more than its posted limit from the pipe, then hands over every byte in order', async () => {
    const home = dir('stdin-bound');
    const go = path.join(home, 'go');
    const limit = 1024 * 1024;
    const script = path.join(home, 'reader.mts');
    const module = pathToFileURL(path.resolve('src/sandbox/agent/inside/stdin-thread.ts')).href;
    // The main thread blocks (never returns to its event loop, so no message from the thread is
    // taken) until the test says go; then it reads the stream to its end and reports hash and length.
    fs.writeFileSync(
      script,
      `import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { stdinThread } from ${JSON.stringify(module)};
const stream = stdinThread(${limit}, ${limit});
const nap = new Int32Array(new SharedArrayBuffer(4));
while (!fs.existsSync(${JSON.stringify(go)})) Atomics.wait(nap, 0, 0, 20);
const hash = createHash('sha256');
let length = 0;
for await (const chunk of stream) { hash.update(chunk); length += chunk.length; }
// The thread keeps the process alive (as in the agent, which exits when its server is done).
process.stdout.write(JSON.stringify({ sha256: hash.digest('hex'), length }), () => process.exit(0));
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const closed = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    const total = 32 * 1024 * 1024;
    const piece = 64 * 1024;
    const whole = createHash('sha256');
    let accepted = 0;
    let written = 0;
    const writeAll = async (): Promise<void> => {
      while (written < total) {
        const bytes = createHash('sha512').update(`${written}`).digest();
        const chunk = Buffer.alloc(piece);
        for (let at = 0; at < piece; at += bytes.length) bytes.copy(chunk, at);
        whole.update(chunk);
        written += piece;
        const more = child.stdin.write(chunk, () => {
          accepted += piece;
        });
        if (!more) await new Promise((resolve) => child.stdin.once('drain', resolve));
      }
      child.stdin.end();
    };
    const writing = writeAll();
    // Wait until the pipe stops taking bytes once the thread is reading (it paused), or all were
    // taken (no bound). Half the limit first, so a child still starting is not taken for a pause.
    let seen = -1;
    while ((accepted !== seen || accepted < limit / 2) && accepted < total) {
      seen = accepted;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    const takenWhileBlocked = accepted;
    fs.writeFileSync(go, '');
    await writing;
    expect(await closed).toBe(0);
    // The posted limit, plus the read that crossed it and what the socket between the two
    // processes buffers (spawn's 'pipe' is a socket pair, some hundreds of KiB).
    expect(takenWhileBlocked).toBeLessThanOrEqual(2 * limit);
    expect(JSON.parse(out)).toEqual({ sha256: whole.digest('hex'), length: total });
  });

  it('the agent exits at once after a framing error while the host still holds stdin open (the reader thread does not keep it alive)', async () => {
    const home = dir('stdin-open');
    const { channel } = await connectAgent(home);
    const huge = Buffer.alloc(8);
    huge.writeUInt32BE(0xffffffff, 0);
    huge.writeUInt32BE(8, 4);
    channel.stdin.write(huge);
    expect(await channel.exit).toEqual({ code: 2, signal: null });
  });
});
