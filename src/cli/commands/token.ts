import type { Command } from 'commander';
import { InputError, NotFoundError } from '../../errors.js';
import { isoTime, renderTable } from '../output.js';
import { readHoldfast, withHoldfast } from '../program.js';

/** Label of a token created without `--name`. */
const DEFAULT_TOKEN_NAME = 'cli';
/** Tenant of a token created without `--tenant`. */
const DEFAULT_TOKEN_TENANT = 'default';

/** `holdfast token create | list | revoke`: API tokens of the HTTP server, managed in the store. */
export function registerToken(program: Command): void {
  // Subcommands copy this when created; runCli overrides only the first level, and a usage
  // error in `token <sub>` must still reach it to exit 2.
  const token = program
    .command('token')
    .exitOverride()
    .description('create, list and revoke API tokens (stored hashed; a token is shown once)');

  token
    .command('create')
    .description('create a token and print it once (stdout holds the token alone unless --json)')
    .option('-t, --tenant <name>', 'tenant the token acts for (created if missing, except for --user)', DEFAULT_TOKEN_TENANT)
    .option('-n, --name <label>', 'label to recognise the token by in lists and logs (default: cli, or "user NAME")')
    .option('--admin', 'may also manage tenants and tokens (service tokens only)')
    .option('-u, --user <name>', 'a token acting as this live user of the tenant (see holdfast user add), not as a service')
    .action(async (flags: { tenant: string; name?: string; admin?: boolean; user?: string }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        if (flags.user !== undefined && flags.admin === true) {
          throw new InputError('INVALID_INPUT', 'a user token cannot be an admin token: drop --admin or --user', {
            data: { field: 'admin' },
          });
        }
        const created =
          flags.user === undefined
            ? await hf.tokens.create({ tenant: flags.tenant, name: flags.name ?? DEFAULT_TOKEN_NAME, admin: flags.admin === true })
            : await hf.tokens.createForUser({
                tenant: flags.tenant,
                user: flags.user,
                ...(flags.name === undefined ? {} : { name: flags.name }),
              });
        const who = created.user === null ? (created.admin ? ', admin' : '') : `, acting as user ${created.user}`;
        output.note(`token ${created.id} (${created.name}) for tenant ${created.tenant}${who}: shown only once, store it now`);
        output.result(created, () => created.token);
      });
    });

  token
    .command('list')
    .description('list tokens, live and revoked, newest first (never their secrets)')
    .action(async (_flags: unknown, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const tenants = new Map((await hf.meta.tenants.list()).map((t) => [t.id, t.name]));
        const tokens = (await hf.tokens.list()).map((t) => ({
          id: t.id,
          tenantId: t.tenantId,
          tenant: tenants.get(t.tenantId) ?? null,
          name: t.name,
          admin: t.admin,
          kind: t.userId !== null ? 'user' : t.runId !== null ? 'run' : 'service',
          userId: t.userId,
          runId: t.runId,
          createdAt: t.createdAt,
          revokedAt: t.revokedAt,
        }));
        output.result(tokens, () =>
          tokens.length === 0
            ? 'no tokens (holdfast token create --admin makes one)'
            : renderTable(
                ['ID', 'TENANT', 'NAME', 'KIND', 'ADMIN', 'CREATED', 'REVOKED'],
                tokens.map((t) => [
                  t.id,
                  t.tenant ?? t.tenantId,
                  t.name,
                  t.kind,
                  t.admin ? 'yes' : 'no',
                  isoTime(t.createdAt),
                  isoTime(t.revokedAt),
                ]),
              ),
        );
      });
    });

  token
    .command('revoke')
    .description('revoke a token: requests carrying it are refused from now on')
    .argument('<id>', 'token id (from holdfast token list)')
    .action(async (id: string, _flags: unknown, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        if (!(await hf.tokens.revoke(id))) {
          throw new NotFoundError(`no live token with id ${id}: holdfast token list shows the ids (a revoked token stays revoked)`, {
            data: { tokenId: id },
          });
        }
        output.result({ id, revoked: true }, () => `token ${id} revoked`);
      });
    });
}
