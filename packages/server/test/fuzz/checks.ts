// What every answer of the fuzzer must be: no server error, a 4xx in the one problem shape, and an answer that
// matches what the document says for its status (status documented, content type documented, body valid).
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { DocOperation } from './requests.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export interface Answer {
  status: number;
  contentType: string;
  text: string;
  /** The answer was still streaming when the fuzzer stopped reading it (a followed log). */
  streaming?: boolean;
}

/** `text/plain; charset=utf-8` → `text/plain`. */
const mediaType = (t: string) => t.split(';')[0].trim().toLowerCase();

/**
 * Operations that call a party outside Berth (a model provider, an image registry): a 502 or 504 naming that party
 * is their honest answer when it cannot be reached, never a server error. Every other 5xx fails the run.
 */
export const UPSTREAM_OPERATIONS = new Set(['listConnectionModels', 'pullImage', 'createImage']);

export class AnswerChecker {
  private readonly ajv = addFormats(new Ajv({ strict: false, allErrors: false, validateFormats: true }));
  private readonly compiled = new WeakMap<object, ValidateFunction>();

  private validator(schema: object): ValidateFunction {
    let v = this.compiled.get(schema);
    if (!v) {
      v = this.ajv.compile(schema);
      this.compiled.set(schema, v);
    }
    return v;
  }

  /** What is wrong with the answer, or undefined when nothing is. */
  check(op: DocOperation, a: Answer): string | undefined {
    const exact = op.responses[String(a.status)];
    if (a.status >= 500 && !exact) {
      const upstream = UPSTREAM_OPERATIONS.has(op.operationId) && [502, 504].includes(a.status);
      if (!upstream) return `server error ${a.status}`;
    }
    const documented = exact ?? op.responses[`${String(a.status)[0]}XX`] ?? op.responses.default;
    if (!documented) return `status ${a.status} is not documented (documented: ${Object.keys(op.responses)})`;
    const type = mediaType(a.contentType);
    // An error the document names by its status (a 501 of a route Berth does not offer) is still a problem. A list
    // whose shape follows Blaxel-Version is documented as both shapes (openapi.ts listSchema, decision 019).
    const content: Record<string, any> | undefined =
      documented.content ?? (a.status >= 400 ? op.responses['4XX']?.content : undefined);
    if (!content) return undefined;
    const media = Object.entries(content).find(([t]) => mediaType(t) === type)?.[1];
    if (!media)
      return `content type ${JSON.stringify(type)} is not documented for ${a.status} (documented: ${Object.keys(content)})`;
    if (a.streaming) return undefined;
    if (!/json$/.test(type)) return undefined;
    let body: unknown;
    try {
      body = JSON.parse(a.text);
    } catch {
      return `the ${type} answer is not JSON`;
    }
    const validate = this.validator(media.schema ?? {});
    if (!validate(body))
      return `the answer does not match the documented schema: ${this.ajv.errorsText(validate.errors)}`;
    if (a.status >= 400 && type === 'application/problem+json') {
      const p = body as { code?: number; status?: number };
      if (p.code !== a.status || p.status !== a.status)
        return `the problem says ${p.status}/${p.code}, the answer is ${a.status}`;
    }
    return undefined;
  }
}
