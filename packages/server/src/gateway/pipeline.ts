// The gateway's one pipeline, in its order: a parsed address (parse-address.ts) → its kind's resolver (resolve.ts:
// the credential or preview token, and the target, or an answer of the gateway's own) → stream cap (streams.ts) →
// activator (hold, wake) → proxy, tunnel, or the drive mount routes. Every address form goes this way.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { ApiError } from '../errors.js';
import { rejectUpgrade, sendProblem } from '../http/problem.js';
import { wireErrorOf } from '../http/wire-error.js';
import type { ResourceKey } from '../store/store.js';
import type { Activator } from './activator.js';
import type { Admission, Forwarded } from './admission.js';
import { type DriveMounts, isDriveMountPath } from './drive-mounts.js';
import type { Address } from './parse-address.js';
import { matchPort } from './ports.js';
import { daemonUnreachable, type ForwardExtra, forward } from './proxy.js';
import { type ResolveDeps, resolveAddress } from './resolve.js';
import { isLongLived, type StreamCap } from './streams.js';
import type { Target } from './targets.js';
import { tunnel } from './upgrade.js';

export interface PipelineDeps {
  activator: Activator;
  streams: StreamCap<Target>;
  driveMounts: DriveMounts;
  resolve: ResolveDeps;
  logger: Logger;
  /** Told when a sandbox's daemon cannot be reached (its controller looks at once). */
  onSandboxDown?: (key: ResourceKey) => void;
}

export class Pipeline {
  private readonly tunnels = new Set<Duplex>();
  private closing = false;

  constructor(private readonly deps: PipelineDeps) {}

  /** One request to the data plane, from its parsed address to its answer. */
  serve(req: IncomingMessage, res: ServerResponse, a: Address): Promise<void> {
    return this.pass(
      req,
      res,
      this.closing ? Promise.reject(shuttingDown()) : resolveAddress(a, req, this.deps.resolve),
    );
  }

  /** The pipeline after the resolver: the gateway's own answer, or the target entered and the request forwarded. */
  async pass(req: IncomingMessage, res: ServerResponse, admitted: Promise<Admission>): Promise<void> {
    try {
      const a = await admitted;
      if ('answer' in a) return await a.answer(res);
      let done: () => void;
      try {
        done = await this.enter(req, a, false);
      } catch (err) {
        if (a.extra?.wakeFailed?.(err as Error, res)) return;
        throw err;
      }
      if (!isDriveMountPath(a.path)) return forward(a.target, req, res, a.path, done, this.reportingDown(a));
      try {
        await this.deps.driveMounts.serve(a.target, a.path, req, res);
      } finally {
        done();
      }
    } catch (err) {
      sendProblem(res, this.toWire(err), req.url?.split('?')[0]);
    }
  }

  /** An upgrade (a WebSocket) to the address: tunnelled byte for byte once the target is entered. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, a: Address): void {
    (async () => {
      if (this.closing) throw shuttingDown();
      const f = await resolveAddress(a, req, this.deps.resolve);
      if ('answer' in f) throw new ApiError('NOT_FOUND', `no route for ${req.url}`);
      const done = await this.enter(req, f, true);
      tunnel(f.target, req, socket, head, f.path, this.tunnels, done, f.extra);
    })().catch((err) => rejectUpgrade(socket, this.toWire(err), req.url?.split('?')[0]));
  }

  /** Refuses what arrives from now on and cuts the tunnels open. */
  close(): void {
    this.closing = true;
    for (const s of this.tunnels) s.destroy();
  }

  /**
   * Lets a forwarded request in: a stream slot when it can last, then counted in by the activator (waiting while
   * the target wakes). The function returned undoes the counting (and the resolver's own) once the request is over.
   */
  private async enter(req: IncomingMessage, f: Forwarded, upgrade: boolean): Promise<() => void> {
    const t = f.target;
    const { activator, streams } = this.deps;
    const release = isLongLived(req.method, f.path, upgrade) ? streams.acquire(t, t.key.name) : undefined;
    try {
      const wait = activator.enter(t);
      if (wait) await wait;
    } catch (err) {
      release?.();
      f.done?.();
      throw err;
    }
    return () => {
      activator.leave(t);
      release?.();
      f.done?.();
    };
  }

  /** A call to a sandbox's daemon (not to one of its ports) that finds no one listening reports the sandbox. */
  private reportingDown(f: Forwarded): ForwardExtra {
    const extra = f.extra ?? {};
    const down = this.deps.onSandboxDown;
    if (!down || f.target.key.kind !== 'Sandbox' || matchPort(f.path)) return extra;
    const t = f.target;
    return {
      ...extra,
      onUnreachable: (err, sent) => {
        down(t.key);
        return extra.onUnreachable?.(err, sent);
      },
      // Nothing of the request left: the store may already say why the daemon is gone (FAILED, being deleted).
      retry:
        extra.retry ??
        ((err, res) => {
          down(t.key);
          this.deps.resolve.targets
            .whyDown(t.key.workspace, t.key.name)
            .then(
              (why) => why ?? extra.onUnreachable?.(err, false) ?? daemonUnreachable(t, err),
              () => daemonUnreachable(t, err),
            )
            .then((answer) => sendProblem(res, answer));
          return true;
        }),
    };
  }

  private toWire(err: unknown) {
    return wireErrorOf(err, { log: this.deps.logger, what: 'gateway error' });
  }
}

const shuttingDown = () => new ApiError('UNAVAILABLE', 'the server is shutting down');
