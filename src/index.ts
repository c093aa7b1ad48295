/**
 * The library's public face: `openHoldfast` and the types and classes a library user, a
 * platform adapter or a provider author needs. It only re-exports; the composition root is
 * `holdfast.ts`.
 */

export type { BlobBody, BlobStat, BlobStore, ByteRange, PutOptions, PutResult } from './blob-store/blob-store.js';
export { LocalDiskBlobStore } from './blob-store/drivers/local-disk.js';
export { openBlobStore } from './blob-store/open-blob-store.js';
export * from './config.js';
export type { DirEntry, FileEntry, SymlinkEntry, TreeEntry } from './core/tree.js';
export { type BundleRecord, DEFAULT_BUNDLE_DIR } from './deployments/bundle-record.js';
export { Bundles, findCapturedBundle } from './deployments/bundles.js';
export { BUNDLE_DIR_ENV, type BundleInstall, installBundle } from './deployments/deployment-bundle.js';
export type { DeploymentSpec, DeploymentSpecInput, WorkspaceUpgradePolicy } from './deployments/deployment-spec.js';
export type { Deployment, DeploymentCreateInput, Deployments } from './deployments/deployments.js';
export * from './errors.js';
export {
  type CollectionRef,
  DEFAULT_FOLDER_LIMITS,
  type FolderEntry,
  type FolderLimits,
  type FolderRef,
  Folders,
  type ListPage,
  type OpenedFile,
} from './folders/folders.js';
export { type Holdfast, type OpenHoldfastOptions, openHoldfast, type SelfCheck, type TenantServices } from './holdfast.js';
export type {
  Channel,
  Checkpoint,
  CheckpointReason,
  CheckpointStatus,
  Lease,
  MetadataStore,
  Run,
  RunEvent,
  Turn,
  Workspace,
} from './metadata/metadata-store.js';
export { openMetadataStore } from './metadata/metadata-store.js';
export { FOLDER_SCOPES, type FolderScope } from './model/folder-scopes.js';
export type { RunBindings } from './model/run-bindings.js';
export type { TenantScope } from './model/tenants.js';
export { DEFAULT_TENANT } from './model/tenants.js';
export { BUNDLE_WORKSPACE } from './model/workspace-names.js';
export type { RebuildOptions, RebuildReport } from './objects/index-rebuild.js';
export { Checkpoints } from './runs/checkpoints.js';
export { INTERRUPTED_TURN_GRACE_MS, type ShutdownReport } from './runs/drain.js';
export { isFinalSave, type RunExtension, type RunSandboxContext, type SaveMoment } from './runs/run-extension.js';
export type { RunLogEvent } from './runs/run-log-event.js';
export { DEFAULT_RUN_SETTINGS, type RunSettings, STRAY_SWEEP_INTERVAL_MS } from './runs/run-settings.js';
export {
  type CreatedRun,
  type CreateRunInput,
  type ForkRunInput,
  MAX_TURN_OUTPUT_BYTES,
  Runs,
  type TurnBody,
  type TurnCommand,
  type TurnContext,
  type TurnOptions,
  type TurnOutcome,
} from './runs/runs.js';
export type { StraySandbox, StraySweepReport } from './runs/sandbox/stray-sweep.js';
export { DirectoryFiles } from './sandbox/file-api/directory-files.js';
export { fileApiEndpoints } from './sandbox/file-api/file-api-endpoints.js';
export {
  FILE_API_READ_BYTES,
  FILE_API_WRITE_BYTES,
  type FileStat,
  type ListedEntry,
  type SandboxFiles,
} from './sandbox/file-api/sandbox-files.js';
export { TanStackFiles, type TanStackSandboxSlice } from './sandbox/file-api/tanstack-files.js';
export { BwrapSandboxProvider, type BwrapSandboxProviderConfig } from './sandbox/providers/bwrap.js';
export { DockerSandboxProvider, type DockerSandboxProviderConfig } from './sandbox/providers/docker.js';
export { LocalSandboxProvider, type LocalSandboxProviderConfig } from './sandbox/providers/local.js';
export { runBuffered } from './sandbox/run-buffered.js';
export {
  EXEC_SIGNALS,
  type ExecExit,
  type ExecOptions,
  type ExecProcess,
  type ExecSignal,
  MAX_RUN_OUTPUT_BYTES,
  type RunOptions,
  type RunResult,
  type SandboxCapabilities,
  type SandboxHandle,
  type SandboxInfo,
  type SandboxLimits,
  type SandboxProvider,
  type SandboxSpec,
} from './sandbox/sandbox-provider.js';
export { checkedSandboxId, SANDBOX_ID_PATTERN } from './sandbox/sandbox-spec.js';
export type { CheckpointProgress, CheckpointResult, CheckpointStats } from './snapshot/checkpoint/checkpoint.js';
export {
  type CheckpointMeta,
  type CheckpointMetaValue,
  type CheckpointNote,
  checkedCheckpointNote,
  MAX_CHECKPOINT_LABEL_CHARS,
  MAX_CHECKPOINT_META_BYTES,
  MAX_CHECKPOINT_META_KEY_CHARS,
  MAX_CHECKPOINT_META_KEYS,
} from './snapshot/checkpoint-note.js';
export type { GcOptions, GcReport } from './snapshot/gc/gc.js';
export { GC_SWEEP_INTERVAL_MS, type GcSweepOutcome } from './snapshot/gc/gc-sweeper.js';
export type { RetentionPolicy } from './snapshot/gc/retention.js';
export type { DiffEntry } from './snapshot/inspect/diff.js';
export type { VerifyOptions, VerifyReport } from './snapshot/inspect/verify.js';
export type { RestoreProgress, RestoreReceipt } from './snapshot/restore/restore.js';
export { Snapshots, type WorkspaceSummary } from './snapshot/snapshots.js';
export type { EndpointContext, SourceScan, WorkspaceSource } from './snapshot/workspace-source.js';
export type { RestorePlan, TargetReuse, TargetSession, WorkspaceTarget } from './snapshot/workspace-target.js';
export {
  canAccessFolder,
  type FolderAccessLookups,
  type FolderAction,
  folderAccessLookups,
  PRINCIPAL_KINDS,
  type PrincipalKind,
  type RunPrincipal,
  type ServicePrincipal,
  type UserPrincipal,
  type UserRole,
} from './tenants/folder-access.js';
export { type CreatedToken, generateToken, hashToken, type Principal, Tokens } from './tenants/tokens.js';
export { Users, type UserView } from './tenants/users.js';
