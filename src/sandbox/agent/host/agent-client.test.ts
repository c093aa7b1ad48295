import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import { PROTOCOL_VERSION } from '../wire/protocol.js';
import { AgentClient } from './agent-client.js';
import type { AgentChannel, AgentExit } from './agent-connection.js';

type Request = Record<string, unknown> & { id: number; op: string };

/**
 * An in-process stand-in for the agent, for faults the real one never makes on purpose
 * (another protocol version, answers out of order, silence, dying mid-request).
 */
function fakeAgent(serve: (req: Request, reply: (header: object, payload?: Uint8Array) => void) => void) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let exitWith: (exit: AgentExit) => void = () => undefined;
  const exit = new Promise<AgentExit>((resolve) => {
    exitWith = resolve;
  });
  let killed = false;
  const decoder = new FrameDecoder();
  const reply = (header: object, payload?: Uint8Array): void => {
    for (const b of encodeFrame(header, payload)) stdout.write(b);
  };
  stdin.on('data', (chunk: Buffer) => {
    for (const d of decoder.push(chunk)) if (d.kind === 'frame') serve(d.frame.header as Request, reply);
  });
  const die = (code: number | null, signal: string | null, why = ''): void => {
    stderr.write(why);
    stdout.end();
    setImmediate(() => exitWith({ code, signal }));
  };
  stdin.on('finish', () => die(0, null));
  const channel: AgentChannel = {
    stdin,
    stdout,
    stderr,
    exit,
    kill: () => {
      killed = true;
      die(null, 'SIGKILL');
    },
  };
  return { channel, die, wasKilled: () => killed };
}

const hello = (req: Request, reply: (h: object) => void, version = PROTOCOL_VERSION): void =>
  reply({ id: req.id, result: { version, agentHash: 'x', node: 'v20', platform: 'linux', arch: 'x64', pid: 1 } });

describe('AgentClient against a fake agent', () => {
  it('refuses an agent speaking another protocol version', async () => {
    const fake = fakeAgent((req, reply) => hello(req, reply, PROTOCOL_VERSION + 1));
    await expect(AgentClient.connect(fake.channel)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('matches answers to requests by id, whatever their order', async () => {
    const held: Array<() => void> = [];
    const fake = fakeAgent((req, reply) => {
      if (req.op === 'hello') return hello(req, reply);
      held.push(() => reply({ id: req.id, result: { removed: req.stagingId === 'yes' } }));
      if (held.length === 2) for (const answer of held.reverse()) answer();
    });
    const client = await AgentClient.connect(fake.channel);
    await expect(Promise.all([client.abort('yes'), client.abort('no')])).resolves.toEqual([true, false]);
  });

  it('keeps at most maxInFlight requests outstanding and sends them in call order', async () => {
    const seen: string[] = [];
    let outstanding = 0;
    let peak = 0;
    const fake = fakeAgent((req, reply) => {
      if (req.op === 'hello') return hello(req, reply);
      seen.push(String(req.stagingId));
      outstanding += 1;
      peak = Math.max(peak, outstanding);
      setTimeout(() => {
        outstanding -= 1;
        reply({ id: req.id, result: { removed: true } });
      }, 5);
    });
    const client = await AgentClient.connect(fake.channel, { maxInFlight: 3 });
    const ids = Array.from({ length: 12 }, (_, i) => `s${i}`);
    await Promise.all(ids.map((id) => client.abort(id)));
    expect(peak).toBe(3);
    expect(seen).toEqual(ids);
  });

  it('maps error frames to HoldfastErrors with the same code', async () => {
    const fake = fakeAgent((req, reply) => {
      if (req.op === 'hello') return hello(req, reply);
      reply({ id: req.id, error: { code: 'INTEGRITY', message: 'bad bytes', data: { path: 'a' } } });
    });
    const client = await AgentClient.connect(fake.channel);
    await expect(client.probe()).rejects.toMatchObject({ name: 'IntegrityError', code: 'INTEGRITY', data: { path: 'a', op: 'probe' } });
  });

  it('fails waiting requests with STORE_UNAVAILABLE and the stderr tail when the agent dies', async () => {
    const fake = fakeAgent((req, reply) => {
      if (req.op === 'hello') return hello(req, reply);
      fake.die(137, null, 'out of memory\n');
    });
    const client = await AgentClient.connect(fake.channel);
    const error = await client.probe().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'STORE_UNAVAILABLE', data: { stderr: 'out of memory', transient: true } });
    await expect(client.probe()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });

  it('gives up on a silent agent with TIMEOUT and kills it', async () => {
    const fake = fakeAgent((req, reply) => {
      if (req.op === 'hello') hello(req, reply);
    });
    const client = await AgentClient.connect(fake.channel, { timeoutMs: 200 });
    await expect(client.probe()).rejects.toMatchObject({ code: 'TIMEOUT' });
    expect(fake.wasKilled()).toBe(true);
  });

  it('closes by ending stdin and returns the exit', async () => {
    const fake = fakeAgent((req, reply) => hello(req, reply));
    const client = await AgentClient.connect(fake.channel);
    await expect(client.close()).resolves.toEqual({ code: 0, signal: null });
  });
});
