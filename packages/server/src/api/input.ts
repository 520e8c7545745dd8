// Request-body checks for the identity routes: the same rules as envelope kinds (unknown fields dropped
// and named in a Warning header, everything else validated by TypeBox, 422 with JSON pointers).
import type { TObject } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { warnDropped } from './crud.js';
import { invalid } from '../errors.js';
import { checkValue, prune } from '../kinds/schema.js';

export function checkInput<T>(schema: TObject, raw: unknown, reply: FastifyReply, emptyOk = false): T {
  if (raw === undefined && emptyOk) return {} as T;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw invalid([{ pointer: '', message: 'must be a JSON object' }]);
  const body = structuredClone(raw) as Record<string, unknown>;
  const dropped = prune(schema, body);
  const issues = checkValue(schema, body);
  if (issues.length) throw invalid(issues);
  warnDropped(reply, dropped);
  return body as T;
}
