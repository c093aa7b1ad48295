import dns from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { HoldfastError } from '../errors.js';

/**
 * Addresses a host clone never connects to (unless the operator allows private addresses):
 * unspecified, loopback, RFC 1918, CGNAT (100.64/10), link-local, the IETF and benchmarking
 * blocks, multicast and reserved IPv4; unspecified, loopback, unique-local (fc00::/7),
 * link-local, site-local and multicast IPv6. IPv4-mapped IPv6 addresses are checked as IPv4.
 */
const NEVER_DIALLED = (() => {
  const list = new BlockList();
  for (const [net, bits] of [
    ['0.0.0.0', 8],
    ['10.0.0.0', 8],
    ['100.64.0.0', 10],
    ['127.0.0.0', 8],
    ['169.254.0.0', 16],
    ['172.16.0.0', 12],
    ['192.0.0.0', 24],
    ['192.168.0.0', 16],
    ['198.18.0.0', 15],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4],
  ] as const) {
    list.addSubnet(net, bits, 'ipv4');
  }
  for (const [net, bits] of [
    ['::', 128],
    ['::1', 128],
    ['fc00::', 7],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
  ] as const) {
    list.addSubnet(net, bits, 'ipv6');
  }
  return list;
})();

/** Whether `address` (an IP literal) is one a host clone never connects to (see {@link NEVER_DIALLED}). */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  return NEVER_DIALLED.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The one address git is pinned to for `host`: the literal itself, or the first address DNS
 * gives. `FORBIDDEN` (data: host, address) when any address of the host is private and
 * `allowPrivate` is off: a name that resolves to both is refused too, since which one a later
 * lookup returns is the name owner's choice. `SETUP_FAILED` when the name does not resolve.
 */
export async function pinnedAddress(host: string, allowPrivate: boolean): Promise<string> {
  let addresses: string[];
  if (isIP(host) !== 0) {
    addresses = [host];
  } else {
    try {
      addresses = (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch (error) {
      throw new HoldfastError(
        'SETUP_FAILED',
        `the repository host ${host} does not resolve (${(error as { code?: string }).code ?? 'lookup failed'})`,
        {
          data: { host },
        },
      );
    }
  }
  const first = addresses[0];
  if (first === undefined) throw new HoldfastError('SETUP_FAILED', `the repository host ${host} has no address`, { data: { host } });
  if (!allowPrivate) {
    const refused = addresses.find(isPrivateAddress);
    if (refused !== undefined) {
      throw new HoldfastError(
        'FORBIDDEN',
        `the repository host ${host} resolves to ${refused}, a loopback, private, link-local or multicast address this service never connects to for a tenant`,
        { data: { host, address: refused } },
      );
    }
  }
  return first;
}
