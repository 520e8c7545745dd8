// Where builds keep what belongs to a workspace: one directory per workspace, `<dataDir>/builds/workspaces/<ws>`,
// holding its uploaded sources (code/), built apps (apps/), build logs (logs/) and sealed dependency cache (deps/).
// Every lookup names the workspace, so no key or digest of one workspace reaches another's files, and deleting a
// workspace deletes the one directory (decision 036).
import { join } from 'node:path';
import { NAME_PATTERN } from '../kinds/common.js';

/** A workspace name is a DNS label: never `..`, `/` or the global `_`. */
const WORKSPACE_NAME = new RegExp(NAME_PATTERN);

export const workspacesRoot = (dataDir: string) => join(dataDir, 'builds', 'workspaces');

/** The build directory of a workspace; throws on a name that is not a workspace's (it would escape the root). */
export function workspaceBuildsDir(dataDir: string, workspace: string): string {
  if (!WORKSPACE_NAME.test(workspace)) throw new Error(`not a workspace name: ${JSON.stringify(workspace)}`);
  return join(workspacesRoot(dataDir), workspace);
}

/** Where a workspace's built apps are: `<key>/` (the app directory) and `<key>.json` (its plan) for each. */
export const appsDirOf = (dataDir: string, workspace: string) =>
  join(workspaceBuildsDir(dataDir, workspace), 'apps');
