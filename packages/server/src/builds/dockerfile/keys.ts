// The key of a build step: its parent's key and what the step is (decision 051). Bumped with the engine's version, so
// a layer an older engine made differently is not taken for the same step.
import { createHash } from 'node:crypto';

const ENGINE_VERSION = '1';

export const keyOf = (parts: string[]) =>
  createHash('sha256')
    .update([ENGINE_VERSION, ...parts].join('\0'))
    .digest('hex');
