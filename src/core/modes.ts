/**
 * File modes as Holdfast stores and restores them. Only the nine permission bits travel:
 * setuid, setgid and sticky are stripped when a workspace is read (and the strip reported),
 * refused in a stored tree, and never applied by a restore, because a restore run as root
 * would otherwise hand a sandbox's file to the host as a root-owned setuid binary.
 */

/** Read, write and execute for owner, group and others. */
export const PERMISSION_BITS = 0o777;
/** setuid (0o4000), setgid (0o2000) and sticky (0o1000). */
export const SPECIAL_BITS = 0o7000;

/** The permission bits of a `stat` mode (type and special bits dropped). */
export function permissionBits(mode: number): number {
  return mode & PERMISSION_BITS;
}

/** True when `mode` carries setuid, setgid or sticky. */
export function hasSpecialBits(mode: number): boolean {
  return (mode & SPECIAL_BITS) !== 0;
}

/** True for a mode a tree may hold: an integer made of permission bits only. */
export function isStorableMode(mode: unknown): mode is number {
  return Number.isInteger(mode) && (mode as number) >= 0 && (mode as number) <= PERMISSION_BITS;
}
