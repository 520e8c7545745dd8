// What a resolver (resolve.ts) lets a request do: be forwarded to a target, through the one pipeline of
// gateway/index.ts (stream cap, activator, proxy or tunnel), or be answered by the gateway itself.
import type { ServerResponse } from 'node:http';
import type { ForwardExtra } from './proxy.js';
import type { Target } from './targets.js';

/** Forwarded: where it goes, the path the instance sees, what the forwarding adds, and what to undo once it is over. */
export interface Forwarded {
  target: Target;
  path: string;
  extra?: ForwardExtra;
  /** Called once the request is over, however it ended (or when it never reached the target). */
  done?: () => void;
}

/** Answered by the gateway itself (a job's trigger starting an execution, an asynchronous invocation's 202). */
export interface Answered {
  answer: (res: ServerResponse) => Promise<void>;
}

export type Admission = Forwarded | Answered;
