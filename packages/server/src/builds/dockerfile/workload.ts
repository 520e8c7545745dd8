// An agent's, function's or job's code built from the Dockerfile at its root instead of the Node/Python detection
// (decision 051), as the service does: the upload is the context, the image is installed in the workspace under
// `berth-builds/app:<build key>`, and replicas and tasks run that image with its own WorkingDir, User and Env, its
// ENTRYPOINT and CMD as the start command (berth.toml's `[entrypoint] prod` wins), no /app bound over it.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { HeldImage } from '../../runtime/images/image-store.js';
import { shq } from '../build-script.js';
import type { BuildOwner } from '../sandbox-step.js';
import type { Manifest } from '../manifest.js';
import { applyDockerignore } from './context.js';
import { buildImage, type ImageBuildDeps } from './engine.js';

export const DOCKERFILE = 'Dockerfile';

/** What replicas run for an app built from a Dockerfile: beside the Node and Python plans (plan.ts). */
export interface DockerfilePlan {
  language: 'dockerfile';
  start: string;
  manifest?: Manifest;
}

/** The workspace's name of the image a build made (a name of the workspace's own: quota, listing, collection). */
export const builtImageName = (key: string) => `berth-builds/app:${key}`;

const PLAIN = /^[A-Za-z0-9_\-./:@%+,=^]+$/;
const commandLine = (words: string[]) => words.map((w) => (PLAIN.test(w) ? w : shq(w))).join(' ');

/** The start command of an image: berth.toml's, else its ENTRYPOINT and CMD as Docker joins them. */
export function startOf(image: HeldImage, manifest: Manifest | undefined): string | undefined {
  if (manifest?.prod) return manifest.prod;
  const words = [...(image.config.entrypoint ?? []), ...(image.config.cmd ?? [])];
  return words.length ? commandLine(words) : undefined;
}

export const hasDockerfile = (src: string) => existsSync(join(src, DOCKERFILE));

/** Builds `src` (an unpacked upload with a Dockerfile) into the workspace's image for build `key`. */
export async function buildWorkloadImage(
  deps: ImageBuildDeps,
  p: { workspace: string; key: string; src: string; log: (text: string) => void; owner: BuildOwner },
  signal: AbortSignal,
): Promise<HeldImage> {
  const dockerfile = readFileSync(join(p.src, DOCKERFILE), 'utf8');
  applyDockerignore(p.src);
  return buildImage(
    deps,
    { workspace: p.workspace, contextDir: p.src, dockerfile, name: builtImageName(p.key), owner: p.owner },
    p.log,
    signal,
  );
}
