import type { Holdfast } from '../../index.js';
import { type RouteDef, readJson, readQuery, tenantServices } from '../route.js';
import { channelsPage, deploymentsPage } from './list-pages.js';
import { Channel, ChannelBody, ChannelPage, Deployment, DeploymentBody, DeploymentPage, PageQuery } from './schemas.js';

/** Deployments (immutable, content-addressed) and channels. */
export function deploymentRoutes(hf: Holdfast): RouteDef[] {
  const tags = ['deployments'];
  return [
    {
      doc: {
        method: 'post',
        path: '/v1/deployments',
        summary: 'Create a deployment (idempotent: the same spec returns the same id)',
        tags,
        body: DeploymentBody,
        response: Deployment,
        responseStatus: 201,
      },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        const body = await readJson(c, DeploymentBody);
        const { created, ...deployment } = await deployments.create(body);
        return c.json(deployment, created ? 201 : 200);
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/deployments',
        summary: 'List deployments, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: DeploymentPage,
      },
      async handler(c) {
        const page = await deploymentsPage(hf.meta, await tenantServices(hf, c), readQuery(c, PageQuery));
        return c.json({ deployments: page.items, nextCursor: page.nextCursor });
      },
    },
    {
      doc: { method: 'get', path: '/v1/deployments/:id', summary: 'Get a deployment', tags, response: Deployment },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json(await deployments.get(c.req.param('id') ?? ''));
      },
    },
    {
      doc: {
        method: 'put',
        path: '/v1/channels/:name',
        summary: 'Publish a deployment on a channel (runs with automatic policy move before their next turn)',
        tags,
        body: ChannelBody,
        response: Channel,
      },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        const body = await readJson(c, ChannelBody);
        return c.json(await deployments.publish(c.req.param('name') ?? '', body.deploymentId));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/channels',
        summary: 'List channels by name, a page at a time',
        tags,
        query: PageQuery,
        response: ChannelPage,
      },
      async handler(c) {
        const page = await channelsPage(hf.meta, await tenantServices(hf, c), readQuery(c, PageQuery));
        return c.json({ channels: page.items, nextCursor: page.nextCursor });
      },
    },
    {
      doc: { method: 'get', path: '/v1/channels/:name', summary: 'Get a channel', tags, response: Channel },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json(await deployments.channel(c.req.param('name') ?? ''));
      },
    },
  ];
}
