import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { derivedKey } from './derived-keys.js';

describe('derived keys', () => {
  const master = Buffer.alloc(32, 7);

  // Servers of one cluster (possibly of two releases during an upgrade) and the check value a database already keeps
  // must keep agreeing: a changed label would split the cluster, so the derivations are pinned.
  it('derives each purpose exactly as every earlier release did', () => {
    assert.equal(
      derivedKey(master, 'peerToken').toString('hex'),
      'ac9cb11b01fd7dbcec6669e60b015cbf77e9061dbb8fc578b5fe7af7af71e52e',
    );
    assert.equal(
      derivedKey(master, 'uploadUrls').toString('hex'),
      'd9efc9c25097660c13c9d8a782b18503ef2ae70f3768e3f03471068620a23b88',
    );
    assert.equal(
      derivedKey(master, 'masterKeyCheck').toString('hex'),
      '98e1353f93bc062efc43ccb998072e1027c16cb4be3b5c8f808fe887f83a0c8e',
    );
  });

  it('gives each purpose its own key, and another master key other keys', () => {
    const other = Buffer.alloc(32, 8);
    const keys = new Set(
      (['peerToken', 'uploadUrls', 'masterKeyCheck'] as const).flatMap((p) => [
        derivedKey(master, p).toString('hex'),
        derivedKey(other, p).toString('hex'),
      ]),
    );
    assert.equal(keys.size, 6);
  });
});
