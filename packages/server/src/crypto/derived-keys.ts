// Keys derived from the master key, one per purpose, so that a value made for one purpose (a peer token, an upload
// URL's signature, the check the database keeps of the key) means nothing for another, and no purpose needs a key
// of its own to be shared across a cluster. Each is HMAC-SHA256(master key, label). The labels are part of the
// cluster's wire and stored state (servers of one cluster and the database's check value must agree on them):
// never change one; add a purpose with a new label.
import { createHmac } from 'node:crypto';

const LABELS = {
  /** The token servers show each other on their peer routes (peer-token.ts). */
  peerToken: 'berth peer: code copies',
  /** The signing key of code upload URLs (api/code-upload.ts). */
  uploadUrls: 'berth upload urls',
  /** The check value of the master key kept in the database (store/master-key-check.ts). */
  masterKeyCheck: 'berth master key check',
} as const;

export type KeyPurpose = keyof typeof LABELS;

/** The 32-byte key of `purpose`. */
export function derivedKey(masterKey: Buffer, purpose: KeyPurpose): Buffer {
  return createHmac('sha256', masterKey).update(LABELS[purpose]).digest();
}
