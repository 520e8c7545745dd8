// One step of a build run in a sandbox of its own (never on the host): the install step (dependency-cache.ts) and
// the build step (builder.ts) both go through here. The sandbox is removed before this returns, whatever happened,
// so nothing it started can still write into the directories it had mounted once the server reads them.
import { BACKGROUND_CPU_SHARES, type InstanceOwner, type VolumeMount } from '../runtime/driver.js';
import type { Instances } from '../runtime/instances.js';
import type { ProcessJson } from '../sandbox-api/schema.js';
import { APP_MOUNT, shq } from './build-script.js';

/** Memory of a build sandbox: npm ci and tsc of a mid-size project fit. */
export const BUILD_MEMORY_MB = 2048;
/** A step that runs longer is stopped and the build FAILED (the service bounds builds similarly). */
export const BUILD_TIMEOUT_S = 900;
/** The image builds run on when the spec names none: the host userland. */
export const BUILD_IMAGE = 'blaxel/base-image:latest';
/** Id prefix of build steps' instances (no other owner's ids start so). */
export const BUILD_ID_PREFIX = 'bld-';

export interface StepDeps {
  instances: Instances;
}

/** The object a build is for (kind and name, in the build's workspace): the owner of its steps' instances. */
export interface BuildOwner {
  kind: string;
  name: string;
}

export interface Step {
  /** Instance id (BUILD_ID_PREFIX…; a server started later removes one it finds: builds run again). */
  id: string;
  workspace: string;
  owner: BuildOwner;
  /** Image id, or BUILD_IMAGE. */
  image: string;
  volumes: VolumeMount[];
  /** A shell script, run with /app as working directory. */
  script: string;
  onOutput: (data: string) => void;
  signal: AbortSignal;
}

/**
 * Runs `step.script` to its end in a fresh sandbox; the process as the daemon reported it (exit code, status).
 * Throws when the sandbox could not be removed: what it wrote may still change, so it must not be used.
 */
export async function runStep(deps: StepDeps, step: Step): Promise<ProcessJson> {
  let failure: unknown;
  let result: ProcessJson | undefined;
  try {
    const owner: InstanceOwner = { ...step.owner, workspace: step.workspace, role: 'build' };
    const { daemon } = await deps.instances.start({
      id: step.id,
      spec: {
        memoryMb: BUILD_MEMORY_MB,
        pidsMax: 1024,
        // A build is background work a user waits minutes for; a replica starting beside it is a request someone
        // waits on now (decision 070).
        cpuShares: BACKGROUND_CPU_SHARES,
        diskMb: BUILD_MEMORY_MB,
        envs: { HOME: '/home/user' },
        image: step.image,
        volumes: step.volumes,
      },
      owner,
      signal: step.signal,
    });
    result = await daemon.exec(
      {
        command: `sh -c ${shq(step.script)}`,
        workingDir: APP_MOUNT,
        timeout: BUILD_TIMEOUT_S,
        env: { HOME: '/home/user' },
      },
      (_stream, data) => step.onOutput(data),
      step.signal,
    );
  } catch (err) {
    failure = err;
  }
  try {
    await deps.instances.remove(step.id);
  } catch (err) {
    if (failure === undefined) throw err;
  }
  if (failure !== undefined || !result) throw failure;
  return result;
}

/** Why a step failed, for the log and the FAILED event. */
export const stepFailure = (what: string, r: ProcessJson) =>
  r.status === 'killed'
    ? `${what} stopped after ${BUILD_TIMEOUT_S} s`
    : `${what} exited with code ${r.exitCode}`;
