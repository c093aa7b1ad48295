import { createHash } from 'node:crypto';
import { afterAll, onTestFinished } from 'vitest';
import type { MetaConfig } from '../config.js';
import { type MetadataStore, type ObjectRecord, openMetadataStore, type PackRecord } from './metadata-store.js';

/** An empty database of the dialect under test, provisioned by the driver's test file. */
export interface MetadataTestDatabase {
  /** Points at the empty database; the contract opens (and migrates) stores on it itself. */
  readonly config: MetaConfig;
  /** Removes the database. Called after every store opened on it is closed. */
  cleanup(): Promise<void>;
}

/** Options of `describeMetadataContract`. */
export interface MetadataContractOptions {
  /** Dialect name shown in test titles, e.g. `sqlite`. */
  readonly name: string;
  /** Provisions a fresh, empty database (a temp file, a new PostgreSQL database). */
  readonly createDatabase: () => Promise<MetadataTestDatabase>;
}

/** A fresh database plus every store the test opened on it. */
export interface ContractDatabase {
  readonly config: MetaConfig;
  /** Opens another independent store (its own connection or pool) on this database. */
  open(): Promise<MetadataStore>;
  /** Closes the stores opened so far and removes the database. Idempotent. */
  dispose(): Promise<void>;
}

/** What the case groups share. */
export interface ContractContext {
  readonly options: MetadataContractOptions;
  /** A fresh database disposed when the current test finishes. */
  freshDatabase(): Promise<ContractDatabase>;
  /**
   * Declares a fixture shared by the tests of the enclosing `describe`: built on a fresh
   * database by the first test that awaits it, disposed after the block. Built lazily rather
   * than in `beforeAll` so that a failure (PostgreSQL down) fails every test that needs it
   * instead of turning them into skips.
   */
  sharedFixture<T>(build: (database: ContractDatabase) => Promise<T>): () => Promise<T>;
  /** Strictly increasing epoch-ms clock shared by every store the contract opens. */
  readonly now: () => number;
}

/** Builds the shared context for one dialect. */
export function createContractContext(options: MetadataContractOptions): ContractContext {
  let tick = 1_700_000_000_000;
  const now = (): number => {
    tick += 1;
    return tick;
  };
  const provision = async (): Promise<ContractDatabase> => {
    const database = await options.createDatabase();
    const stores: MetadataStore[] = [];
    let disposed: Promise<void> | undefined;
    return {
      config: database.config,
      async open() {
        const store = await openMetadataStore(database.config, { now });
        stores.push(store);
        return store;
      },
      dispose() {
        disposed ??= Promise.all(stores.map((store) => store.close())).then(() => database.cleanup());
        return disposed;
      },
    };
  };
  return {
    options,
    now,
    sharedFixture<T>(build: (database: ContractDatabase) => Promise<T>) {
      let database: ContractDatabase | undefined;
      let built: Promise<T> | undefined;
      afterAll(() => database?.dispose());
      return () => {
        built ??= provision().then((provisioned) => {
          database = provisioned;
          return build(provisioned);
        });
        return built;
      };
    },
    async freshDatabase() {
      const database = await provision();
      onTestFinished(() => database.dispose());
      return database;
    },
  };
}

/** Lowercase hex SHA-256 of `text`: a valid object or pack id. */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A unique suffix so tests sharing one database never collide on names. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
}

/** `objectCount` objects spread over packs of `perPack`, ids derived from `salt`. */
export function makeObjects(salt: string, objectCount: number, perPack = 500): { packs: PackRecord[]; objects: ObjectRecord[] } {
  const packs: PackRecord[] = [];
  const objects: ObjectRecord[] = [];
  for (let first = 0; first < objectCount; first += perPack) {
    const count = Math.min(perPack, objectCount - first);
    const packId = sha256(`pack:${salt}:${first}`);
    packs.push({ id: packId, kind: 'data', size: count * 1_000 + 64, objectCount: count });
    for (let i = 0; i < count; i += 1) {
      const n = first + i;
      objects.push({
        id: sha256(`object:${salt}:${n}`),
        packId,
        kind: 'data',
        offset: i * 1_000,
        length: 1_000,
        rawLength: 1_000 + (n % 7),
        codec: n % 2 === 0 ? 'zstd' : 'none',
      });
    }
  }
  return { packs, objects };
}

/** A tenant and a workspace in it, with unique names. */
export async function makeWorkspace(store: MetadataStore): Promise<{ tenantId: string; workspaceId: string }> {
  const tenant = await store.tenants.create({ name: uniqueName('tenant') });
  const workspace = await store.workspaces.create({ tenantId: tenant.id, name: uniqueName('ws') });
  return { tenantId: tenant.id, workspaceId: workspace.id };
}

/** A ready checkpoint of `workspaceId` (created pending, then marked ready). */
export async function makeReadyCheckpoint(store: Pick<MetadataStore, 'checkpoints'>, workspaceId: string): Promise<string> {
  const checkpoint = await store.checkpoints.createPending({ workspaceId, reason: 'turn' });
  await store.checkpoints.markReady(checkpoint.id, { rootTree: sha256(`tree:${checkpoint.id}`), stats: { files: 1 } });
  return checkpoint.id;
}
