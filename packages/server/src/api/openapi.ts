// PLACEHOLDER until the OpenAPI generator lands.
import type { FastifyInstance } from 'fastify';
import type { KindDescriptor } from '../kinds/types.js';
export function registerOpenApi(_v0: FastifyInstance, _kinds: KindDescriptor[]) {}
