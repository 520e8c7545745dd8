// GET /watch (watch.ts) and GET /caller (caller.ts), the console's two routes, described for the OpenAPI document.
import { Type } from '@sinclair/typebox';
import type { ExtraPaths } from './openapi-extra.js';

export const WATCH_PATHS: ExtraPaths = {
  '/caller': {
    get: {
      tag: 'Caller',
      operationId: 'getCaller',
      summary: 'Who the credential is, and its role in the workspace the request acts in',
      response: Type.Object(
        {
          subject: Type.String({ description: 'client ID of a service account, or a user subject' }),
          subjectType: Type.Union([Type.Literal('service_account'), Type.Literal('user')]),
          homeWorkspace: Type.String(),
          workspace: Type.String({ description: 'the workspace the request acts in' }),
          role: Type.Union([Type.Literal('admin'), Type.Literal('member'), Type.Literal('viewer')]),
        },
        { $id: 'Caller' },
      ),
    },
  },
  '/watch': {
    get: {
      tag: 'Watch',
      operationId: 'watchObjects',
      summary:
        "The workspace's objects, then (with follow) every change to them, as Server-Sent Events: `ADDED`, `MODIFIED`, `DELETED` with data `{kind, parent, object}` (the object as GET shows it), and `SYNCED` once the initial objects are sent",
      query: {
        kinds: Type.String({
          description:
            'kinds to watch by plural, comma-separated (e.g. `sandboxes,agents`); default every kind',
        }),
        follow: Type.Boolean({ description: 'stay open and send each change as it is written' }),
        initial: Type.Boolean({
          description: 'send the objects as they are now first (default true; at most 1000 of each kind)',
        }),
      },
      response: Type.String(),
      responseType: 'text/event-stream',
    },
  },
};
