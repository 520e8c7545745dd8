// Types of server.mjs for the tests that run it (test/oauth/).
import type { Server } from 'node:http';

export interface Settings {
  port: number;
  host: string;
  berthUrl: string;
  berthKey?: string;
  workspace?: string;
  authUrl?: string;
  tokenUrl?: string;
  clientId?: string;
  clientSecret?: string;
  redirectUri: string;
  scopes: string;
  accessType: string;
  extraAuthParams: string;
  integration: string;
  mailApiBase: string;
  mcpSource: string;
  mcpMemoryMb: number;
}

export function settings(env?: Record<string, string | undefined>): Settings;
export const EXPLAIN: Record<
  'invalid_scope' | 'redirect_uri_mismatch' | 'no_refresh_token' | 'refresh_failed' | 'access_denied',
  string
>;
export function explain(error: string, description?: string): string;
export function nameFor(user: string): string;
export function startBackend(s?: Settings): {
  server: Server;
  connected: Map<string, unknown>;
  listen(): Promise<number>;
  close(): Promise<void>;
};
