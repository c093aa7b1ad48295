import type { BlobStore } from '../../blob-store/blob-store.js';
import { forEachLimit } from '../../core/concurrency.js';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import { packIdFromKey, packKey } from '../../objects/pack-format.js';
import { assessDamage, type DamageReport } from '../inspect/damage.js';

/** Packs absent from the listing confirmed with a `stat` at once. */
export const PRESENCE_STAT_CONCURRENCY = 8;

/** Options of {@link checkPackPresence}. */
export interface PresenceOptions {
  /** Epoch ms stamped on what this run finds; default `Date.now()`. */
  readonly now?: number;
}

/** What a presence check found. */
export interface PresenceReport {
  /** Indexed, uncondemned packs compared with the blob store. */
  readonly packs: number;
  /** Packs this run found missing (not known missing before), ascending. */
  readonly found: readonly string[];
  /** Packs known missing that are back in the blob store with their recorded size, ascending. */
  readonly returned: readonly string[];
  /** Every uncondemned pack known missing after this run, ascending. */
  readonly missing: readonly string[];
  /**
   * The damage assessment, when this run needed one (see {@link checkPackPresence}); undefined
   * otherwise.
   */
  readonly damage: DamageReport | undefined;
}

/**
 * Compares the index's packs with the blob store without reading any pack: one `list` of
 * `packs/` (plus a `stat` to confirm each pack the listing lacks, so one odd listing page
 * cannot condemn a pack), then records what it found: absent packs as missing (their objects
 * stop counting as present, so the next checkpoint that has their bytes writes them again),
 * missing packs that are back (same size) as present. When the set of missing packs changed,
 * a reader recorded one or a writer re-pointed objects of one since the last assessment, or a
 * checkpoint's damage mark names a pack no longer missing, it assesses and records which
 * checkpoints lost what ({@link assessDamage}).
 *
 * The index is read before the listing starts: a pack is registered only after its blob is
 * durable, so every pack read here must be in a listing that starts afterwards. Condemned
 * packs are GC's business and are skipped.
 */
export async function checkPackPresence(
  deps: { readonly blobs: BlobStore; readonly meta: MetadataStore },
  options: PresenceOptions = {},
): Promise<PresenceReport> {
  const at = options.now ?? Date.now();
  const packs = (await deps.meta.objects.listPacks()).filter((p) => p.condemnedAt === null);
  const stored = new Map<string, number>();
  for await (const { key, size } of deps.blobs.list('packs/')) {
    const id = packIdFromKey(key);
    if (id !== undefined) stored.set(id, size);
  }
  const absent: string[] = [];
  await forEachLimit(
    packs.filter((p) => p.missingAt === null && !stored.has(p.id)),
    PRESENCE_STAT_CONCURRENCY,
    async (pack) => {
      if ((await deps.blobs.stat(packKey(pack.id))) === undefined) absent.push(pack.id);
    },
  );
  const found = await deps.meta.objects.markPacksMissing(absent, at);
  const returned = packs
    .filter((p) => p.missingAt !== null && stored.get(p.id) === p.size)
    .map((p) => p.id)
    .sort();
  await deps.meta.objects.markPacksPresent(returned);
  const missing = await deps.meta.objects.missingPackIds();
  const unassessed = packs.some((p) => p.missingAt !== null && !returned.includes(p.id) && !((p.damageCheckedAt ?? -1) >= p.missingAt));
  // A mark naming a pack no longer missing (a checkpoint stored that very pack again) is stale.
  const stale = (await deps.meta.checkpoints.listDamaged()).some((c) => c.damage?.packs.some((p) => !missing.includes(p)));
  const damage = found.length > 0 || returned.length > 0 || unassessed || stale ? await assessDamage(deps, at) : undefined;
  return { packs: packs.length, found, returned, missing: await deps.meta.objects.missingPackIds(), damage };
}
