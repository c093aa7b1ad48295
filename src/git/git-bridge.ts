import path from 'node:path';
import { DEFAULT_GIT_CONFIG, type GitConfig } from '../config.js';
import { shellQuote } from '../core/shell-quote.js';
import { ConflictError, errorToJson, HoldfastError } from '../errors.js';
import type { MetadataStore } from '../metadata/metadata-store.js';
import type { RepoBinding } from '../model/repo-bindings.js';
import type { RunExtension, RunSandboxContext } from '../runs/run-extension.js';
import type { RunEvents } from '../runs/run-log-event.js';
import type { SandboxLifecycle } from '../runs/sandbox/sandbox-lifecycle.js';
import { GitRelayHost, stagedAgentPath } from '../sandbox/agent/host/git-relay-host.js';
import type { SandboxHandle } from '../sandbox/sandbox-provider.js';
import { type BridgeRecord, type BridgeRun, SandboxGitBridge } from './sandbox-git-bridge.js';

/** Where the `git-remote-holdfast` helper is written, under the sandbox's home. */
const HELPER_DIR = '.holdfast/bin';
const HELPER_NAME = 'git-remote-holdfast';
/** One setup exec of the bridge (writing the helper, reading PATH). */
const SETUP_TIMEOUT_MS = 60_000;
/** Sandboxes whose preparation this process remembers. */
const MAX_PREPARED_SANDBOXES = 4096;
/** The URL scheme of the helper (`holdfast://<binding>`). */
const SCHEME = 'holdfast';

/** What {@link GitBridge} works with. */
export interface GitBridgeDeps {
  readonly meta: MetadataStore;
  readonly sandboxes: SandboxLifecycle;
  readonly events: RunEvents;
  /** The operator's git settings (default: nothing allowed). */
  readonly git?: GitConfig;
  /** Relay bounds, for tests (the defaults are the product's). */
  readonly relay?: GitRelayBounds;
}

/** Bounds of a run's git relay; each defaults to the product's. */
export interface GitRelayBounds {
  /** How long the sandbox has to send a request's headers (slow-loris bound). */
  readonly headersTimeoutMs?: number;
  /** A connection with no byte either way for this long is closed. */
  readonly idleTimeoutMs?: number;
  /** Deadline of one bridged request, the remote's answer included (default the host clone's). */
  readonly requestTimeoutMs?: number;
}

interface LiveRelay {
  readonly key: string;
  readonly relay: GitRelayHost;
  readonly env: Readonly<Record<string, string>>;
}

/**
 * git from the sandbox as a step of every run's lifecycle (docs/repositories.md, "git from the
 * sandbox"). While a session holds a run's lease and has attached its sandbox, a relay runs in
 * the sandbox (the staged agent in relay mode, over exec with stdin/stdout) and every command
 * the run executes gets `url.holdfast://<binding>.insteadOf = <binding URL>` (through
 * `GIT_CONFIG_COUNT`, after the deployment's own entries) and the `git-remote-holdfast` helper
 * on its `PATH`, so `git fetch`, `git push`, `git ls-remote origin` work unchanged; the host
 * judges and makes each call ({@link SandboxGitBridge}). The relay stops when the session
 * releases the lease or loses it. No credential enters the sandbox.
 *
 * A sandbox whose provider has no stdin (the shell route) or no Node gets a helper that refuses
 * (`REPOSITORY_UNSUPPORTED`, printed by git) and a `git_bridge unavailable` event: never a
 * silent failure.
 */
export class GitBridge implements RunExtension {
  readonly name = 'git_bridge';
  private readonly bridge: SandboxGitBridge;
  private readonly live = new Map<string, LiveRelay>();
  /** Sandboxes whose helper is written, with their own PATH and git settings count (by provider and id). */
  private readonly prepared = new Map<string, SandboxGitBase>();

  constructor(private readonly deps: GitBridgeDeps) {
    this.bridge = new SandboxGitBridge({
      git: deps.git ?? DEFAULT_GIT_CONFIG,
      checkRun: (run) => this.checkRun(run),
      record: (run, record, ms) => this.record(run, record, ms),
      ...(deps.relay?.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: deps.relay.requestTimeoutMs }),
    });
  }

  /** Starts (or keeps) the run's relay in the sandbox and resolves with the git environment of its commands. */
  async attach(context: RunSandboxContext): Promise<Readonly<Record<string, string>>> {
    const bindings = context.run.bindings?.repos ?? [];
    if (bindings.length === 0) return {};
    const { sandbox } = context;
    const key = `${context.run.id}\0${context.epoch}\0${sandbox.provider}\0${sandbox.id}`;
    const current = this.live.get(context.run.id);
    if (current?.key === key && current.relay.failure === undefined) return current.env;
    await this.stop(context.run.id);
    const helperDir = path.posix.join(sandbox.agentHome, HELPER_DIR);
    const recorder = this.deps.sandboxes.recorder(context.run.id, this.name);
    const reason = this.unavailable(sandbox);
    if (reason !== undefined) {
      const base = await prepareSandbox(sandbox, helperDir, this.deps.sandboxes.envOf(sandbox), refusingHelper(reason));
      await recorder.record('unavailable', 'failed', 0, { reason });
      return { ...gitEnv(bindings, base.configCount), PATH: `${helperDir}:${base.path}` };
    }
    // Once per sandbox: its PATH and git settings read and the helper written, in one exec; later sessions only start the relay.
    const sandboxKey = `${sandbox.provider}\0${sandbox.id}`;
    let base = this.prepared.get(sandboxKey);
    if (base === undefined) {
      base = await prepareSandbox(
        sandbox,
        helperDir,
        this.deps.sandboxes.envOf(sandbox),
        relayHelper(stagedAgentPath(sandbox.agentHome), sandbox.agentHome),
      );
      this.remember(sandboxKey, base);
    }
    const env = { ...gitEnv(bindings, base.configCount), PATH: `${helperDir}:${base.path}` };
    const run: BridgeRun = { runId: context.run.id, tenantName: context.tenant.name, epoch: context.epoch, bindings };
    let relay: GitRelayHost;
    try {
      relay = await GitRelayHost.start((argv, options) => sandbox.exec(argv, options), sandbox.agentHome, {
        handler: this.bridge.handlerFor(run),
        ...(this.deps.relay?.headersTimeoutMs === undefined ? {} : { headersTimeoutMs: this.deps.relay.headersTimeoutMs }),
        ...(this.deps.relay?.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: this.deps.relay.idleTimeoutMs }),
        onStopped: (error) => void recorder.record('relay_stopped', 'failed', 0, { error: errorToJson(error) }),
      });
    } catch (error) {
      // No Node in the image (or it would not start): git in this sandbox is told so.
      this.prepared.delete(sandboxKey);
      await prepareSandbox(sandbox, helperDir, {}, refusingHelper('no-node'));
      await recorder.record('unavailable', 'failed', 0, { reason: 'no-node', error: errorToJson(error) });
      return env;
    }
    this.live.set(context.run.id, { key, relay, env });
    context.signal?.addEventListener('abort', () => void this.stopIf(context.run.id, key), { once: true });
    await recorder.record('relay_started', 'ok', 0, { bindings: bindings.map((b) => b.name) });
    return env;
  }

  /** Nothing of the bridge is kept in the sandbox. */
  async save(): Promise<void> {}

  /** Nothing waits for the boundary. */
  async boundary(): Promise<void> {}

  /** The session releases the lease: the relay stops, so no request outlives it. */
  async detach(context: RunSandboxContext): Promise<void> {
    await this.stop(context.run.id);
  }

  /** Stops every relay of this process (closing the host). */
  async close(): Promise<void> {
    await Promise.all([...this.live.keys()].map((id) => this.stop(id)));
  }

  /** Keeps at most {@link MAX_PREPARED_SANDBOXES} (the oldest forgotten: it is prepared again, one exec). */
  private remember(key: string, base: SandboxGitBase): void {
    this.prepared.set(key, base);
    if (this.prepared.size > MAX_PREPARED_SANDBOXES) this.prepared.delete(this.prepared.keys().next().value as string);
  }

  private unavailable(sandbox: SandboxHandle): string | undefined {
    const { capabilities } = this.deps.sandboxes.provider(sandbox.provider);
    if (capabilities.exec !== true || capabilities.stdin !== true) return 'no-stdin';
    return undefined;
  }

  private async stopIf(runId: string, key: string): Promise<void> {
    if (this.live.get(runId)?.key === key) await this.stop(runId);
  }

  private async stop(runId: string): Promise<void> {
    const current = this.live.get(runId);
    if (current === undefined) return;
    this.live.delete(runId);
    await current.relay.close();
  }

  /** Every request: the run still live, this session's epoch still its lease. */
  private async checkRun(run: BridgeRun): Promise<void> {
    const current = await this.deps.meta.runs.get(run.runId);
    if (current.endedAt !== null) {
      throw new ConflictError('CONFLICT', `run ${run.runId} has ended: git from its sandbox is refused`, {
        data: { runId: run.runId, reason: 'ended' },
      });
    }
    if (current.lease.epoch !== run.epoch || current.lease.state !== 'held') {
      throw new ConflictError('STALE_LEASE', `run ${run.runId}: the lease moved (epoch ${run.epoch}); git from this sandbox is refused`, {
        data: { runId: run.runId, epoch: run.epoch },
      });
    }
  }

  private record(run: BridgeRun, record: BridgeRecord, durationMs: number): void {
    const ok = record.code === undefined && record.status < 400;
    void this.deps.sandboxes
      .recorder(run.runId, this.name)
      .record('request', ok ? 'ok' : 'failed', durationMs, { ...record })
      .catch(() => undefined);
  }
}

/** A sandbox's own `PATH` and number of `GIT_CONFIG_*` entries (the image's and the deployment's). */
interface SandboxGitBase {
  readonly path: string;
  readonly configCount: number;
}

/**
 * One exec: writes `helper` (mode 0755, through `sh`, so it works on every route) and reads the
 * sandbox's own `PATH` and `GIT_CONFIG_COUNT`. What an earlier attach of the bridge added
 * (`previous`, the extensions' last environment) is taken out again, so it never piles up.
 */
async function prepareSandbox(
  sandbox: SandboxHandle,
  helperDir: string,
  previous: Readonly<Record<string, string>>,
  helper: string,
): Promise<SandboxGitBase> {
  const out = await sandbox.run(
    [
      'sh',
      '-c',
      'umask 022 && mkdir -p "$1" && printf "%s" "$2" > "$1/$3.tmp" && chmod 755 "$1/$3.tmp" && mv -f "$1/$3.tmp" "$1/$3" && printf "%s\\n%s" "$PATH" "$GIT_CONFIG_COUNT"',
      'sh',
      helperDir,
      helper,
      HELPER_NAME,
    ],
    { timeoutMs: SETUP_TIMEOUT_MS },
  );
  if (out.code !== 0) {
    throw new HoldfastError(
      'SETUP_FAILED',
      `could not write the git helper in ${helperDir}: ${out.stderr.toString('utf8').slice(0, 300)}`,
      {
        data: { dir: helperDir },
      },
    );
  }
  const [pathValue = '', count = '0'] = out.stdout.toString('utf8').split('\n');
  let n = /^[0-9]{1,3}$/.test(count) ? Number(count) : 0;
  const ours = Object.entries(previous).find(([k, v]) => k.startsWith('GIT_CONFIG_KEY_') && v === `protocol.${SCHEME}.allow`);
  if (ours !== undefined) n = Math.min(n, Number(ours[0].slice('GIT_CONFIG_KEY_'.length)));
  const kept = pathValue.split(':').filter((p) => p !== helperDir && p !== '');
  return { path: kept.length === 0 ? '/usr/local/bin:/usr/bin:/bin' : kept.join(':'), configCount: n };
}

/**
 * The git settings of a run's commands, numbered after the `count` entries the sandbox already
 * has: the helper's scheme allowed, and each binding's URL rewritten to `holdfast://<name>`.
 */
export function gitEnv(bindings: readonly RepoBinding[], count = 0): Record<string, string> {
  const entries: Array<[string, string]> = [[`protocol.${SCHEME}.allow`, 'always']];
  for (const b of bindings) entries.push([`url.${SCHEME}://${b.name}.insteadOf`, b.url]);
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(count + entries.length) };
  for (const [i, [k, v]] of entries.entries()) {
    env[`GIT_CONFIG_KEY_${count + i}`] = k;
    env[`GIT_CONFIG_VALUE_${count + i}`] = v;
  }
  return env;
}

/** The helper that hands git to the staged agent's `--git-remote` mode. */
function relayHelper(agentPath: string, agentHome: string): string {
  return `#!/bin/sh\nexec node ${shellQuote(agentPath)} --home ${shellQuote(agentHome)} --git-remote "$@"\n`;
}

/** The helper of a sandbox the bridge cannot serve: it says why, with the code. */
function refusingHelper(reason: string): string {
  const why =
    reason === 'no-stdin'
      ? 'this sandbox is reached without stdin (the shell route), so no git relay can run in it'
      : 'this sandbox has no usable Node, which the git relay needs';
  return `#!/bin/sh\necho "holdfast: REPOSITORY_UNSUPPORTED: git from the sandbox is unavailable: ${why}" >&2\nexit 128\n`;
}
