import { InputError } from '../../../errors.js';
import type { SandboxLimits } from '../../sandbox-provider.js';

/** The workspace inside every docker sandbox (an anonymous volume). */
export const DOCKER_WORKSPACE = '/workspace';
/** The agent's home inside every docker sandbox (an anonymous volume, outside the workspace). */
export const DOCKER_HOME = '/home/agent';
/** The unprivileged user every command runs as. */
export const DOCKER_USER = '1000:1000';
/** PATH of every command: the usual system directories (the image's own PATH is replaced). */
export const DOCKER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** Label holding the provider scope; its presence is what makes a container a Holdfast sandbox. */
export const LABEL_SCOPE = 'holdfast.sandbox';
/** Label holding the creation time in milliseconds (the daemon's own has second precision). */
export const LABEL_CREATED = 'holdfast.sandbox.created-at';

/** Defaults for bounds a spec leaves out. */
export const DEFAULT_MEMORY_BYTES = 4 * 1024 * 1024 * 1024;
export const DEFAULT_CPUS = 2;
export const DEFAULT_PIDS = 1024;
/** Size bound of the private /tmp (a tmpfs, so it counts against memory). */
const TMP_SIZE_BYTES = 512 * 1024 * 1024;
/** Grace the sleep loop gets on stop before SIGKILL; it exits on SIGTERM at once. */
const STOP_TIMEOUT_S = 2;
/** Smallest memory bound the daemon accepts (6 MiB); smaller ones are refused here with a clear message. */
const MIN_MEMORY_BYTES = 6 * 1024 * 1024;
const MAX_CPUS = 1024;
const MAX_PIDS = 1_000_000;

/**
 * The container's main process: sleeps until stopped, so execs have a running container. It
 * exits on SIGTERM (a stop is quick) and, being the container's init, reaps orphans with each
 * `wait`. Works on busybox sh as on dash and bash.
 */
const KEEP_ALIVE = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

/** Every bound, settled. */
export interface ResolvedLimits {
  readonly memoryBytes: number;
  readonly cpus: number;
  readonly pids: number;
}

/** Complete bounds: the spec's over the provider's over the defaults; `INVALID_INPUT` for bad ones. */
export function resolvedLimits(provider: SandboxLimits | undefined, spec: SandboxLimits | undefined): ResolvedLimits {
  const limits = {
    memoryBytes: spec?.memoryBytes ?? provider?.memoryBytes ?? DEFAULT_MEMORY_BYTES,
    cpus: spec?.cpus ?? provider?.cpus ?? DEFAULT_CPUS,
    pids: spec?.pids ?? provider?.pids ?? DEFAULT_PIDS,
  };
  const bad = (field: string, rule: string): InputError =>
    new InputError('INVALID_INPUT', `[docker] limits.${field} must be ${rule}`, { data: { field: `limits.${field}` } });
  if (!Number.isSafeInteger(limits.memoryBytes) || limits.memoryBytes < MIN_MEMORY_BYTES)
    throw bad('memoryBytes', `an integer >= ${MIN_MEMORY_BYTES}`);
  if (!Number.isFinite(limits.cpus) || limits.cpus <= 0 || limits.cpus > MAX_CPUS) throw bad('cpus', `a number in (0, ${MAX_CPUS}]`);
  if (!Number.isSafeInteger(limits.pids) || limits.pids < 1 || limits.pids > MAX_PIDS) throw bad('pids', `an integer in [1, ${MAX_PIDS}]`);
  return limits;
}

/** What {@link containerBody} needs. */
export interface ContainerInput {
  readonly image: string;
  /** The spec's variables, already checked. */
  readonly env: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
  readonly network: string;
  readonly limits: ResolvedLimits;
}

/** The body of `POST /containers/create` for one sandbox; see `DockerSandboxProvider` for the reasons. */
export function containerBody(input: ContainerInput): Record<string, unknown> {
  const env = { PATH: DOCKER_PATH, HOME: DOCKER_HOME, LANG: 'C.UTF-8', TERM: 'dumb', ...input.env };
  return {
    Image: input.image,
    Entrypoint: ['sh', '-c', KEEP_ALIVE],
    Cmd: [],
    // The sleep loop runs as root so that the one root exec (handing the volumes to the agent
    // user) keeps CHOWN: under no-new-privileges an exec gets capabilities only when the
    // container's own user has them. Every command Holdfast runs is DOCKER_USER.
    User: '0:0',
    WorkingDir: '/',
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: input.labels,
    Hostname: 'sandbox',
    Volumes: { [DOCKER_WORKSPACE]: {}, [DOCKER_HOME]: {} },
    NetworkDisabled: input.network === 'none',
    StopTimeout: STOP_TIMEOUT_S,
    HostConfig: {
      NetworkMode: input.network,
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${TMP_SIZE_BYTES},mode=1777` },
      CapDrop: ['ALL'],
      CapAdd: ['CHOWN'],
      SecurityOpt: ['no-new-privileges'],
      Memory: input.limits.memoryBytes,
      MemorySwap: input.limits.memoryBytes,
      NanoCpus: Math.round(input.limits.cpus * 1e9),
      PidsLimit: input.limits.pids,
      RestartPolicy: { Name: 'no' },
      Init: false,
    },
  };
}
