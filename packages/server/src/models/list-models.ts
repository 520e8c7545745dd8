// The models a provider offers, asked of the provider with the connection's credential and reduced to
// one shape: `[{id, displayName?, ownedBy?, createdAt?}]`.
import { type Agent, request } from 'undici';
import { ApiError } from '../errors.js';
import type { Opened } from './connections.js';
import { MAX_ERROR_BODY, providerError, transportError } from './provider-errors.js';

/** A model list is a small, quick call; a provider that takes longer is reported as slow. */
export const LIST_TIMEOUT_MS = 15_000;

export interface ProviderModel {
  id: string;
  displayName?: string;
  ownedBy?: string;
  createdAt?: string;
}

const iso = (v: unknown) =>
  typeof v === 'number' ? new Date(v * 1000).toISOString() : typeof v === 'string' ? v : undefined;

function normalize(body: any): ProviderModel[] {
  // OpenAI & Anthropic: {data: [...]}; Gemini: {models: [{name: "models/x"}]}; Cohere: {models: [{name}]}.
  const items: any[] = Array.isArray(body?.data) ? body.data : Array.isArray(body?.models) ? body.models : [];
  return items
    .map((m) => ({
      id: String(m.id ?? m.name ?? '').replace(/^models\//, ''),
      displayName: m.display_name ?? m.displayName,
      ownedBy: m.owned_by,
      createdAt: iso(m.created_at ?? m.created),
    }))
    .filter((m) => m.id);
}

export async function listProviderModels(
  opened: Opened & { ok: true },
  agent: Agent,
): Promise<ProviderModel[]> {
  const { provider, connection } = opened;
  if (!provider.modelsPath)
    throw new ApiError('VALIDATION_FAILED', `${connection.integration} connections offer no model list`, {
      errors: [{ pointer: '/spec/integration', message: 'this provider has no model list endpoint' }],
    });
  const url = provider.url(connection, provider.modelsPath, '');
  let res: Awaited<ReturnType<typeof request>>;
  try {
    res = await request(url, {
      method: 'GET',
      headers: { accept: 'application/json', ...provider.credentialHeaders(connection) },
      dispatcher: agent,
      headersTimeout: LIST_TIMEOUT_MS,
      bodyTimeout: LIST_TIMEOUT_MS,
    });
  } catch (err) {
    throw transportError(connection.name, err);
  }
  const text = (await res.body.text()).slice(0, res.statusCode >= 400 ? MAX_ERROR_BODY : undefined);
  if (res.statusCode >= 400)
    throw providerError(connection.name, res.statusCode, text, res.headers, connection.secretValues);
  try {
    return normalize(JSON.parse(text));
  } catch {
    throw new ApiError(
      'BAD_GATEWAY',
      `the provider of integration connection ${connection.name} answered a model list that is not JSON`,
    );
  }
}
