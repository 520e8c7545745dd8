// Every server of a cluster must seal and open secrets with the same master key: one with another key would store
// secrets the others cannot open, and fail on theirs. The shared database keeps a check value of the key (an HMAC,
// from which the key cannot be recovered); a server whose key gives another value refuses to start.
import { timingSafeEqual } from 'node:crypto';
import { derivedKey } from '../crypto/derived-keys.js';
import { type ResourceKey, type Store, StoreError } from './store.js';

/** In the global pseudo-workspace `_`, which no workspace can be called. */
const CHECK_KEY: ResourceKey = { kind: 'MasterKeyCheck', workspace: '_', parent: '', name: 'master' };

const checkOf = (key: Buffer) => derivedKey(key, 'masterKeyCheck').toString('base64');

export async function agreeOnMasterKey(store: Store, key: Buffer): Promise<void> {
  const mine = checkOf(key);
  let stored = await store.get(CHECK_KEY);
  if (!stored) {
    try {
      await store.write([{ op: 'create', key: CHECK_KEY, body: { check: mine } }]);
      return;
    } catch (e) {
      if (!(e instanceof StoreError && e.reason === 'exists')) throw e;
      stored = await store.get(CHECK_KEY);
    }
  }
  const theirs = Buffer.from(String(stored?.body.check), 'base64');
  if (theirs.length !== 32 || !timingSafeEqual(theirs, Buffer.from(mine, 'base64')))
    throw new Error(
      "this server's master key is not the one the database's secrets are sealed with: give every server of the cluster the same BERTH_MASTER_KEY (docs/cluster.md)",
    );
}
