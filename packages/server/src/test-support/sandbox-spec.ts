// The small sandbox spec tests start (or hand a fake runtime): limits well under a real sandbox's defaults.
import type { SandboxSpec } from '../runtime/driver.js';

export const smallSandboxSpec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({
  memoryMb: 256,
  pidsMax: 64,
  cpuShares: 128,
  diskMb: 64,
  envs: {},
  image: '',
  volumes: [],
  ...over,
});
