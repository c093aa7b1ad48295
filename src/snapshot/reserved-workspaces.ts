/**
 * The workspace of each tenant that holds its deployment bundles: one checkpoint per capture,
 * taken only by the bundle capture (with its strict rules), never by a workspace checkpoint.
 * Its ready checkpoints are exempt from retention: a bundle a deployment names must outlive
 * every `gc --keep-last`.
 */
export const BUNDLE_WORKSPACE = 'holdfast.bundles';

/** Whether `name` is a workspace only Holdfast itself checkpoints ({@link BUNDLE_WORKSPACE}). */
export function isReservedWorkspace(name: string): boolean {
  return name === BUNDLE_WORKSPACE;
}
