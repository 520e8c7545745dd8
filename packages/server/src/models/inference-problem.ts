// Errors on the inference surface. They are the same problem+json documents as on /v0, except that
// `error` is an object `{message, type, code}`: the openai client reads only `body.error` (and would show
// a bare code otherwise), the Anthropic client reads `body.message` and `body.error.message`, and the
// service's SDK reads the numeric `code`; this one shape serves all three.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiError } from '../errors.js';
import { wireErrorOf } from '../http/wire-error.js';

export function inferenceProblem(e: ApiError, instance?: string) {
  return {
    ...e.toProblem(instance),
    error: { message: e.detail, type: e.error, code: e.error, param: null },
  };
}

export function inferenceErrorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  // The client went away while the provider was being asked: nobody is left to answer.
  if (reply.raw.destroyed || err.name === 'AbortError' || err.code === 'UND_ERR_ABORTED') return;
  const e = wireErrorOf(err, { log: req.log, what: 'unhandled error in the model gateway' });
  reply
    .code(e.status)
    .headers(e.headers)
    .type('application/problem+json')
    .send(inferenceProblem(e, req.url.split('?')[0]));
}
