import { describe, expect, it } from 'vitest';
import { isPrivateAddress, pinnedAddress } from './host-address.js';

describe('isPrivateAddress', () => {
  it('refuses loopback, private and link-local IPv4 and IPv6, and IPv4-mapped forms', () => {
    for (const address of ['127.0.0.1', '10.1.2.3', '169.254.169.254', '192.168.0.1', '::1', 'fd00::1', 'fe80::1', '::ffff:7f00:1']) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
  });

  it('refuses a private IPv4 address carried in IPv6 (IPv4-compatible, SIIT, NAT64, 6to4), and local-use NAT64', () => {
    for (const address of [
      '::7f00:1',
      '::127.0.0.1',
      '::ffff:0:a00:1',
      '64:ff9b::7f00:1',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::192.168.1.1',
      '2002:7f00:1::1',
      '2002:a9fe:a9fe::',
      '64:ff9b:1::808:808',
    ]) {
      expect(isPrivateAddress(address), address).toBe(true);
    }
  });

  it('allows public addresses, also through NAT64 and 6to4', () => {
    for (const address of ['140.82.112.3', '2606:4700::1111', '64:ff9b::808:808', '2002:808:808::1']) {
      expect(isPrivateAddress(address), address).toBe(false);
    }
  });

  it('pins no literal that carries a loopback address', async () => {
    await expect(pinnedAddress('::7f00:1', false)).rejects.toMatchObject({ code: 'FORBIDDEN', data: { address: '::7f00:1' } });
    await expect(pinnedAddress('64:ff9b::a9fe:a9fe', false)).rejects.toMatchObject({ code: 'FORBIDDEN' });
  });
});
