import dns from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { HoldfastError } from '../errors.js';

/** IPv4 blocks a host clone never connects to: unspecified, loopback, RFC 1918, CGNAT, link-local, IETF, benchmarking, multicast, reserved. */
const NEVER_DIALLED_IPV4: ReadonlyArray<readonly [string, number]> = [
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
];

/**
 * IPv6 prefixes whose addresses carry an IPv4 address that a tunnel or translator on the
 * host's network delivers to (the prefix as written before the IPv4 address, and the bit it starts at):
 * IPv4-compatible `::/96`, SIIT `::ffff:0:0/96`, NAT64 `64:ff9b::/96` (RFC 6052) and 6to4
 * `2002::/16` (RFC 3056). An IPv4 block never dialled is never dialled through them either.
 */
const IPV4_CARRIERS: ReadonlyArray<readonly [string, number]> = [
  ['::', 96],
  ['::ffff:0:', 96],
  ['64:ff9b::', 96],
  ['2002::', 16],
];

/**
 * Addresses a host clone never connects to (unless the operator allows private addresses):
 * {@link NEVER_DIALLED_IPV4}, also as carried in IPv6 ({@link IPV4_CARRIERS}); unspecified,
 * loopback, unique-local (fc00::/7), link-local, site-local and multicast IPv6, and local-use
 * NAT64 (`64:ff9b:1::/48`, RFC 8215: the operator's own translator, into its own networks).
 * IPv4-mapped IPv6 addresses are checked as IPv4.
 */
const NEVER_DIALLED = (() => {
  const list = new BlockList();
  for (const [net, bits] of NEVER_DIALLED_IPV4) {
    list.addSubnet(net, bits, 'ipv4');
    for (const [prefix, at] of IPV4_CARRIERS) list.addSubnet(carried(prefix, at, net), at + bits, 'ipv6');
  }
  for (const [net, bits] of [
    ['::', 128],
    ['::1', 128],
    ['fc00::', 7],
    ['fe80::', 10],
    ['fec0::', 10],
    ['ff00::', 8],
    ['64:ff9b:1::', 48],
  ] as const) {
    list.addSubnet(net, bits, 'ipv6');
  }
  return list;
})();

/** The IPv6 address of `prefix` carrying `ipv4` from bit `at` (96: the last 32 bits, in dotted form; 16: bits 16 to 47). */
function carried(prefix: string, at: number, ipv4: string): string {
  if (at === 96) return `${prefix}${ipv4}`;
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  const hex = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);
  return `${prefix.replace(/::$/, '')}:${hex(a, b)}:${hex(c, d)}::`;
}

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
