// PLACEHOLDER until the controller framework lands.
import type { Logger } from 'pino';
import type { Resources } from '../store/resources.js';
export function startControllers(_deps: { resources: Resources; logger: Logger }) {
  return { async stop() {} };
}
