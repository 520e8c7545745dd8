// PLACEHOLDER until the templates catalog lands.
import type { FastifyInstance } from 'fastify';
export function registerTemplates(_v0: FastifyInstance) {}
