import type { Holdfast } from '../../index.js';
import { answerAs, type RouteDef, readJson, readQuery, tenantServices } from '../route.js';
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
        operationId: 'createDeployment',
        summary: 'Create a deployment (idempotent: the same spec returns the same id)',
        tags,
        body: DeploymentBody,
        response: Deployment,
        responseStatus: 201,
        responses: { 200: { description: 'The same spec was created before: the same deployment', body: Deployment } },
        errors: ['SECRET_EXCLUDED'],
      },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        const body = await readJson(c, DeploymentBody);
        const { created, ...deployment } = await deployments.create(body);
        return c.json(answerAs(Deployment, deployment), created ? 201 : 200);
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/deployments',
        operationId: 'listDeployments',
        summary: 'List deployments, newest first, a page at a time',
        tags,
        query: PageQuery,
        response: DeploymentPage,
      },
      async handler(c) {
        const page = await deploymentsPage(hf.meta, await tenantServices(hf, c), readQuery(c, PageQuery));
        return c.json(answerAs(DeploymentPage, { deployments: page.items, nextCursor: page.nextCursor }));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/deployments/:id',
        operationId: 'getDeployment',
        summary: 'Get a deployment',
        tags,
        response: Deployment,
      },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json(answerAs(Deployment, await deployments.get(c.req.param('id') ?? '')));
      },
    },
    {
      doc: {
        method: 'put',
        path: '/v1/channels/:name',
        operationId: 'publishChannel',
        summary: 'Publish a deployment on a channel (runs with automatic policy move before their next turn)',
        tags,
        body: ChannelBody,
        response: Channel,
      },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        const body = await readJson(c, ChannelBody);
        return c.json(answerAs(Channel, await deployments.publish(c.req.param('name') ?? '', body.deploymentId)));
      },
    },
    {
      doc: {
        method: 'get',
        path: '/v1/channels',
        operationId: 'listChannels',
        summary: 'List channels by name, a page at a time',
        tags,
        query: PageQuery,
        response: ChannelPage,
      },
      async handler(c) {
        const page = await channelsPage(hf.meta, await tenantServices(hf, c), readQuery(c, PageQuery));
        return c.json(answerAs(ChannelPage, { channels: page.items, nextCursor: page.nextCursor }));
      },
    },
    {
      doc: { method: 'get', path: '/v1/channels/:name', operationId: 'getChannel', summary: 'Get a channel', tags, response: Channel },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json(answerAs(Channel, await deployments.channel(c.req.param('name') ?? '')));
      },
    },
  ];
}
