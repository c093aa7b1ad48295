/**
 * The workspace of each tenant that holds its deployment bundles: one checkpoint per capture,
 * taken only by the bundle capture (with its strict rules), never by a workspace checkpoint.
 * Its ready checkpoints are exempt from retention: a bundle a deployment names must outlive
 * every `gc --keep-last`.
 */
import { createHash } from 'node:crypto';

export const BUNDLE_WORKSPACE = 'holdfast.bundles';

/** Whether `name` is a workspace only Holdfast itself checkpoints ({@link BUNDLE_WORKSPACE}). */
export function isReservedWorkspace(name: string): boolean {
  return name === BUNDLE_WORKSPACE;
}

/** The workspace name holding run `runId`'s files (one workspace per run). */
export function runWorkspaceName(runId: string): string {
  return `run-${runId}`;
}

/** The sync workspace of one run's collection directory (one per run and scope, in {@link SYNC_TENANT}). */
export function syncWorkspaceName(tenantId: string, runId: string, scope: string): string {
  return `sync-${createHash('sha256').update(`${tenantId}\0${runId}\0${scope}`).digest('hex').slice(0, 40)}`;
}
