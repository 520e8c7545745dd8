// The provider registry: one adapter per provider type of DESIGN.md §4.
import { anthropic } from './anthropic.js';
import { azureOpenai } from './azure.js';
import { cohere } from './cohere.js';
import { gemini } from './gemini.js';
import { deepseek, groq, mistral, openai, openaiCompatible, xai } from './openai.js';
import type { Provider } from './types.js';

export type { ChatRoute, Connection, Provider, Wire } from './types.js';

const ALL: Provider[] = [
  openai,
  anthropic,
  mistral,
  gemini,
  cohere,
  xai,
  deepseek,
  groq,
  azureOpenai,
  openaiCompatible,
];
const BY_TYPE = new Map(ALL.map((p) => [p.type, p]));

/** The adapter of a provider type or integration; undefined for integrations that are not LLM providers. */
export const providerFor = (type: string | undefined): Provider | undefined =>
  type ? BY_TYPE.get(type) : undefined;
