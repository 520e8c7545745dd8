// The server's version, from its package.json: `GET /healthz` reports it so `berth status` and
// `berth --version` can say which server they talk to.
import { readFileSync } from 'node:fs';

/** Read once: src/api/ and dist/api/ both sit two folders below the package's package.json. */
export const SERVER_VERSION: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();
