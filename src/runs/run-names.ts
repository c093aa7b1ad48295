/** The workspace name holding run `runId`'s files (one workspace per run). */
export function runWorkspaceName(runId: string): string {
  return `run-${runId}`;
}
