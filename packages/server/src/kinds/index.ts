// The kinds registry: every resource kind of the specification as a descriptor.
import { policy } from './policy.js';
import type { KindDescriptor } from './types.js';

export const KINDS: KindDescriptor[] = [policy];

export function kindByName(name: string): KindDescriptor | undefined {
  const n = name.toLowerCase();
  return KINDS.find((k) => k.kind.toLowerCase() === n || k.plural === n || k.aliases?.includes(n));
}
