// The master key for secrets at rest: BERTH_MASTER_KEY (base64 or hex of 32 bytes), else
// `<dataDir>/master.key`, created once with mode 0600.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';

function decode(s: string): Buffer {
  const t = s.trim();
  const b = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (b.length !== 32) throw new Error('the master key must be 32 bytes, as 64 hex digits or base64');
  return b;
}

export function loadMasterKey(config: Pick<Config, 'masterKey' | 'dataDir'>): Buffer {
  if (config.masterKey) return decode(config.masterKey);
  const file = join(config.dataDir, 'master.key');
  if (existsSync(file)) return decode(readFileSync(file, 'utf8'));
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}
