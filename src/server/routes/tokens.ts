import type { Holdfast } from '../../index.js';
import { answerAs, type RouteDef, readJson, readQuery, requireAdmin } from '../route.js';
import { CreatedTokenSchema, PageQuery, TokenBody, TokenPage } from './schemas.js';

/** Admin-only: API tokens for any tenant (the tenant is created on first use). */
export function tokenRoutes(hf: Holdfast): RouteDef[] {
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/tokens',
        operationId: 'createToken',
        summary: 'Create a token for a tenant (admin tokens only); the token is shown once',
        tags: ['auth'],
        body: TokenBody,
        response: CreatedTokenSchema,
        responseStatus: 201,
        errors: ['FORBIDDEN'],
      },
      authorize: requireAdmin,
      // The secret exists once: a replay of this request answers the token's id and metadata, `token: null`.
      credentialFields: ['token'],
      async handler(c) {
        const body = await readJson(c, TokenBody);
        const created = await hf.tokens.create({ tenant: body.tenant, name: body.name, admin: body.admin ?? false });
        return c.json(answerAs(CreatedTokenSchema, created), 201);
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/tokens',
        operationId: 'listTokens',
        summary: "List every tenant's tokens, live and revoked, newest first, a page at a time (admin tokens only; never a secret)",
        tags: ['auth'],
        query: PageQuery,
        response: TokenPage,
        errors: ['FORBIDDEN'],
      },
      authorize: requireAdmin,
      async handler(c) {
        const page = await hf.tokens.page(readQuery(c, PageQuery));
        return c.json(answerAs(TokenPage, { tokens: page.items, nextCursor: page.nextCursor }));
      },
    },
  ];
}
