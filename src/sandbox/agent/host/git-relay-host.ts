import fsp from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { HoldfastError, InputError, StoreError } from '../../../errors.js';
import { encodeFrame, FrameDecoder } from '../wire/frame-codec.js';
import { GIT_RELAY_FLAG, MAX_RELAY_CHUNK_BYTES, type RelayHeader } from '../wire/git-relay-protocol.js';
import type { AgentChannel, AgentExecFn } from './agent-connection.js';
import { agentCommand, ensureAgent, locateAgentBundle } from './stage-agent.js';

/** Connections from the sandbox carried at once; more are dropped as they open. */
export const MAX_RELAY_CONNECTIONS = 8;
/** How long the sandbox has to send a request's headers (slow-loris bound). */
export const RELAY_HEADERS_TIMEOUT_MS = 10_000;
/** A connection with no byte either way for this long is closed. */
export const RELAY_IDLE_TIMEOUT_MS = 60_000;
/** Largest request head the host parses (request line and headers). */
const MAX_HEADER_BYTES = 16 * 1024;
/** Frames naming no open connection the host tolerates before it stops the relay (a flood). */
const MAX_STRAY_FRAMES = 1024;
/**
 * Connections the relay may open in one second. git opens a few per command; more is a relay
 * churning open/close frames to make the host create sockets, and it is stopped.
 */
export const MAX_RELAY_OPENS_PER_SECOND = 256;
/** How long the relay has to say it listens. */
const READY_TIMEOUT_MS = 30_000;

/** Where the staged agent (the relay's program) lives in a sandbox whose agent home is `agentHome`. */
export function stagedAgentPath(agentHome: string): string {
  return path.posix.join(agentHome, '.holdfast', `agent-${locateAgentBundle().hash}.mjs`);
}

/** Options of a relay host; the timeouts are for tests, the defaults are the product's. */
export interface GitRelayOptions {
  /** Answers one HTTP request from the sandbox (the host's judge of what it may do). */
  readonly handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  readonly headersTimeoutMs?: number;
  readonly idleTimeoutMs?: number;
  readonly maxConnections?: number;
  /** Told when the relay stops on its own (exit, broken or flooding frames), with why. */
  readonly onStopped?: (error: HoldfastError) => void;
}

/**
 * The host side of the sandbox's git relay. The relay in the sandbox only carries bytes; here
 * each of its connections is fed to an HTTP server private to this relay (a unix socket in a
 * 0700 temp directory, so Node's own HTTP parser, header and request timeouts apply, and no
 * other process can reach it), whose handler decides everything. Bounded: connections at once,
 * header size and time, idle time, stray frames (a relay that floods is stopped); the relay's
 * stdout is paused while a connection's socket is behind (backpressure, never buffering).
 */
export class GitRelayHost {
  private readonly decoder = new FrameDecoder();
  private readonly connections = new Map<number, net.Socket>();
  private stray = 0;
  /** Opens in the current one-second window, and when that window started. */
  private opens = { count: 0, since: 0 };
  private stopped: HoldfastError | undefined;
  private readonly closed: Promise<void>;
  /** The staged agent file in the sandbox (what the git helper runs); empty for a relay started elsewhere. */
  agentPath = '';

  private constructor(
    private readonly channel: AgentChannel,
    private readonly server: http.Server,
    private readonly socketPath: string,
    private readonly options: GitRelayOptions,
  ) {
    this.closed = channel.exit.then(
      () => undefined,
      () => undefined,
    );
    channel.stdin?.on('error', () => undefined);
    channel.stderr?.resume();
    channel.exit.then(
      () => this.stop(new StoreError('[git relay] the relay in the sandbox exited', { transient: true })),
      () => this.stop(new StoreError('[git relay] the relay in the sandbox failed', { transient: true })),
    );
  }

  /**
   * Stages the agent (when missing) and starts it as the relay over `exec`, then waits for it
   * to listen. `STORE_UNAVAILABLE` when it cannot start or does not get ready.
   */
  static async start(exec: AgentExecFn, agentHome: string, options: GitRelayOptions): Promise<GitRelayHost> {
    // The common case costs one exec: started straight under its content-addressed name (its
    // bytes need no check: nothing the relay sends is trusted); staged first only when that fails.
    const target = stagedAgentPath(agentHome);
    try {
      const host = await GitRelayHost.over(await exec([...agentCommand(target, agentHome), GIT_RELAY_FLAG], { stdin: 'pipe' }), options);
      host.agentPath = target;
      return host;
    } catch {
      // Missing or unusable: staged below, which reports precisely what is wrong.
    }
    const staged = await ensureAgent(exec, agentHome);
    const channel = await exec([...agentCommand(staged.path, agentHome), GIT_RELAY_FLAG], { stdin: 'pipe' });
    const host = await GitRelayHost.over(channel, options);
    host.agentPath = staged.path;
    return host;
  }

  /** A relay host over a relay already started on `channel` (waits for its `ready` frame). */
  static async over(channel: AgentChannel, options: GitRelayOptions): Promise<GitRelayHost> {
    const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'holdfast-relay-'));
    await fsp.chmod(dir, 0o700);
    const socketPath = path.join(dir, 'http.sock');
    const server = http.createServer(
      {
        maxHeaderSize: MAX_HEADER_BYTES,
        headersTimeout: options.headersTimeoutMs ?? RELAY_HEADERS_TIMEOUT_MS,
        requestTimeout: 0,
        connectionsCheckingInterval: Math.max(100, Math.floor((options.headersTimeoutMs ?? RELAY_HEADERS_TIMEOUT_MS) / 4)),
        keepAliveTimeout: 5_000,
      },
      options.handler,
    );
    server.maxHeadersCount = 64;
    server.timeout = options.idleTimeoutMs ?? RELAY_IDLE_TIMEOUT_MS;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
    const host = new GitRelayHost(channel, server, socketPath, options);
    try {
      await host.ready();
    } catch (error) {
      await host.close();
      throw error;
    }
    return host;
  }

  /** Why the relay stopped, once it did; undefined while it runs. */
  get failure(): HoldfastError | undefined {
    return this.stopped;
  }

  /** Stops the relay (its stdin ends; killed if it lingers), drops every connection, removes the socket. Never throws. */
  async close(): Promise<void> {
    this.stop(new HoldfastError('CANCELLED', '[git relay] closed by the host'));
    this.channel.stdin?.end();
    const timer = setTimeout(() => this.channel.kill(), 2_000);
    await this.closed;
    clearTimeout(timer);
  }

  private ready(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new StoreError('[git relay] the relay did not get ready in the sandbox', { transient: true }));
        this.channel.kill();
      }, READY_TIMEOUT_MS);
      let isReady = false;
      const stderr: Buffer[] = [];
      this.channel.stderr?.on('data', (c: Buffer) => {
        if (stderr.length < 16) stderr.push(c);
      });
      this.channel.stdout.on('data', (chunk: Buffer) => {
        for (const d of this.decoder.push(chunk)) {
          if (d.kind === 'fatal') {
            // An oversized frame is LIMIT_EXCEEDED, an unreadable one INVALID_INPUT: the decoder's code, never buffered.
            this.stop(
              new HoldfastError(d.error.code, `[git relay] sent a frame that cannot be read: ${d.error.message}`, {
                cause: d.error,
                data: d.error.data,
              }),
            );
            return;
          }
          if (d.kind !== 'frame') {
            this.countStray();
            continue;
          }
          const header = d.frame.header as unknown as RelayHeader;
          if (!isReady) {
            if (header.t !== 'ready') {
              this.countStray();
              continue;
            }
            isReady = true;
            clearTimeout(timer);
            resolve();
            continue;
          }
          this.onFrame(header, d.frame.payload);
        }
      });
      this.channel.exit.then(() => {
        clearTimeout(timer);
        if (!isReady) {
          const tail = Buffer.concat(stderr).toString('utf8').slice(0, 500);
          reject(new StoreError(`[git relay] the relay exited before it listened: ${tail}`, { transient: true }));
        }
      });
    });
  }

  private onFrame(header: RelayHeader, payload: Buffer): void {
    if (this.stopped !== undefined) return;
    const c = header.c;
    if (typeof c !== 'number' || !Number.isSafeInteger(c)) {
      this.countStray();
      return;
    }
    if (header.t === 'open') {
      if (this.connections.has(c) || this.connections.size >= (this.options.maxConnections ?? MAX_RELAY_CONNECTIONS)) {
        this.send({ t: 'close', c });
        this.countStray();
        return;
      }
      if (!this.countOpen()) return;
      this.openConnection(c);
      return;
    }
    const socket = this.connections.get(c);
    if (socket === undefined) {
      this.countStray();
      return;
    }
    if (header.t === 'data') {
      if (!socket.write(payload)) {
        // Paused until this connection drains or goes away (never for good: the other connections and the stray count need the frames).
        this.channel.stdout.pause();
        const resume = (): void => {
          socket.off('drain', resume);
          socket.off('close', resume);
          if (this.stopped === undefined) this.channel.stdout.resume();
        };
        socket.on('drain', resume);
        socket.on('close', resume);
      }
    } else if (header.t === 'end') socket.end();
    else if (header.t === 'close') {
      this.connections.delete(c);
      socket.destroy();
    } else this.countStray();
  }

  private openConnection(c: number): void {
    const socket = net.connect(this.socketPath);
    this.connections.set(c, socket);
    socket.on('data', (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; at += MAX_RELAY_CHUNK_BYTES) {
        if (!this.send({ t: 'data', c }, chunk.subarray(at, at + MAX_RELAY_CHUNK_BYTES))) {
          socket.pause();
          this.channel.stdin?.once('drain', () => socket.resume());
        }
      }
    });
    socket.on('end', () => this.send({ t: 'end', c }));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.connections.get(c) === socket) {
        this.connections.delete(c);
        this.send({ t: 'close', c });
      }
    });
  }

  private send(header: RelayHeader, payload?: Buffer): boolean {
    const stdin = this.channel.stdin;
    if (stdin === undefined || stdin.destroyed || stdin.writableEnded) return true;
    let ok = true;
    for (const b of encodeFrame(header, payload)) ok = stdin.write(b) && ok;
    return ok;
  }

  /** A frame that fits no open connection; past {@link MAX_STRAY_FRAMES} the relay is flooding and is stopped. */
  private countStray(): void {
    this.stray += 1;
    if (this.stray > MAX_STRAY_FRAMES) {
      this.stop(
        new InputError('LIMIT_EXCEEDED', `[git relay] sent more than ${MAX_STRAY_FRAMES} frames that fit no connection; it was stopped`, {
          data: { limit: MAX_STRAY_FRAMES, what: 'stray-frames' },
        }),
      );
    }
  }

  /** Counts an open against {@link MAX_RELAY_OPENS_PER_SECOND}; past it the relay is stopped and false returned. */
  private countOpen(): boolean {
    const now = performance.now();
    if (now - this.opens.since >= 1_000) this.opens = { count: 0, since: now };
    this.opens.count += 1;
    if (this.opens.count <= MAX_RELAY_OPENS_PER_SECOND) return true;
    this.stop(
      new InputError(
        'LIMIT_EXCEEDED',
        `[git relay] opened more than ${MAX_RELAY_OPENS_PER_SECOND} connections in a second; it was stopped`,
        {
          data: { limit: MAX_RELAY_OPENS_PER_SECOND, what: 'connections-per-second' },
        },
      ),
    );
    return false;
  }

  private stop(error: HoldfastError): void {
    if (this.stopped !== undefined) return;
    this.stopped = error;
    this.channel.kill();
    for (const s of this.connections.values()) s.destroy();
    this.connections.clear();
    this.server.closeAllConnections();
    this.server.close();
    void fsp.rm(path.dirname(this.socketPath), { recursive: true, force: true });
    if (error.code !== 'CANCELLED') this.options.onStopped?.(error);
  }
}
