import type { BlobStore } from '../../blob-store/blob-store.js';
import type { Sha256Hex } from '../../core/hash.js';
import type { TreeEntry } from '../../core/tree.js';
import { isHoldfastError } from '../../errors.js';
import type { CheckpointDamage, MetadataStore } from '../../metadata/metadata-store.js';
import { ObjectReader } from '../../objects/object-reader.js';
import { isDataProblem } from '../reachability.js';

/** Damaged paths kept per checkpoint (and per pack in a report); beyond this only the counts grow. */
export const MAX_DAMAGED_PATHS = 100;

/** A checkpoint that references objects of one missing pack, and where. */
export interface DamagedCheckpoint {
  readonly checkpointId: string;
  readonly workspaceId: string;
  /** The first paths whose object is in the pack (`''` is the root directory), at most {@link MAX_DAMAGED_PATHS}. */
  readonly paths: readonly string[];
  /** Paths in all whose object is in the pack. */
  readonly pathCount: number;
}

/** One pack known missing from the blob store and what it cost. */
export interface PackDamage {
  readonly pack: string;
  /** Object rows still pointing into it (objects no later checkpoint wrote again). */
  readonly objects: number;
  /** Ready checkpoints that reference one of those objects, by workspace, newest first. */
  readonly checkpoints: readonly DamagedCheckpoint[];
}

/** What {@link assessDamage} found and recorded. */
export interface DamageReport {
  /** Every uncondemned pack known missing, ascending by id; a pack with no object left is healed. */
  readonly packs: readonly PackDamage[];
  /** Ready checkpoints marked damaged by this assessment. */
  readonly checkpointsDamaged: number;
  /** Checkpoints whose damage mark was cleared (what they lost was written again, or the pack came back). */
  readonly checkpointsCleared: number;
}

/** What lies under one tree: the first damaged paths with their pack, and how many there are per pack. */
interface TreeDamage {
  readonly findings: ReadonlyArray<{ readonly path: string; readonly pack: string }>;
  readonly counts: ReadonlyMap<string, number>;
}

const WHOLE: TreeDamage = { findings: [], counts: new Map() };

/**
 * Finds which ready checkpoints lost what to the packs known missing, and records it on them
 * (`checkpoints.damage`, see {@link CheckpointDamage}): a checkpoint is damaged when a path
 * in it (a file's chunk, or a directory's tree) names an object whose row still points into a
 * missing pack. Marks that no longer hold are cleared, and every missing pack is stamped as
 * assessed at `at`. Each distinct tree is read once (damage is computed per tree and shared by
 * every checkpoint reaching it); nothing is read when no missing pack holds an object.
 * Trees that cannot be read for another reason (damaged bytes) are left to verify. Store
 * outages reject.
 */
export async function assessDamage(deps: { readonly blobs: BlobStore; readonly meta: MetadataStore }, at: number): Promise<DamageReport> {
  const { meta } = deps;
  const missing = await meta.objects.missingPackIds();
  const lostIn = new Map<string, string>();
  const rows = new Map<string, number>(missing.map((p) => [p, 0]));
  for (const o of await meta.objects.objectsInPacks(missing)) {
    lostIn.set(o.id, o.packId);
    rows.set(o.packId, (rows.get(o.packId) ?? 0) + 1);
  }
  const checkpoints = await meta.checkpoints.listAll({ status: 'ready' });
  const reader = new ObjectReader(deps.blobs, meta);
  const memo = new Map<Sha256Hex, TreeDamage>();
  const damageOf = async (tree: Sha256Hex): Promise<TreeDamage> => {
    const known = memo.get(tree);
    if (known !== undefined) return known;
    const found = await treeDamage(reader, tree, lostIn, damageOf);
    memo.set(tree, found);
    return found;
  };

  const byPack = new Map<string, DamagedCheckpoint[]>(missing.map((p) => [p, []]));
  let checkpointsDamaged = 0;
  let checkpointsCleared = 0;
  for (const checkpoint of checkpoints) {
    const damage = lostIn.size === 0 || checkpoint.rootTree === null ? WHOLE : await damageOf(checkpoint.rootTree);
    if (damage.counts.size === 0) {
      if (checkpoint.damage !== null) {
        await meta.checkpoints.setDamage(checkpoint.id, null);
        checkpointsCleared += 1;
      }
      continue;
    }
    const packs = [...damage.counts.keys()].sort();
    for (const pack of packs) {
      const paths = damage.findings.filter((f) => f.pack === pack).map((f) => f.path);
      const entry = { checkpointId: checkpoint.id, workspaceId: checkpoint.workspaceId, paths, pathCount: damage.counts.get(pack) ?? 0 };
      const list = byPack.get(pack);
      if (list === undefined) byPack.set(pack, [entry]);
      else list.push(entry);
    }
    const paths = [...new Set(damage.findings.map((f) => f.path))];
    const pathCount = [...damage.counts.values()].reduce((n, c) => n + c, 0);
    await meta.checkpoints.setDamage(checkpoint.id, { packs, paths, pathCount: Math.max(pathCount, paths.length), assessedAt: at });
    checkpointsDamaged += 1;
  }
  await meta.objects.markDamageChecked(missing, at);
  const packs = [...byPack.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([pack, list]) => ({ pack, objects: rows.get(pack) ?? 0, checkpoints: list }));
  return { packs, checkpointsDamaged, checkpointsCleared };
}

/** The damage under tree `tree`: the tree itself lost, or what its files and subtrees lost. */
async function treeDamage(
  reader: ObjectReader,
  tree: Sha256Hex,
  lostIn: ReadonlyMap<string, string>,
  damageOf: (tree: Sha256Hex) => Promise<TreeDamage>,
): Promise<TreeDamage> {
  const own = lostIn.get(tree);
  if (own !== undefined) return { findings: [{ path: '', pack: own }], counts: new Map([[own, 1]]) };
  let entries: TreeEntry[];
  try {
    entries = await reader.readTree(tree);
  } catch (error) {
    if (!isDataProblem(error)) throw error;
    // A pack found missing only now (the reader recorded it): the tree is lost with it.
    const pack = isHoldfastError(error, 'RESTORE_INCOMPLETE') ? (error.data as { pack?: unknown }).pack : undefined;
    return typeof pack === 'string' ? { findings: [{ path: '', pack }], counts: new Map([[pack, 1]]) } : WHOLE;
  }
  const findings: Array<{ path: string; pack: string }> = [];
  const counts = new Map<string, number>();
  const add = (path: string, pack: string, n: number): void => {
    counts.set(pack, (counts.get(pack) ?? 0) + n);
    if (findings.length < MAX_DAMAGED_PATHS) findings.push({ path, pack });
  };
  for (const entry of entries) {
    if (entry.type === 'file') {
      const packs = new Set<string>();
      for (const chunk of entry.chunks) {
        const pack = lostIn.get(chunk);
        if (pack !== undefined) packs.add(pack);
      }
      for (const pack of packs) add(entry.name, pack, 1);
    } else if (entry.type === 'dir') {
      const sub = await damageOf(entry.tree);
      for (const [pack, n] of sub.counts) counts.set(pack, (counts.get(pack) ?? 0) + n);
      for (const f of sub.findings) {
        if (findings.length >= MAX_DAMAGED_PATHS) break;
        findings.push({ path: f.path === '' ? entry.name : `${entry.name}/${f.path}`, pack: f.pack });
      }
    }
  }
  return counts.size === 0 ? WHOLE : { findings, counts };
}
