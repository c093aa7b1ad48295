import type { Holdfast } from '../../index.js';
import { type RouteDef, readJson, readQuery, requireAdmin } from '../route.js';
import { PageQuery, TokenBody, TokenPage } from './schemas.js';

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
      authorize: requireAdmin,
      // The secret exists once: a replay of this request answers the token's id and metadata, `token: null`.
      credentialFields: ['token'],
      async handler(c) {
        const body = await readJson(c, TokenBody);
        return c.json(await hf.tokens.create({ tenant: body.tenant, name: body.name, admin: body.admin ?? false }), 201);
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/tokens',
        summary: "List every tenant's tokens, live and revoked, newest first, a page at a time (admin tokens only; never a secret)",
        tags: ['auth'],
        query: PageQuery,
        response: TokenPage,
      },
      authorize: requireAdmin,
      async handler(c) {
        const page = await hf.tokens.page(readQuery(c, PageQuery));
        return c.json({ tokens: page.items, nextCursor: page.nextCursor });
      },
    },
  ];
}
