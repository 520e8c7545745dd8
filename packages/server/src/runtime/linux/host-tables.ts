// Berth's two shared nftables tables as one pass of the host sweep reads them (host-sweep.ts, decision 062).
import { run } from './exec.js';
import { slotOfAddress } from './network.js';

/** The sets and maps whose elements are keyed by a sandbox's address (its teardown empties them). */
export const KEYED: Array<[string, string]> = [
  ['berth_egress', 'policed'],
  ['berth_egress', 'owners'],
  ['berth_egress', 'raw_allowed'],
  ['berth_egress', 'snat_to'],
  ['berth_private', 'allowed'],
];

/** Berth's two shared tables as one pass reads them (two `nft` runs, not one per set and slot). */
export class Tables {
  /** `table/set` → the first address of each element. */
  readonly keys = new Map<string, string[]>();
  readonly chains: string[] = [];
  /** Chains an `owners` element jumps to. */
  readonly jumped = new Set<string>();

  static async read(): Promise<Tables> {
    const t = new Tables();
    for (const table of ['berth_egress', 'berth_private']) {
      let items: any[] = [];
      try {
        items = JSON.parse(await run('nft', ['-j', 'list', 'table', 'inet', table])).nftables ?? [];
      } catch {
        continue; // not made yet on this host
      }
      for (const x of items) {
        if (x.chain?.name) t.chains.push(x.chain.name);
        const set = x.set ?? x.map;
        if (!set?.name) continue;
        const elems: any[] = set.elem ?? [];
        t.keys.set(
          `${table}/${set.name}`,
          elems.map((e) => {
            const key = e?.elem?.val ?? e;
            const k = Array.isArray(key) ? key[0] : key;
            return Array.isArray(k?.concat) ? k.concat[0] : k;
          }),
        );
        if (set.name === 'owners')
          for (const e of elems) if (Array.isArray(e) && e[1]?.jump?.target) t.jumped.add(e[1].jump.target);
      }
    }
    return t;
  }

  /** The elements keyed by `address`. */
  count(address: string): number {
    return KEYED.reduce(
      (n, [t, s]) => n + (this.keys.get(`${t}/${s}`) ?? []).filter((k) => k === address).length,
      0,
    );
  }

  /** Slots whose sandbox address keys an element. */
  slots(): Set<number> {
    const out = new Set<number>();
    for (const [t, s] of KEYED)
      for (const k of this.keys.get(`${t}/${s}`) ?? []) {
        const slot = slotOfAddress(k);
        if (slot !== undefined) out.add(slot);
      }
    return out;
  }
}
