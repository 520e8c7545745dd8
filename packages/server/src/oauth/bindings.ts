// What an agent's or function's OAuth2 connections give its replicas (decision 049): each connection's token
// directory mounted read-only at /run/connections/<name>/ (the file `access_token` always holds a fresh token), and,
// for a connection naming its provider's API hosts, an egress rule that puts `Authorization: Bearer` on every request
// to them outside the sandbox. The refresh token and the client secret never enter a replica.
import { join } from 'node:path';
import { integrationConnection as connectionKind } from '../kinds/integration-connection.js';
import { oauth2Config } from '../kinds/oauth2.js';
import type { EgressPolicy, VolumeMount } from '../runtime/driver.js';
import type { RoutingRule } from '../runtime/egress/policy.js';
import type { Resources } from '../store/resources.js';
import type { ConnectionTokens } from './connection-tokens.js';
import { ACCESS_TOKEN_FILE } from './token-files.js';

/** Where a replica finds its connections' tokens: `<root>/<connection>/access_token`. */
export const CONNECTION_MOUNT_ROOT = '/run/connections';

export const tokenFilePath = (connection: string) =>
  `${CONNECTION_MOUNT_ROOT}/${connection}/${ACCESS_TOKEN_FILE}`;

export interface OAuthBindings {
  /** The OAuth2 connections among the workload's, by name. */
  connections: string[];
  volumes: VolumeMount[];
  /** The replicas' egress policy when a connection names API hosts; undefined otherwise (no policy at all). */
  egress?: EgressPolicy;
}

/**
 * The bindings of `names` (a workload's spec.integrationConnections) for holder `holder` (its workload key). Each
 * OAuth2 connection is held (a token obtained now and kept fresh): throws ConnectionTokenFailed when the provider
 * refused one. Connections that do not exist are left to the caller, which reports them.
 */
export async function oauthBindings(
  resources: Resources,
  tokens: ConnectionTokens,
  workspace: string,
  holder: string,
  names: string[] | undefined,
): Promise<OAuthBindings> {
  const out: OAuthBindings = { connections: [], volumes: [] };
  const routing: RoutingRule[] = [];
  for (const name of names ?? []) {
    const o = await resources.get(connectionKind, workspace, [], name);
    const cfg = o && oauth2Config(o.body.spec ?? {});
    if (!cfg) continue;
    out.connections.push(name);
    const dir = tokens.dirOf(workspace, name);
    out.volumes.push({ hostPath: dir, mountPath: `${CONNECTION_MOUNT_ROOT}/${name}`, readOnly: true });
    if (cfg.apiDomains.length)
      routing.push({
        destinations: cfg.apiDomains,
        bearerFile: { path: join(dir, ACCESS_TOKEN_FILE), id: `${workspace}/${name}` },
      });
  }
  await tokens.hold(holder, workspace, out.connections);
  if (routing.length)
    out.egress = {
      // Nothing is narrowed: the policy exists for its routing rules. Every name stays reachable, and raw TCP keeps
      // going where it went (port 25 and what the host closes to every sandbox excepted).
      allowedDomains: [],
      forbiddenDomains: [],
      routing,
      rawCidrs: ['0.0.0.0/0'],
    };
  return out;
}
