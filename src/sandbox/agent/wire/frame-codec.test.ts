import { describe, expect, it } from 'vitest';
import { type DecodedFrame, encodeFrame, FrameDecoder } from './frame-codec.js';
import { MAX_FRAME_BYTES, MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES } from './protocol.js';

function frameBytes(header: object, payload?: Uint8Array): Buffer {
  return Buffer.concat(encodeFrame(header, payload));
}

function rawFrame(bodyBytes: number, headerBytes: number, rest: Buffer = Buffer.alloc(0)): Buffer {
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(bodyBytes, 0);
  prefix.writeUInt32BE(headerBytes, 4);
  return Buffer.concat([prefix, rest]);
}

function frames(decoded: DecodedFrame[]): Array<{ header: Record<string, unknown>; payload: string }> {
  return decoded.map((d) => {
    if (d.kind !== 'frame') throw new Error(`unexpected ${d.kind}`);
    return { header: d.frame.header, payload: d.frame.payload.toString('utf8') };
  });
}

describe('frame codec', () => {
  const sample = [
    { header: { id: 1, op: 'read', paths: ['a', 'ü/ñ'] }, payload: '' },
    { header: { id: 2, more: true }, payload: 'x'.repeat(70_000) },
    { header: { id: 3, result: { ok: true } }, payload: 'tail' },
  ];
  const stream = Buffer.concat(sample.map((f) => frameBytes(f.header, Buffer.from(f.payload))));

  it('round-trips frames merged into one chunk', () => {
    expect(frames(new FrameDecoder().push(stream))).toEqual(sample);
  });

  it('reassembles frames split at every byte boundary', () => {
    const decoder = new FrameDecoder();
    const out: DecodedFrame[] = [];
    for (let i = 0; i < stream.length; i += 1) out.push(...decoder.push(stream.subarray(i, i + 1)));
    expect(frames(out)).toEqual(sample);
    expect(decoder.pendingBytes).toBe(0);
  });

  it('reassembles frames cut at random places', () => {
    for (let seed = 1; seed <= 20; seed += 1) {
      const decoder = new FrameDecoder();
      const out: DecodedFrame[] = [];
      let at = 0;
      let x = seed;
      while (at < stream.length) {
        x = (x * 1103515245 + 12345) % 2 ** 31;
        const n = 1 + (x % 9000);
        out.push(...decoder.push(stream.subarray(at, at + n)));
        at += n;
      }
      expect(frames(out)).toEqual(sample);
    }
  });

  it('reports an oversized frame as fatal, keeps the frames before it and ignores everything after', () => {
    const decoder = new FrameDecoder();
    const good = frameBytes({ id: 1 });
    const out = decoder.push(Buffer.concat([good, rawFrame(MAX_FRAME_BYTES + 1, 10), good]));
    expect(out.map((d) => d.kind)).toEqual(['frame', 'fatal']);
    expect(out[1]?.kind === 'fatal' && out[1].error.code).toBe('LIMIT_EXCEEDED');
    expect(decoder.push(good)).toEqual([]);
    expect(decoder.failed?.code).toBe('LIMIT_EXCEEDED');
  });

  it('refuses an oversized header or payload length before the body arrives', () => {
    const header = new FrameDecoder().push(rawFrame(MAX_HEADER_BYTES + 10, MAX_HEADER_BYTES + 1));
    expect(header[0]?.kind === 'fatal' && header[0].error.code).toBe('LIMIT_EXCEEDED');
    const payload = new FrameDecoder().push(rawFrame(MAX_PAYLOAD_BYTES + 2, 1));
    expect(payload[0]?.kind === 'fatal' && payload[0].error.code).toBe('LIMIT_EXCEEDED');
  });

  it('refuses a header length larger than its frame as INVALID_INPUT', () => {
    const out = new FrameDecoder().push(rawFrame(4, 9, Buffer.from('{}{}')));
    expect(out[0]?.kind === 'fatal' && out[0].error.code).toBe('INVALID_INPUT');
  });

  it('skips a frame whose header is not a JSON object and stays in step', () => {
    const bad = [Buffer.from('not json'), Buffer.from('[1,2]'), Buffer.from([0xff, 0xfe, 0x7b, 0x7d])];
    const chunks = bad.map((h) => rawFrame(h.length + 2, h.length, Buffer.concat([h, Buffer.from('pp')])));
    const out = new FrameDecoder().push(Buffer.concat([...chunks, frameBytes({ id: 7 }, Buffer.from('ok'))]));
    expect(out.map((d) => d.kind)).toEqual(['malformed', 'malformed', 'malformed', 'frame']);
    expect(out.slice(0, 3).map((d) => (d.kind === 'malformed' ? d.error.code : ''))).toEqual([
      'INVALID_INPUT',
      'INVALID_INPUT',
      'INVALID_INPUT',
    ]);
    expect(frames(out.slice(3))).toEqual([{ header: { id: 7 }, payload: 'ok' }]);
  });

  it('refuses to encode a payload over the limit', () => {
    expect(() => encodeFrame({ id: 1 }, new Uint8Array(MAX_PAYLOAD_BYTES + 1))).toThrow(
      expect.objectContaining({ code: 'LIMIT_EXCEEDED' }),
    );
    expect(() => encodeFrame({ id: 1, big: 'x'.repeat(MAX_HEADER_BYTES) })).toThrow(expect.objectContaining({ code: 'LIMIT_EXCEEDED' }));
  });
});
