// Request-scoped facts the hooks attach, typed once for every route module.
import type { Access } from './access.js';

declare module 'fastify' {
  interface FastifyRequest {
    access: Access | null;
  }
}
