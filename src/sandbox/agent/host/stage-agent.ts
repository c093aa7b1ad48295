import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { HoldfastError, NotFoundError, StoreError } from '../../../errors.js';
import { AgentClient, type AgentClientOptions } from './agent-client.js';
import type { AgentChannel, AgentExecFn } from './agent-connection.js';

const BUNDLE_NAME = 'holdfast-agent.mjs';
/** One staging exec (check or upload) may take this long. */
const STAGE_TIMEOUT_MS = 60_000;

// Both scripts run under `node -e` in the sandbox (CommonJS, Node >= 10), so staging needs
// nothing there but the Node that will run the agent anyway: no sha256sum, no shell quoting.
const CHECK_JS =
  "const fs=require('fs'),c=require('crypto');let h='missing';" +
  "try{h=c.createHash('sha256').update(fs.readFileSync(process.argv[1])).digest('hex')}catch{}" +
  "process.stdout.write(h+' '+process.version)";
/** Writes the checked bundle `b` to `f` (a private temp file, fsynced, renamed into place); shared by both uploads. */
const PLACE_JS =
  "fs.mkdirSync(p.dirname(f),{recursive:true,mode:0o700});const t=f+'.'+process.pid+'.tmp';" +
  "const fd=fs.openSync(t,'w',0o644);fs.writeSync(fd,b);fs.fsyncSync(fd);fs.closeSync(fd);fs.renameSync(t,f);";
const UPLOAD_JS =
  "const fs=require('fs'),c=require('crypto'),p=require('path');const [f,want]=process.argv.slice(1);const parts=[];" +
  "process.stdin.on('data',d=>parts.push(d));process.stdin.on('end',()=>{const b=Buffer.concat(parts);" +
  "const h=c.createHash('sha256').update(b).digest('hex');" +
  "if(h!==want){process.stderr.write('received '+b.length+' bytes hashing to '+h+'\\n');process.exit(3)}" +
  PLACE_JS +
  '})';

// The one exec that starts the agent (CommonJS under `node -e`). It checks the staged file's hash
// and prints one status line: `HFBOOT ok` -> it runs the agent in this same process; `HFBOOT need`
// -> it reads a 4-byte big-endian length and that many bundle bytes from stdin, checks their hash,
// renames them into place (as UPLOAD_JS does) and prints `HFBOOT ok` before running it. stdin is
// read with plain reads of fd 0 (a non-blocking one polled), exactly the bundle's bytes and never
// through `process.stdin`, so the agent's own reader thread sees every byte after them.
const BOOT_JS =
  "const fs=require('fs'),c=require('crypto'),p=require('path'),u=require('url');const [f,want,home]=process.argv.slice(1);" +
  "const sum=(b)=>c.createHash('sha256').update(b).digest('hex');" +
  "const go=()=>{process.stdout.write('HFBOOT ok\\n');process.argv=[process.argv[0],f,'--home',home];" +
  "import(u.pathToFileURL(f).href).catch((e)=>{process.stderr.write(String(e&&e.stack||e)+'\\n');process.exit(4)})};" +
  "let h='missing';try{h=sum(fs.readFileSync(f))}catch{}" +
  "if(h===want){go()}else{process.stdout.write('HFBOOT need '+process.version+'\\n');const z=new Int32Array(new SharedArrayBuffer(4));" +
  'const rd=(n)=>{const b=Buffer.allocUnsafe(n);let o=0;while(o<n){let k=0;try{k=fs.readSync(0,b,o,n-o,null)}' +
  "catch(e){if(e.code==='EAGAIN'){Atomics.wait(z,0,0,2);continue}if(e.code!=='EOF')throw e}if(k===0)break;o+=k}return b.subarray(0,o)};" +
  "const cut=(n)=>{process.stderr.write('stdin ended after '+n+' bundle bytes\\n');process.exit(3)};" +
  'const hd=rd(4);if(hd.length<4)cut(0);const len=hd.readUInt32BE(0);const b=rd(len);if(b.length<len)cut(b.length);' +
  "const s=sum(b);if(s!==want){process.stderr.write('received '+b.length+' bytes hashing to '+s+'\\n');process.exit(3)}" +
  PLACE_JS +
  'go()}';
/** The status lines {@link BOOT_JS} prints, at most this long. */
const BOOT_LINE_MAX_BYTES = 200;

/** The agent bundle on the host. */
export interface AgentBundle {
  readonly path: string;
  readonly hash: string;
  readonly bytes: Buffer;
}

/** The agent as staged in a sandbox. */
export interface StagedAgent {
  /** `<agentHome>/.holdfast/agent-<hash>.mjs` inside the sandbox. */
  readonly path: string;
  readonly hash: string;
  /** False when the right file was already there. */
  readonly uploaded: boolean;
  /** The sandbox's Node version. */
  readonly node: string;
  /** The argv that runs it. */
  readonly command: readonly string[];
}

/**
 * Finds `holdfast-agent.mjs` built by `scripts/bundle-agent.mjs`: beside the compiled package
 * (`dist/agent/`), from the bundled CLI (`dist/bin/` -> `dist/agent/`) or from the sources
 * (`src/...` -> `dist/agent/`). `NOT_FOUND` says to build it.
 */
export function locateAgentBundle(bundlePath?: string): AgentBundle {
  const candidates: string[] = bundlePath === undefined ? [] : [bundlePath];
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    candidates.push(path.join(dir, 'agent', BUNDLE_NAME), path.join(dir, 'dist', 'agent', BUNDLE_NAME));
    if (dir === path.dirname(dir)) break;
  }
  const found = candidates.find((c) => fs.existsSync(c));
  if (found === undefined) throw new NotFoundError(`the Holdfast agent bundle is missing: run npm run build (scripts/bundle-agent.mjs)`);
  const bytes = fs.readFileSync(found);
  return { path: found, hash: createHash('sha256').update(bytes).digest('hex'), bytes };
}

/** The argv that runs a staged agent with its state under `agentHome`. */
export function agentCommand(agentPath: string, agentHome: string): string[] {
  return ['node', agentPath, '--home', agentHome];
}

/**
 * Makes sure the sandbox has this Holdfast's agent at `<agentHome>/.holdfast/agent-<hash>.mjs`:
 * one exec checks the file's hash; only when it is missing or different is the bundle sent
 * through stdin, checked against its hash in the sandbox, and renamed into place (so a
 * concurrent or interrupted upload never leaves a half file under the final name).
 */
export async function ensureAgent(exec: AgentExecFn, agentHome: string, options: { bundlePath?: string } = {}): Promise<StagedAgent> {
  const bundle = locateAgentBundle(options.bundlePath);
  const target = path.posix.join(agentHome, '.holdfast', `agent-${bundle.hash}.mjs`);
  const check = await run(exec, ['node', '-e', CHECK_JS, target]);
  const [found = '', node = ''] = check.stdout.trim().split(' ');
  if (check.code !== 0 || !node.startsWith('v')) {
    throw new StoreError(`[agent] cannot run node in the sandbox (exit ${check.code}): ${check.stderr.trim() || check.stdout.trim()}`, {
      data: { exitCode: check.code },
    });
  }
  const done = (uploaded: boolean): StagedAgent => ({
    path: target,
    hash: bundle.hash,
    uploaded,
    node,
    command: agentCommand(target, agentHome),
  });
  if (found === bundle.hash) return done(false);
  const upload = await run(exec, ['node', '-e', UPLOAD_JS, target, bundle.hash], bundle.bytes);
  if (upload.code !== 0) {
    throw new StoreError(`[agent] uploading the agent to ${target} failed (exit ${upload.code}): ${upload.stderr.trim()}`, {
      transient: true,
      data: { exitCode: upload.code, target },
    });
  }
  return done(true);
}

/**
 * Starts the agent and shakes hands, staging it first only when needed, in one exec: a small
 * boot script checks the staged file's hash, asks for the bundle through the same stdin when it
 * is missing or different (checked against its hash in the sandbox and renamed into place), and
 * then runs the agent in its own process (see {@link BOOT_JS}). A fresh sandbox thus costs one
 * Node start, not four. The agent still reports the hash of its own file in the handshake; if
 * the boot fails in any way, or the hash is not this Holdfast's, the agent is staged the old way
 * (see {@link ensureAgent}), which reports precisely what is wrong, and started again.
 */
export async function connectAgent(
  exec: AgentExecFn,
  agentHome: string,
  options: AgentClientOptions & { bundlePath?: string } = {},
): Promise<{ staged: StagedAgent; client: AgentClient }> {
  const bundle = locateAgentBundle(options.bundlePath);
  const target = path.posix.join(agentHome, '.holdfast', `agent-${bundle.hash}.mjs`);
  const command = agentCommand(target, agentHome);
  try {
    const channel = await exec(['node', '-e', BOOT_JS, target, bundle.hash, agentHome], { stdin: 'pipe' });
    const uploaded = await boot(channel, bundle);
    const client = await AgentClient.connect(channel, options);
    if (client.agent.agentHash === bundle.hash)
      return { staged: { path: target, hash: bundle.hash, uploaded, node: client.agent.node, command }, client };
    await client.close().catch(() => undefined);
  } catch {
    // Missing node, an unusable home, a cut upload: stage it below, which reports precisely what is wrong.
  }
  const staged = await ensureAgent(exec, agentHome, options.bundlePath === undefined ? {} : { bundlePath: options.bundlePath });
  return { staged, client: await AgentClient.connect(await exec(staged.command, { stdin: 'pipe' }), options) };
}

/**
 * Drives {@link BOOT_JS} on `channel` up to the point where the agent runs: answers `need` with
 * the bundle; returns whether it was uploaded. Anything else (another line, the exec ending,
 * {@link STAGE_TIMEOUT_MS} passing) kills the exec and fails.
 */
async function boot(channel: AgentChannel, bundle: AgentBundle): Promise<boolean> {
  try {
    const first = await readStatusLine(channel);
    if (first === 'HFBOOT ok') return false;
    if (!first.startsWith('HFBOOT need ')) throw new StoreError(`[agent] boot said ${JSON.stringify(first.slice(0, 80))}`);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bundle.bytes.length, 0);
    channel.stdin?.write(length);
    channel.stdin?.write(bundle.bytes);
    const second = await readStatusLine(channel);
    if (second !== 'HFBOOT ok') throw new StoreError(`[agent] boot said ${JSON.stringify(second.slice(0, 80))} after the upload`);
    return true;
  } catch (error) {
    channel.stdin?.on('error', () => undefined);
    channel.kill();
    throw error;
  }
}

/**
 * One line of `channel`'s stdout, read in paused mode and nothing past it: bytes after the line
 * are put back, and the listener removed, so the agent connection reads from the next byte on.
 */
function readStatusLine(channel: AgentChannel): Promise<string> {
  const out = channel.stdout;
  return new Promise<string>((resolve, reject) => {
    let got = Buffer.alloc(0);
    const settle = (error: Error | undefined, line = ''): void => {
      out.removeListener('readable', take);
      out.removeListener('end', ended);
      out.removeListener('error', failed);
      clearTimeout(timer);
      if (error === undefined) resolve(line);
      else reject(error);
    };
    const take = (): void => {
      for (let chunk: Buffer | null = out.read(); chunk !== null; chunk = out.read()) {
        got = Buffer.concat([got, chunk]);
        const nl = got.indexOf(10);
        if (nl >= 0) {
          if (nl + 1 < got.length) out.unshift(got.subarray(nl + 1));
          settle(undefined, got.subarray(0, nl).toString('utf8'));
          return;
        }
        if (got.length > BOOT_LINE_MAX_BYTES) {
          settle(new StoreError('[agent] the boot script printed no status line'));
          return;
        }
      }
    };
    const ended = (): void => settle(new StoreError('[agent] the boot exec ended before the agent ran'));
    const failed = (error: Error): void => settle(new StoreError(`[agent] the boot exec's output failed: ${error.message}`));
    const timer = setTimeout(() => settle(new HoldfastError('TIMEOUT', '[agent] the boot exec timed out')), STAGE_TIMEOUT_MS);
    out.on('readable', take);
    out.on('end', ended);
    out.on('error', failed);
  });
}

async function run(exec: AgentExecFn, argv: string[], stdin?: Buffer): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const channel = await exec(argv, { stdin: 'pipe' });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const stdoutDone = new Promise<void>((resolve) => {
    channel.stdout.on('data', (c: Buffer) => out.push(c));
    channel.stdout.on('end', resolve);
    channel.stdout.on('close', resolve);
    channel.stdout.on('error', () => resolve());
  });
  channel.stderr?.on('data', (c: Buffer) => err.push(c));
  channel.stdin?.on('error', () => undefined);
  channel.stdin?.end(stdin);
  const timer = setTimeout(() => channel.kill(), STAGE_TIMEOUT_MS);
  try {
    const exit = await channel.exit;
    // Output normally ends with the process; a provider that keeps the stream open gets a moment, not forever.
    await Promise.race([stdoutDone, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
    if (exit.timedOut === true) throw new HoldfastError('TIMEOUT', `[agent] staging exec ${argv[0]} timed out`);
    return { code: exit.code ?? null, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
  } finally {
    clearTimeout(timer);
  }
}
