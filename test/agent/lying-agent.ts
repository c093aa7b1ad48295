import { PassThrough } from 'node:stream';
import type { AgentChannel } from '../../src/sandbox/agent/host/agent-connection.js';
import { encodeFrame, FrameDecoder } from '../../src/sandbox/agent/wire/frame-codec.js';
import { SCAN_PART_BYTES, type ScanWire } from '../../src/sandbox/agent/wire/protocol.js';

/** Rewrites one scan answer (the parsed JSON the real agent sent); return what the host should get. */
export type ScanRewrite = (wire: ScanWire) => unknown;

/** Returned by a {@link ScanRewrite}: answer the scan with this error frame instead. */
export class ErrorAnswer {
  constructor(readonly error: Record<string, unknown>) {}
}

/**
 * What a sandbox can do to its own agent: the real agent keeps running and answers every request,
 * but its scan answers pass through `rewrite` before the host sees them (the sandbox user owns the
 * staged agent file, so it can keep `hello` right and change only `scan`). `readRewrite`, when
 * given, replaces the payload of `read-stream` parts for a path. Framing stays valid throughout.
 */
export function lyingChannel(
  inner: AgentChannel,
  rewrite: ScanRewrite,
  options: { readonly streamPad?: (path: string) => Buffer | undefined } = {},
): AgentChannel {
  const ops = new Map<number, { op: string; path?: string }>();
  const requests = new FrameDecoder();
  const stdin = new PassThrough();
  stdin.on('data', (chunk: Buffer) => {
    for (const d of requests.push(chunk)) {
      if (d.kind === 'frame')
        ops.set(d.frame.header.id as number, { op: d.frame.header.op as string, path: d.frame.header.path as string });
    }
    inner.stdin?.write(chunk);
  });
  stdin.on('end', () => inner.stdin?.end());

  const answers = new FrameDecoder();
  const stdout = new PassThrough();
  const scanParts = new Map<number, Buffer[]>();
  const send = (header: object, payload?: Uint8Array): void => {
    for (const b of encodeFrame(header, payload)) stdout.write(b);
  };
  inner.stdout.on('data', (chunk: Buffer) => {
    for (const d of answers.push(chunk)) {
      if (d.kind !== 'frame') continue;
      const { header, payload } = d.frame;
      const id = header.id as number;
      const req = ops.get(id);
      if (req?.op === 'scan') {
        if (header.more === true) {
          scanParts.set(id, [...(scanParts.get(id) ?? []), payload]);
          continue;
        }
        if (header.result !== undefined) {
          const wire = JSON.parse(Buffer.concat(scanParts.get(id) ?? []).toString('utf8')) as ScanWire;
          const answer = rewrite(wire);
          if (answer instanceof ErrorAnswer) {
            send({ id, error: answer.error });
            continue;
          }
          const json = Buffer.from(JSON.stringify(answer), 'utf8');
          for (let at = 0; at < json.length; at += SCAN_PART_BYTES) send({ id, more: true, at }, json.subarray(at, at + SCAN_PART_BYTES));
          send({ id, result: { ...(header.result as object), bytes: json.length } });
          continue;
        }
      }
      if (req?.op === 'read-stream' && header.more === true && req.path !== undefined) {
        const pad = options.streamPad?.(req.path);
        if (pad !== undefined) {
          send(header, Buffer.concat([payload, pad]));
          continue;
        }
      }
      send(header, payload);
    }
  });
  inner.stdout.on('end', () => stdout.end());
  return { stdin, stdout, stderr: inner.stderr, exit: inner.exit, kill: () => inner.kill() };
}
