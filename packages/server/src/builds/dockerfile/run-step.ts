// One RUN of a Dockerfile build (decision 051): a build sandbox of its own whose root is the stage so far (the image
// with the stage's layers over it), as the stage's user, under the build's network policy; the command runs through
// the sandbox's API daemon like every build step, and what it changed is read back (RuntimeDriver.exportChanges)
// before the sandbox is removed, whatever happened.
import { randomBytes } from 'node:crypto';
import { BACKGROUND_CPU_SHARES, type EgressPolicy, type InstanceOwner } from '../../runtime/driver.js';
import type { Instances } from '../../runtime/instances.js';
import { shq } from '../build-script.js';
import { BUILD_ID_PREFIX, BUILD_MEMORY_MB, BUILD_TIMEOUT_S, stepFailure } from '../sandbox-step.js';
import type { CommandForm } from './parse.js';

/** Plain argv words need no shell; anything else of an exec form is quoted for the image's /bin/sh. */
const PLAIN = /^[A-Za-z0-9_\-./:@%+,=^]+$/;

export interface RunRequest {
  image: string;
  layers: string[];
  user: string;
  /** What the build is for (role `build`, in the build's workspace). */
  owner: InstanceOwner;
  command: CommandForm;
  env: Record<string, string>;
  workingDir: string;
  egress?: EgressPolicy;
  /** The empty directory the changes are copied into. */
  dest: string;
  onOutput: (text: string) => void;
  signal: AbortSignal;
}

export async function runInSandbox(
  deps: { instances: Instances },
  r: RunRequest,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const id = `${BUILD_ID_PREFIX}d${randomBytes(8).toString('hex')}`;
  const command =
    'shell' in r.command
      ? r.command.shell
      : r.command.exec.map((w) => (PLAIN.test(w) ? w : shq(w))).join(' ');
  try {
    const { daemon } = await deps.instances.start({
      id,
      spec: {
        memoryMb: BUILD_MEMORY_MB,
        pidsMax: 1024,
        // Background work, below every serving sandbox (decision 070).
        cpuShares: BACKGROUND_CPU_SHARES,
        diskMb: BUILD_MEMORY_MB,
        envs: {},
        image: r.image,
        layers: r.layers,
        user: r.user,
        volumes: [],
        ...(r.egress ? { egress: r.egress } : {}),
      },
      owner: r.owner,
      signal: r.signal,
    });
    const result = await daemon.exec(
      { command, workingDir: r.workingDir, env: r.env, timeout: BUILD_TIMEOUT_S },
      (_stream, data) => r.onOutput(data),
      r.signal,
    );
    if (result.exitCode !== 0) return { ok: false, reason: stepFailure('the command', result) };
    await deps.instances.driver.exportChanges(id, r.dest);
    return { ok: true };
  } finally {
    await deps.instances.remove(id).catch(() => undefined);
  }
}
