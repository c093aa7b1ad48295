import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { ConflictError, InputError, NotFoundError, StoreError } from '../../errors.js';
import { runBuffered } from '../run-buffered.js';
import type {
  ExecOptions,
  ExecProcess,
  RunOptions,
  RunResult,
  SandboxCapabilities,
  SandboxHandle,
  SandboxInfo,
  SandboxLimits,
  SandboxProvider,
  SandboxSpec,
} from '../sandbox-provider.js';
import { checkedEnv, checkedLabels, checkedSandboxId, SANDBOX_ID_PATTERN } from '../sandbox-spec.js';
import {
  containerBody,
  DOCKER_HOME,
  DOCKER_USER,
  DOCKER_WORKSPACE,
  LABEL_CREATED,
  LABEL_SCOPE,
  resolvedLimits,
} from './docker/container-spec.js';
import { runDetached, startDockerExec } from './docker/docker-exec.js';
import { dockerSocketPath, EngineClient, engineError, engineMessage } from './docker/engine-client.js';

/** Settings of {@link DockerSandboxProvider}. */
export interface DockerSandboxProviderConfig {
  /** Image used when the spec names none; without it a spec must name one. */
  readonly image?: string;
  /** The daemon's socket; default from `DOCKER_HOST` (`unix://…`), else /var/run/docker.sock. */
  readonly socketPath?: string;
  /**
   * Which Holdfast sandboxes this provider sees: containers labelled `holdfast.sandbox=<scope>`.
   * Two providers on one daemon with different scopes never list, find or destroy each other's.
   * Default `default`.
   */
  readonly scope?: string;
  /** Docker network mode; default `none` (loopback only). Anything else gives up `networkIsolation`. */
  readonly network?: string;
  /** Bounds for specs that set none; see {@link SandboxLimits}. */
  readonly limits?: SandboxLimits;
}

/** Sandbox ids: generated `sbx-<16 hex>` ones and callers' own (container names on the daemon). */
const ID_PATTERN = SANDBOX_ID_PATTERN;
const SCOPE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
/** Bound on ids remembered as destroyed by this instance (so earlier handles refuse exec at once). */
const MAX_REMEMBERED_DESTROYED = 4096;
/** Makes the workspace and home volumes the agent user's (they are created root-owned). */
const PREPARE_ARGV = [
  'sh',
  '-c',
  `chmod 0755 ${DOCKER_WORKSPACE} ${DOCKER_HOME} && chown ${DOCKER_USER} ${DOCKER_WORKSPACE} ${DOCKER_HOME}`,
];

/**
 * Sandboxes as Docker containers, through the Engine API on the daemon's unix socket. Each
 * sandbox is one container from an image: no network (`none`) by default, running as uid
 * 1000 with every capability dropped but CHOWN (used once, by root, to hand the volumes to that
 * user) and no-new-privileges, a read-only root with a private /tmp, memory/CPU/pids limits,
 * and the workspace (/workspace) and agent home (/home/agent) on anonymous volumes of the
 * container's own, removed with it: no host path is mounted. The container's main process is a
 * sleep loop that keeps it up for execs; each exec runs under a small sh wrapper so that kills
 * reach its whole process tree (`docker/exec-scripts.ts`). Images need a POSIX sh, `grep` and
 * `kill` (busybox is enough); the agent transport also needs `node`.
 *
 * The spec's variables live in the container's environment, its labels on the container; the
 * container's name is the sandbox id, so another provider instance finds everything again.
 */
export class DockerSandboxProvider implements SandboxProvider {
  readonly name = 'docker';
  readonly capabilities: SandboxCapabilities;
  private readonly scope: string;
  private readonly network: string;
  private engineClient: EngineClient | undefined;
  private readonly destroyed = new Set<string>();

  constructor(private readonly config: DockerSandboxProviderConfig = {}) {
    this.scope = config.scope ?? 'default';
    if (!SCOPE_PATTERN.test(this.scope))
      throw new InputError('INVALID_INPUT', `[docker] scope must match ${SCOPE_PATTERN}`, { data: { scope: this.scope } });
    this.network = config.network ?? 'none';
    resolvedLimits(config.limits, undefined);
    this.capabilities = Object.freeze({
      exec: true,
      stdin: true,
      resume: true,
      localPath: false,
      nativeSnapshots: false,
      durableFilesystem: false,
      killableProcesses: true,
      networkIsolation: this.network === 'none',
      workspaceRootsUnder: DOCKER_WORKSPACE,
    });
  }

  /** Creates and starts the container, then hands the volumes to the agent user; a failure removes it again. */
  async create(spec: SandboxSpec = {}): Promise<SandboxHandle> {
    const image = spec.image ?? this.config.image;
    if (image === undefined || image === '') {
      throw new InputError('INVALID_INPUT', '[docker] a sandbox needs an image: set SandboxSpec.image or the provider option image', {
        data: { provider: this.name },
      });
    }
    const labels = checkedLabels(spec.labels);
    for (const key of Object.keys(labels)) {
      if (key === LABEL_SCOPE || key.startsWith(`${LABEL_SCOPE}.`))
        throw new InputError('INVALID_INPUT', `[docker] label ${key} is reserved for the provider`, { data: { key } });
    }
    const body = containerBody({
      image,
      env: checkedEnv(spec.env),
      labels: { ...labels, [LABEL_SCOPE]: this.scope, [LABEL_CREATED]: String(Date.now()) },
      network: this.network,
      limits: resolvedLimits(this.config.limits, spec.limits),
    });
    const id = checkedSandboxId(spec.id, this.name, () => `sbx-${randomBytes(8).toString('hex')}`);
    const engine = this.engine();
    const created = await engine.request('POST', `/containers/create?name=${id}`, body);
    if (created.status === 409) {
      throw new ConflictError(
        'ALREADY_EXISTS',
        `[docker] a container named ${id} already exists on this daemon: choose another sandbox id`,
        {
          data: { provider: this.name, id },
        },
      );
    }
    if (created.status === 404) {
      throw new InputError('INVALID_INPUT', `[docker] image ${image} not found on this daemon: build, import or pull it first`, {
        data: { provider: this.name, image },
      });
    }
    if (created.status !== 201) throw engineError(created.status, 'container create', created.body);
    try {
      await this.start(id);
      const prepared = await runDetached(engine, id, PREPARE_ARGV, '0:0');
      if (prepared !== 0) {
        throw new StoreError(`[docker] preparing ${id} from ${image} failed (exit ${prepared}): the image needs /bin/sh, chown and chmod`, {
          data: { provider: this.name, image },
        });
      }
    } catch (error) {
      await this.remove(id).catch(() => undefined);
      throw error;
    }
    return this.handle(id, labels);
  }

  async get(id: string): Promise<SandboxHandle | undefined> {
    if (!ID_PATTERN.test(id) || this.destroyed.has(id)) return undefined;
    const state = await this.inspect(id);
    if (state === undefined) return undefined;
    if (state.paused) await this.expectOk(await this.engine().request('POST', `/containers/${id}/unpause`), 'container unpause');
    else if (!state.running) await this.start(id);
    return this.handle(id, state.labels);
  }

  /** Removes the container with its volumes (`force` kills its processes first); a missing one is fine. */
  async destroy(id: string): Promise<void> {
    if (!ID_PATTERN.test(id)) return;
    this.remember(id);
    if ((await this.inspect(id)) === undefined) return;
    await this.remove(id);
  }

  async list(): Promise<SandboxInfo[]> {
    const filters = encodeURIComponent(JSON.stringify({ label: [`${LABEL_SCOPE}=${this.scope}`] }));
    const answer = await this.engine().request('GET', `/containers/json?all=true&filters=${filters}`);
    if (answer.status !== 200 || !Array.isArray(answer.body)) throw engineError(answer.status, 'container list', answer.body);
    const infos: SandboxInfo[] = [];
    for (const entry of answer.body as Array<{ Names?: unknown; Labels?: unknown; State?: unknown }>) {
      const name = Array.isArray(entry.Names) ? String(entry.Names[0] ?? '').replace(/^\//, '') : '';
      if (!ID_PATTERN.test(name) || entry.State === 'removing' || entry.State === 'dead' || this.destroyed.has(name)) continue;
      const all = (entry.Labels ?? {}) as Record<string, string>;
      infos.push({
        id: name,
        provider: this.name,
        createdAt: Number(all[LABEL_CREATED]) || 0,
        labels: userLabels(all),
        state: entry.State === 'running' ? 'running' : 'stopped',
      });
    }
    return infos.sort((a, b) => a.createdAt - b.createdAt);
  }

  /** The engine client, made on first use so a provider can be constructed without a daemon. */
  private engine(): EngineClient {
    this.engineClient ??= new EngineClient(this.config.socketPath ?? dockerSocketPath());
    return this.engineClient;
  }

  /** Whether `id` is one of this scope's live containers, and its run state; undefined when it is not. */
  private async inspect(id: string): Promise<{ running: boolean; paused: boolean; labels: Record<string, string> } | undefined> {
    const answer = await this.engine().request('GET', `/containers/${id}/json`);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw engineError(answer.status, 'container inspect', answer.body);
    const info = answer.body as {
      Name?: unknown;
      Config?: { Labels?: Record<string, string> };
      State?: { Status?: unknown; Running?: unknown; Paused?: unknown };
    };
    if (info.Name !== `/${id}` || info.Config?.Labels?.[LABEL_SCOPE] !== this.scope) return undefined;
    if (info.State?.Status === 'removing' || info.State?.Status === 'dead') return undefined;
    return { running: info.State?.Running === true, paused: info.State?.Paused === true, labels: userLabels(info.Config?.Labels ?? {}) };
  }

  private async start(id: string): Promise<void> {
    const answer = await this.engine().request('POST', `/containers/${id}/start`);
    if (answer.status !== 204 && answer.status !== 304) throw engineError(answer.status, 'container start', answer.body);
  }

  private async remove(id: string): Promise<void> {
    const answer = await this.engine().request('DELETE', `/containers/${id}?v=1&force=1`);
    // 409: a removal is already under way (another destroy); the container is going either way.
    if (answer.status === 204 || answer.status === 404) return;
    if (answer.status === 409 && /already in progress/i.test(engineMessage(answer.body))) return;
    throw engineError(answer.status, 'container remove', answer.body);
  }

  private async expectOk(answer: { status: number; body: unknown }, what: string): Promise<void> {
    if (answer.status < 200 || answer.status > 299) throw engineError(answer.status, what, answer.body);
  }

  private remember(id: string): void {
    this.destroyed.add(id);
    if (this.destroyed.size > MAX_REMEMBERED_DESTROYED) {
      const oldest = this.destroyed.values().next().value;
      if (oldest !== undefined) this.destroyed.delete(oldest);
    }
  }

  private handle(id: string, labels: Readonly<Record<string, string>>): SandboxHandle {
    const exec = (argv: readonly string[], options: ExecOptions = {}): ExecProcess => {
      if (argv.length === 0 || argv[0] === '') throw new InputError('INVALID_INPUT', '[docker] exec needs a command: argv is empty');
      const env = checkedEnv(options.env);
      if (this.destroyed.has(id)) throw new NotFoundError(`[docker] sandbox ${id} was destroyed`, { data: { provider: this.name, id } });
      return startDockerExec(
        {
          engine: this.engine(),
          container: id,
          sandboxId: id,
          argv,
          cwd: path.posix.resolve(DOCKER_WORKSPACE, options.cwd ?? '.'),
          env,
          user: DOCKER_USER,
        },
        options,
      );
    };
    return {
      id,
      provider: this.name,
      workspaceRoot: DOCKER_WORKSPACE,
      agentHome: DOCKER_HOME,
      labels: { ...labels },
      exec,
      run: (argv: readonly string[], options?: RunOptions): Promise<RunResult> => runBuffered(exec, argv, options),
    };
  }
}

/** The labels a caller set: everything but the provider's own. */
function userLabels(all: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(all).filter(([key]) => key !== LABEL_SCOPE && !key.startsWith(`${LABEL_SCOPE}.`)));
}
