// Secrets at rest: AES-256-GCM with a 32-byte master key, each value with its own random IV.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const PREFIX = 'enc:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('master key must be 32 bytes');
  }

  static isSealed(v: string) {
    return v.startsWith(PREFIX);
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return PREFIX + Buffer.concat([iv, c.getAuthTag(), body]).toString('base64');
  }

  open(sealed: string): string {
    if (!SecretBox.isSealed(sealed)) return sealed;
    const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64');
    const d = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
    d.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([d.update(raw.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
  }
}
