/** The shapes of the service's answers the page reads (see `/v1/openapi.json`). */

export interface WhoAmI {
  readonly kind: 'service' | 'user' | 'run';
  readonly tenant: string;
  readonly admin?: boolean;
  readonly user?: string;
  readonly role?: 'member' | 'viewer';
  readonly runId?: string;
  readonly bindings?: Bindings;
}

export type Scope = 'task' | 'project' | 'agent' | 'user';
export type Bindings = Partial<Record<Scope, string>>;

export interface RunView {
  readonly id: string;
  readonly workspaceId: string;
  readonly channel: string | null;
  readonly deploymentId: string;
  readonly sandbox: { readonly provider: string; readonly id: string } | null;
  readonly lease: { readonly state: string; readonly epoch: number; readonly owner: string | null; readonly error?: unknown };
  readonly turnCount: number;
  readonly bindings: Bindings | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly endedAt: number | null;
  /** The bound repositories' checkouts (`GET /v1/runs/:id`; absent from list pages). */
  readonly repositories?: readonly RepositoryView[];
}

/** One bound repository's checkout state. */
export interface RepositoryView {
  readonly name: string;
  readonly url: string;
  readonly branch: string | null;
  readonly state: 'none' | 'saving' | 'saved' | 'failed';
  readonly lastCheckpointAt: number | null;
  readonly checkpointId: string | null;
  readonly error: { readonly code: string; readonly message: string } | null;
}

export interface ErrorBody {
  readonly code?: string;
  readonly message?: string;
}

export interface CheckpointView {
  readonly id: string;
  readonly workspaceId: string;
  readonly parentId: string | null;
  readonly rootTree: string | null;
  readonly status: 'pending' | 'ready' | 'failed';
  readonly reason: string;
  readonly stats: {
    readonly bytes?: number;
    readonly storedBytesWritten?: number;
    readonly durationMs?: number;
    readonly files?: number;
  } | null;
  readonly error: ErrorBody | null;
  readonly createdAt: number;
  readonly finishedAt: number | null;
  /** The caller's label (absent from a server older than labels). */
  readonly label?: string | null;
  /** The caller's flat metadata. */
  readonly meta?: Readonly<Record<string, string | number | boolean | null>> | null;
  /** A fork's first checkpoint: the checkpoint whose tree it shares. */
  readonly forkedFrom?: string | null;
}

export interface TurnView {
  readonly id: string;
  readonly seq: number;
  readonly status: 'running' | 'completed' | 'failed';
  readonly checkpointId: string | null;
  readonly error: ErrorBody | null;
  readonly result?: { readonly exitCode?: number | null; readonly signal?: string | null; readonly timedOut?: boolean } | null;
  readonly startedAt: number;
  readonly finishedAt: number | null;
}

export interface RunEventView {
  readonly id: number;
  /** When the step ended. */
  readonly at: number;
  readonly kind: string;
  readonly step: string;
  readonly status: string;
  readonly durationMs: number;
  readonly data: Record<string, unknown> | null;
}

export interface TreeEntry {
  readonly name: string;
  readonly type: 'file' | 'dir' | 'symlink';
  readonly mode: number;
  readonly size?: number;
  readonly mtimeMs?: number;
  readonly sha256?: string;
  readonly target?: string;
}

export type TreeLookup =
  | { readonly kind: 'dir'; readonly entries: readonly TreeEntry[] }
  | { readonly kind: 'entry'; readonly entry: TreeEntry };

export interface DiffView {
  readonly checkpointId: string;
  readonly baseId: string | null;
  readonly changes: readonly { readonly path: string; readonly change: string; readonly type: string }[];
  readonly truncated: boolean;
}

export interface FolderEntry {
  readonly id: string;
  readonly path: string;
  readonly kind: 'file' | 'directory';
  readonly size: number;
  readonly sha256: string | null;
  readonly contentType: string | null;
  readonly updatedAt: number;
  readonly deletedAt: number | null;
}

export interface FolderPage {
  readonly files: readonly FolderEntry[];
  readonly nextCursor: string | null;
  readonly lastOperationAt: number | null;
}

/** One sandbox's save state of a collection (`GET …/sync`). */
export interface SyncSandbox {
  readonly runId: string;
  readonly sandbox: { readonly provider: string; readonly id: string } | null;
  readonly state: 'never_saved' | 'saving' | 'saved' | 'failed';
  readonly lastSavedAt: number | null;
  readonly finalCheckpointAt: number | null;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly refresh: {
    readonly state: 'none' | 'queued' | 'running' | 'failed';
    readonly at: number | null;
    readonly error: { readonly code: string; readonly message: string } | null;
  };
  readonly active: boolean;
}
