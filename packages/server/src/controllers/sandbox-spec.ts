// From a Sandbox object's spec to what the runtime driver runs. The only place secret envs are opened.
import { DEFAULT_SANDBOX_IMAGE, SANDBOX_MEMORY_MB } from '../kinds/sandbox.js';
import { defaultCpuShares, type SandboxSpec } from '../runtime/driver.js';
import type { Resources } from '../store/resources.js';

/** The image a spec without one runs: the runtime maps any image it has not installed to the host userland. */
export { DEFAULT_SANDBOX_IMAGE };
/**
 * Tasks (threads count) per sandbox: room for a dev server, a language server and a test runner at once,
 * while a fork bomb stays contained.
 */
export const SANDBOX_PIDS_MAX = 2048;

/**
 * The writable layer's cap equals the memory size: the layer is a tmpfs charged to the sandbox's memory
 * cgroup, so files count toward memory anyway; a larger cap would only turn "disk full" into an OOM kill.
 */
export const diskMbFor = (memoryMb: number) => memoryMb;

export function runtimeSpecOf(resources: Resources, spec: any): SandboxSpec {
  const open = resources.openSecrets(resources.kind('Sandbox'), spec ?? {});
  const memoryMb: number = open.runtime?.memory ?? SANDBOX_MEMORY_MB;
  const envs: Record<string, string> = {};
  for (const e of open.runtime?.envs ?? []) envs[e.name] = e.value ?? '';
  return {
    memoryMb,
    pidsMax: SANDBOX_PIDS_MAX,
    cpuShares: defaultCpuShares(memoryMb),
    diskMb: diskMbFor(memoryMb),
    envs,
    image: open.runtime?.image ?? DEFAULT_SANDBOX_IMAGE,
    // Filled by the controller once it holds them (volume-attach.ts): never started without them.
    volumes: [],
  };
}

/**
 * What a spec asks that this runtime does not do, in one sentence for the sandbox's events (undefined when
 * nothing): the service's kernel variants (`extraArgs`), snapshots, and a stop grace period.
 */
export function unappliedRuntimeFields(spec: any): string | undefined {
  const rt = spec?.runtime ?? {};
  const out: string[] = [];
  const args = Object.entries((rt.extraArgs ?? {}) as Record<string, string>);
  if (args.length)
    out.push(
      `runtime.extraArgs ${args.map(([k, v]) => `${k}=${v}`).join(', ')} (sandboxes here share the host kernel: there are no kernel variants, and a sandbox cannot change its own firewall)`,
    );
  if (rt.snapshotEnabled) out.push('runtime.snapshotEnabled (this server has no snapshots)');
  if (rt.terminationGracePeriodSeconds)
    out.push('runtime.terminationGracePeriodSeconds (a stopped sandbox is killed at once)');
  return out.length ? `not applied: ${out.join('; ')}` : undefined;
}
