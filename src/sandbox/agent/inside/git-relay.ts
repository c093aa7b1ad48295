/**
 * The two git modes of the staged agent (see `wire/git-relay-protocol.ts`):
 *
 * - `--git-relay`: started by the host over exec with stdin/stdout (the agent's own channel);
 *   listens on `<home>/.holdfast/git-relay.sock` and carries the bytes of each connection to
 *   the host as frames, and the host's bytes back. It holds no credential and parses nothing.
 * - `--git-remote <remote> <url>`: run by git as `git-remote-holdfast` for a
 *   `holdfast://<binding>` URL (the host's `url.<…>.insteadOf` turns the binding's URL into
 *   one). It listens on an ephemeral loopback port in its own network namespace (each exec of
 *   a bwrap sandbox has one), hands each connection to the relay's socket, and runs git's own
 *   smart-HTTP helper (`git remote-http`) against `http://127.0.0.1:<port>/<binding>/` on the
 *   stdio git gave it. When no relay listens it answers 503, so git says why.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import {
  GIT_RELAY_FLAG,
  GIT_RELAY_SOCKET,
  GIT_REMOTE_FLAG,
  GIT_REMOTE_SCHEME,
  MAX_RELAY_CHUNK_BYTES,
  type RelayHeader,
} from '../wire/git-relay-protocol.js';

/** Connections the relay carries at once (the host bounds them again). */
const MAX_RELAY_CONNECTIONS = 16;
/** What the helper answers when no relay listens (no run session holds the sandbox). */
const NO_RELAY_BODY = "holdfast: no git relay is running for this sandbox; git reaches a run's remotes during its turns\n";
const NO_RELAY_ANSWER = `HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(NO_RELAY_BODY)}\r\n\r\n${NO_RELAY_BODY}`;

/**
 * The agent's git modes: when `argv` (the agent's arguments) names one, runs it with the
 * agent's state directory and resolves with its exit code; otherwise resolves undefined.
 */
export async function runGitMode(stateDir: string, argv: readonly string[]): Promise<number | undefined> {
  if (argv.includes(GIT_RELAY_FLAG)) return runGitRelay(stateDir);
  const at = argv.indexOf(GIT_REMOTE_FLAG);
  if (at >= 0) return runGitRemote(stateDir, argv.slice(at + 1));
  return undefined;
}

/**
 * The relay: resolves with the exit code once stdin ends (the host closed it) or a frame
 * cannot be read. Runs with `stateDir` as its working directory, so the socket's path is short.
 */
export async function runGitRelay(stateDir: string): Promise<number> {
  fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  process.chdir(stateDir);
  fs.rmSync(GIT_RELAY_SOCKET, { force: true });
  const sockets = new Map<number, net.Socket>();
  let next = 1;
  const send = (header: RelayHeader, payload?: Buffer): void => {
    let ok = true;
    for (const b of encodeFrame(header, payload)) ok = process.stdout.write(b) && ok;
    if (!ok) {
      // The host is behind: stop reading connections until stdout drains.
      for (const s of sockets.values()) s.pause();
      process.stdout.once('drain', () => {
        for (const s of sockets.values()) s.resume();
      });
    }
  };
  const server = net.createServer((socket) => {
    if (sockets.size >= MAX_RELAY_CONNECTIONS) {
      socket.destroy();
      return;
    }
    const c = next++;
    sockets.set(c, socket);
    send({ t: 'open', c });
    socket.on('data', (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; at += MAX_RELAY_CHUNK_BYTES)
        send({ t: 'data', c }, chunk.subarray(at, at + MAX_RELAY_CHUNK_BYTES));
    });
    socket.on('end', () => send({ t: 'end', c }));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (sockets.delete(c)) send({ t: 'close', c });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(GIT_RELAY_SOCKET, () => resolve());
  });
  fs.chmodSync(GIT_RELAY_SOCKET, 0o600);
  send({ t: 'ready' });
  const decoder = new FrameDecoder();
  const code = await new Promise<number>((resolve) => {
    process.stdin.on('data', (chunk: Buffer) => {
      for (const d of decoder.push(chunk)) {
        if (d.kind === 'fatal') resolve(2);
        if (d.kind !== 'frame') continue;
        const header = d.frame.header as unknown as RelayHeader;
        const socket = typeof header.c === 'number' ? sockets.get(header.c) : undefined;
        if (socket === undefined) continue;
        if (header.t === 'data' && !socket.write(d.frame.payload)) {
          // Paused until the connection drains or goes away (a closed one never drains).
          process.stdin.pause();
          const resume = (): void => {
            socket.off('drain', resume);
            socket.off('close', resume);
            process.stdin.resume();
          };
          socket.on('drain', resume);
          socket.on('close', resume);
        } else if (header.t === 'end') socket.end();
        else if (header.t === 'close') {
          sockets.delete(header.c as number);
          socket.destroy();
        }
      }
    });
    process.stdin.on('end', () => resolve(0));
    process.stdin.on('error', () => resolve(0));
  });
  server.close();
  for (const s of sockets.values()) s.destroy();
  fs.rmSync(GIT_RELAY_SOCKET, { force: true });
  return code;
}

/**
 * git's remote helper for `holdfast://<binding>`: resolves with `git remote-http`'s exit code.
 * `argv` is what git passes: the remote's name and the URL.
 */
export async function runGitRemote(stateDir: string, argv: readonly string[]): Promise<number> {
  const [remote = 'origin', url = remote] = argv;
  const prefix = `${GIT_REMOTE_SCHEME}://`;
  const name = url.startsWith(prefix) ? url.slice(prefix.length).replace(/\/+$/, '') : '';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) {
    process.stderr.write(`holdfast: ${url} does not name a repository binding (expected ${prefix}<name>)\n`);
    return 128;
  }
  const socketPath = `${stateDir}/${GIT_RELAY_SOCKET}`;
  const server = net.createServer((client) => {
    client.on('error', () => undefined);
    const relay = net.connect(socketPath.length < 100 ? socketPath : relativeSocket(stateDir));
    relay.on('error', () => {
      if (!client.destroyed) client.end(NO_RELAY_ANSWER);
    });
    relay.on('connect', () => {
      client.pipe(relay);
      relay.pipe(client);
    });
    client.on('close', () => relay.destroy());
    relay.on('close', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  const child = spawn('git', ['remote-http', remote, `http://127.0.0.1:${port}/${name}/`], { stdio: 'inherit' });
  const code = await new Promise<number>((resolve) => {
    child.on('error', () => resolve(128));
    child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal === null ? 128 : 128 + 9)));
  });
  server.close();
  return code;
}

/** A socket path too long for `sockaddr_un` is reached relative to the working directory. */
function relativeSocket(stateDir: string): string {
  process.chdir(stateDir);
  return GIT_RELAY_SOCKET;
}
