// The record of the image names each workspace let go of, in the store (docs/decisions/087-images-ahead.md): in a
// cluster the database, so that a node which returns and leads while no other is up learns the deletes made while it
// was away (images-ahead.ts `GoneRecord`). One object per workspace, removed with its workspace.
import { EVERY_WORKSPACE, type Store } from '../../store/store.js';
import type { ImageCatalog } from './image-store.js';
import type { GoneRecord } from './images-ahead.js';

/** The kind of the store's objects that record a workspace's names let go of (one per workspace). */
export const IMAGE_NAMES_GONE_KIND = 'ImageNamesGone';

const goneKey = (workspace: string) => ({
  kind: IMAGE_NAMES_GONE_KIND,
  workspace,
  parent: '',
  name: 'images',
});

/** The record of names let go of in the store: read by any server, written only by the leader (its fenced store). */
export function goneRecordOf(store: Store, led: Store): GoneRecord {
  return {
    async read() {
      const out: ImageCatalog['gone'] = {};
      for (const o of await store.list({ workspace: EVERY_WORKSPACE, kind: IMAGE_NAMES_GONE_KIND }))
        out[o.workspace] = o.body.gone ?? {};
      return out;
    },
    async write(workspace, gone) {
      const key = goneKey(workspace);
      const cur = await store.get(key);
      if (!Object.keys(gone).length) {
        if (cur) await led.write([{ op: 'delete', key, expectVersion: cur.resourceVersion }]);
        return;
      }
      await led.write([
        cur
          ? { op: 'update', key, body: { gone }, expectVersion: cur.resourceVersion }
          : { op: 'create', key, body: { gone } },
      ]);
    },
  };
}
