// The TXT records of a name, asked of the resolvers a setting names (BERTH_DOMAIN_RESOLVERS) or the host's: how a
// custom domain's challenge is read (decision 055). A name with no TXT record (or none at all) has none; a resolver
// that does not answer is an error the caller reports.
import { Resolver } from 'node:dns/promises';

const NOTHING = new Set(['ENODATA', 'ENOTFOUND', 'NXDOMAIN']);

export type TxtLookup = (name: string) => Promise<string[]>;

export function txtLookup(servers: string[] | undefined, timeoutMs = 3_000): TxtLookup {
  return async (name) => {
    const r = new Resolver({ timeout: timeoutMs, tries: 2 });
    if (servers?.length) r.setServers(servers);
    try {
      // A TXT record may come in several strings of 255 bytes at most: they are one value.
      return (await r.resolveTxt(name)).map((chunks) => chunks.join(''));
    } catch (err) {
      if (NOTHING.has((err as NodeJS.ErrnoException).code ?? '')) return [];
      throw err;
    }
  };
}
