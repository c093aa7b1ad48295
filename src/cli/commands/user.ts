import type { Command } from 'commander';
import type { UserRole } from '../../tenants/folder-access.js';
import { isoTime, renderTable } from '../output.js';
import { oneOf, readHoldfast, withHoldfast } from '../program.js';

/** The roles `--role` accepts. */
const ROLES: readonly UserRole[] = ['member', 'viewer'];

/** `holdfast user add | revoke | ls`: the people of a tenant, whom user tokens act for. */
export function registerUser(program: Command): void {
  // Subcommands copy this when created; runCli overrides only the first level, and a usage
  // error in `user <sub>` must still reach it to exit 2.
  const user = program
    .command('user')
    .exitOverride()
    .description('add, revoke and list users of a tenant (members read and write shared work folders, viewers read them)');

  user
    .command('add')
    .description('add a user to a tenant (created if missing); holdfast token create --user makes their token')
    .requiredOption('-t, --tenant <name>', 'tenant of the user')
    .requiredOption('--role <role>', 'member or viewer', oneOf('--role', ROLES))
    .argument('<name>', "the user's name, also the owner id of their user collection")
    .action(async (name: string, flags: { tenant: string; role: UserRole }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const added = await hf.users.add({ tenant: flags.tenant, name, role: flags.role });
        output.result(added, () => `user ${added.name} (${added.role}) added to tenant ${added.tenant}`);
      });
    });

  user
    .command('revoke')
    .description("revoke a user: their tokens stop working at once, and their runs lose the user's collection")
    .requiredOption('-t, --tenant <name>', 'tenant of the user')
    .argument('<name>', 'the user to revoke')
    .action(async (name: string, flags: { tenant: string }, command: Command) => {
      await withHoldfast(command, async (hf, { output }) => {
        const revoked = await hf.users.revoke({ tenant: flags.tenant, name });
        output.result(revoked, () => `user ${revoked.name} of tenant ${revoked.tenant} revoked`);
      });
    });

  user
    .command('ls')
    .description('list users, live and revoked (all tenants unless --tenant)')
    .option('-t, --tenant <name>', 'only this tenant')
    .action(async (flags: { tenant?: string }, command: Command) => {
      await readHoldfast(command, async (hf, { output }) => {
        const users = await hf.users.list(flags.tenant === undefined ? {} : { tenant: flags.tenant });
        output.result(users, () =>
          users.length === 0
            ? 'no users (holdfast user add --tenant T NAME --role member makes one)'
            : renderTable(
                ['TENANT', 'NAME', 'ROLE', 'CREATED', 'REVOKED'],
                users.map((u) => [u.tenant, u.name, u.role, isoTime(u.createdAt), isoTime(u.revokedAt)]),
              ),
        );
      });
    });
}
