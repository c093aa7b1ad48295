import type { Holdfast } from '../../index.js';
import { type RouteDef, readJson, tenantServices } from '../route.js';
import { Channel, ChannelBody, Deployment, DeploymentBody } from './schemas.js';

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
      doc: { method: 'get', path: '/v1/deployments', summary: 'List deployments, newest first', tags },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json({ deployments: await deployments.list() });
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
      doc: { method: 'get', path: '/v1/channels', summary: 'List channels', tags },
      async handler(c) {
        const { deployments } = await tenantServices(hf, c);
        return c.json({ channels: await deployments.channels() });
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
