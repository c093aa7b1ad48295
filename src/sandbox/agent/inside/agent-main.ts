/**
 * Entry point of the in-sandbox agent (bundled into one file, `dist/agent/holdfast-agent.mjs`).
 * Run as `node holdfast-agent.mjs [--home DIR]`; it speaks the framed protocol on stdin/stdout
 * and keeps its state in `<home>/.holdfast` (home: `--home`, else `$HOLDFAST_AGENT_HOME`, else
 * the user's home directory). It exits 0 when stdin ends, 2 after a framing error.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AgentOp, PROTOCOL_VERSION } from '../wire/protocol.js';
import { AgentServer, type OpHandler } from './agent-server.js';
import { AgentState } from './agent-state.js';
import { runGitMode } from './git-relay.js';
import { publish, stageAbort } from './ops-publish.js';
import { read, readStream } from './ops-read.js';
import { stageReuse } from './ops-reuse.js';
import { cacheUpdate, probe, recheck, scan } from './ops-scan.js';
import { stageBegin } from './ops-stage.js';
import { write } from './ops-write.js';
import { stdinThread } from './stdin-thread.js';

function homeDir(argv: readonly string[]): string {
  const flag = argv.indexOf('--home');
  const fromFlag = flag >= 0 ? argv[flag + 1] : undefined;
  return path.resolve(fromFlag ?? process.env.HOLDFAST_AGENT_HOME ?? os.homedir());
}

/** The hash of the file being run: what `hello` reports, so the host can tell a stale agent. */
function ownHash(): string {
  try {
    return createHash('sha256')
      .update(fs.readFileSync(fileURLToPath(import.meta.url)))
      .digest('hex');
  } catch {
    return 'unknown';
  }
}

// The git relay and git's remote helper are modes of the same staged file (see git-relay.ts).
const gitExit = await runGitMode(path.join(homeDir(process.argv.slice(2)), '.holdfast'), process.argv.slice(2));
if (gitExit !== undefined) await new Promise(() => process.stdout.write('', () => process.exit(gitExit)));

const state = new AgentState(path.join(homeDir(process.argv.slice(2)), '.holdfast'), ownHash());
fs.mkdirSync(state.stateDir, { recursive: true, mode: 0o700 });

const handlers: Partial<Record<AgentOp, OpHandler>> = {
  probe: probe(state),
  scan: scan(state),
  recheck: recheck(state),
  read,
  'read-stream': readStream,
  'cache-update': cacheUpdate(state),
  'stage-begin': stageBegin(state),
  write: write(state),
  'stage-reuse': stageReuse(state),
  publish: publish(state),
  'stage-abort': stageAbort(state),
};

// Never `process.stdin`: the boot reads the bundle with plain reads, and a stream of its own would
// take bytes the thread must see.
const server = new AgentServer(stdinThread(), process.stdout, handlers, () => ({
  version: PROTOCOL_VERSION,
  agentHash: state.agentHash,
  node: process.version,
  platform: process.platform,
  arch: process.arch,
  pid: process.pid,
}));

const code = await server.run();
// Exit once stdout has taken the last frame; a client that is gone (EPIPE) ends it all the same.
process.stdout.write('', () => process.exit(code));
