import path from 'node:path';
import type { Command } from 'commander';
import { InputError } from '../../errors.js';
import type { Deployment } from '../../index.js';
import { isoTime, renderTable } from '../output.js';
import { collect, readHoldfast, withHoldfast } from '../program.js';

/** Flags of `deployment create`. */
interface CreateFlags {
  readonly tenant: string;
  readonly provider: string;
  readonly image?: string;
  readonly setup?: string[];
  readonly env?: string[];
  readonly workspaceRoot?: string;
  readonly validate?: string;
  readonly manual?: boolean;
  readonly bundle?: string;
  readonly bundlePath?: string;
  readonly cwd?: string;
  readonly publish?: string;
}

/**
 * `holdfast deployment create | show | ls`: immutable deployments in the store. `create
 * --bundle DIR` captures DIR as the deployment's bundle first (strictly: any credential in it
 * refuses it with `SECRET_EXCLUDED` and the finding), then creates the deployment naming it.
 */
export function registerDeployment(program: Command): void {
  const deployment = program
    .command('deployment')
    .exitOverride()
    .description('immutable deployments: what a run’s sandboxes are made from');

  deployment
    .command('create')
    .description('create a deployment (idempotent: the same spec, bundle content included, is the same id)')
    .requiredOption('--provider <name>', 'sandbox provider (bwrap, docker, local, …)')
    .option('-t, --tenant <name>', 'tenant of the deployment', 'default')
    .option('--image <image>', 'provider image')
    .option('--setup <argv-json>', 'a setup command as a JSON argv list, e.g. \'["npm","ci"]\' (repeatable, run in order)', collect)
    .option('--env <NAME=VALUE>', 'a variable of every sandbox command (repeatable; never a credential)', collect)
    .option('--workspace-root <path>', 'workspace directory inside the sandbox')
    .option('--validate <argv-json>', 'runtime check after setup, a JSON argv list')
    .option('--cwd <where>', "where a turn's command starts: workspace (the default) or home (the sandbox $HOME)")
    .option('--manual', 'runs move to this deployment only when asked (default: automatically)')
    .option('--bundle <dir>', 'capture DIR as the deployment bundle (restored read-only into every new sandbox, never checkpointed)')
    .option(
      '--bundle-path <path>',
      'where the bundle lands: relative to the sandbox home (default .deployment) or absolute outside the workspace',
    )
    .option('--publish <channel>', 'publish the deployment on this channel too')
    .action(async (flags: CreateFlags, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const services = await hf.forTenant(flags.tenant);
        const bundle = flags.bundle === undefined ? null : await services.bundles.capture(path.resolve(flags.bundle));
        const created = await services.deployments.create({
          provider: flags.provider,
          image: flags.image,
          setup: (flags.setup ?? []).map((s) => argvFlag(s, '--setup')),
          env: Object.fromEntries((flags.env ?? []).map(envFlag)),
          workspaceRoot: flags.workspaceRoot,
          validate: flags.validate === undefined ? null : argvFlag(flags.validate, '--validate'),
          workspaceUpgradePolicy: flags.manual === true ? 'manual' : 'automatic',
          bundle,
          bundlePath: flags.bundlePath,
          // Checked by the deployment spec schema, which names the field (`cwd`) as the API does.
          cwd: flags.cwd as 'workspace' | 'home' | undefined,
        });
        const channel = flags.publish === undefined ? null : await services.deployments.publish(flags.publish, created.id);
        output.result({ ...created, tenant: flags.tenant, channel }, () =>
          [created.id, ...(bundle === null ? [] : [`bundle ${bundle.rootTree} (${bundle.files} files, ${bundle.bytes} bytes)`])].join('\n'),
        );
      });
    });

  deployment
    .command('show')
    .description('show a deployment: its spec, bundle size and file count included')
    .argument('<id>', 'deployment id')
    .option('-t, --tenant <name>', 'tenant of the deployment', 'default')
    .action(async (id: string, flags: { tenant: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const found = await (await hf.forTenant(flags.tenant)).deployments.get(id);
        output.result(found, () => describe(found));
      });
    });

  deployment
    .command('ls')
    .description('list the deployments of a tenant, newest first')
    .option('-t, --tenant <name>', 'tenant', 'default')
    .action(async (flags: { tenant: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const list = await (await hf.forTenant(flags.tenant)).deployments.list();
        output.result(list, () =>
          list.length === 0
            ? 'no deployments'
            : renderTable(
                ['ID', 'PROVIDER', 'IMAGE', 'BUNDLE', 'CREATED'],
                list.map((d) => [
                  d.id,
                  d.spec.provider,
                  d.spec.image ?? '-',
                  d.spec.bundle === null ? '-' : `${d.spec.bundle.files} files, ${d.spec.bundle.bytes} B`,
                  isoTime(d.createdAt),
                ]),
              ),
        );
      });
    });
}

function describe(d: Deployment): string {
  const { spec } = d;
  return [
    `deployment  ${d.id}`,
    `  provider  ${spec.provider}${spec.image === null ? '' : ` (${spec.image})`}`,
    `  setup     ${spec.setup.length === 0 ? '-' : spec.setup.map((a) => JSON.stringify(a)).join(' ; ')}`,
    `  bundle    ${spec.bundle === null ? '-' : `${spec.bundle.rootTree} (${spec.bundle.files} files, ${spec.bundle.bytes} bytes) at ${spec.bundlePath ?? '~/.deployment'}`}`,
    `  policy    ${spec.workspaceUpgradePolicy}`,
    `  cwd       ${spec.cwd}`,
    `  created   ${isoTime(d.createdAt)}`,
  ].join('\n');
}

function argvFlag(value: string, flag: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (cause) {
    throw new InputError('INVALID_INPUT', `${flag} takes a JSON argv list, e.g. '["make","build"]'`, { data: { field: flag }, cause });
  }
  if (!Array.isArray(parsed)) throw new InputError('INVALID_INPUT', `${flag} takes a JSON argv list`, { data: { field: flag } });
  return parsed as string[];
}

function envFlag(value: string): [string, string] {
  const at = value.indexOf('=');
  if (at <= 0) throw new InputError('INVALID_INPUT', `--env takes NAME=VALUE, got ${JSON.stringify(value)}`, { data: { field: '--env' } });
  return [value.slice(0, at), value.slice(at + 1)];
}
