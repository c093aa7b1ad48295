import { HoldfastError } from '../../errors.js';
import type { Holdfast } from '../../index.js';
import { generateToken, hashToken } from '../auth.js';
import { type RouteDef, readJson } from '../route.js';
import { TokenBody } from './schemas.js';

/** Admin-only: API tokens for any tenant (the tenant is created on first use). */
export function tokenRoutes(hf: Holdfast): RouteDef[] {
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/tokens',
        summary: 'Create a token for a tenant (admin tokens only); the token is shown once',
        tags: ['auth'],
        body: TokenBody,
        responseStatus: 201,
      },
      async handler(c) {
        if (!c.get('principal').admin) throw new HoldfastError('FORBIDDEN', 'only admin tokens may create tokens', { data: {} });
        const body = await readJson(c, TokenBody);
        const { tenant } = await hf.forTenant(body.tenant);
        const token = generateToken();
        const record = await hf.meta.tokens.create({
          tenantId: tenant.id,
          name: body.name,
          hash: hashToken(token),
          admin: body.admin ?? false,
        });
        return c.json({ id: record.id, tenant: tenant.name, name: record.name, admin: record.admin, token }, 201);
      },
    },
  ];
}
