import type { Sha256Hex } from '../../core/hash.js';
import type { MetadataStore } from '../../metadata/metadata-store.js';
import type { StoredForm } from '../../objects/content-workers.js';
import type { ObjectWriter } from '../../objects/object-writer.js';
import type { EncodedTree } from './tree-builder.js';

/** New chunk bytes gathered before one batched "which of these are missing?" lookup… */
export const LOOKUP_BATCH_BYTES = 16 * 1024 * 1024;
/**
 * …or this many chunks, whichever comes first. A small file's stored form is a view into the
 * worker's reply for its whole batch, so held tiny chunks kept every reply alive: 100k tiny
 * files under the byte bound alone held about 25 MB of replies (and a Map of 60k entries) until
 * the first lookup. A few lookups more (one indexed `IN` query each) cost far less.
 */
export const LOOKUP_BATCH_OBJECTS = 4096;

type Candidate = { readonly form: StoredForm; readonly rawLength: number } | { readonly raw: Uint8Array };

/**
 * Where a checkpoint's content goes: ids already known to the index are dropped, the rest go
 * to the ObjectWriter. Lookups are batched (by bytes and chunks held), so a checkpoint asks the
 * index a few times, not once per chunk. Calls must not overlap (the checkpoint loop is sequential).
 */
export class ContentSink {
  private readonly present = new Set<Sha256Hex>();
  private readonly candidates = new Map<Sha256Hex, Candidate>();
  private heldBytes = 0;

  constructor(
    private readonly meta: Pick<MetadataStore, 'objects'>,
    private readonly writer: ObjectWriter,
  ) {}

  /** Offers a chunk already digested and compressed by the content workers. */
  async offerStored(id: Sha256Hex, form: StoredForm, rawLength: number): Promise<void> {
    if (this.known(id)) return;
    this.candidates.set(id, { form, rawLength });
    await this.hold(form.bytes.byteLength);
  }

  /** Offers a raw chunk (it is compressed only if the index lacks it). */
  async offerRaw(id: Sha256Hex, raw: Uint8Array): Promise<void> {
    if (this.known(id)) return;
    this.candidates.set(id, { raw });
    await this.hold(raw.byteLength);
  }

  /** Looks up everything held and passes the missing objects to the writer. */
  async flush(): Promise<void> {
    const ids = [...this.candidates.keys()];
    const missing = ids.length === 0 ? new Set<string>() : await this.meta.objects.findMissing(ids);
    for (const id of ids) {
      const c = this.candidates.get(id) as Candidate;
      if (!missing.has(id)) this.present.add(id);
      else if ('form' in c) await this.writer.addStored(id, 'data', c.form, c.rawLength);
      else await this.writer.add(id, 'data', c.raw);
    }
    this.candidates.clear();
    this.heldBytes = 0;
  }

  /** Writes the trees the index lacks (an unchanged directory keeps its id and costs nothing). */
  async addTrees(trees: readonly EncodedTree[]): Promise<void> {
    const unknown = trees.filter((t) => !this.known(t.id));
    const missing = unknown.length === 0 ? new Set<string>() : await this.meta.objects.findMissing(unknown.map((t) => t.id));
    for (const tree of unknown) {
      if (missing.has(tree.id)) await this.writer.add(tree.id, 'tree', tree.bytes);
      else this.present.add(tree.id);
    }
  }

  private known(id: Sha256Hex): boolean {
    return this.present.has(id) || this.candidates.has(id) || this.writer.has(id);
  }

  private async hold(bytes: number): Promise<void> {
    this.heldBytes += bytes;
    if (this.heldBytes >= LOOKUP_BATCH_BYTES || this.candidates.size >= LOOKUP_BATCH_OBJECTS) await this.flush();
  }
}
