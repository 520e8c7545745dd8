// From a Sandbox object's spec to what the runtime driver runs. The only place secret envs are opened.
import { SANDBOX_MEMORY_MB } from '../kinds/sandbox.js';
import { defaultCpuShares, type SandboxSpec } from '../runtime/driver.js';
import type { Resources } from '../store/resources.js';

/** The image a spec without one runs: the runtime maps any image it has not installed to the host userland. */
export const DEFAULT_SANDBOX_IMAGE = 'blaxel/base-image:latest';
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
