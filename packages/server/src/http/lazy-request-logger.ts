// Fastify gives every request a child of the server's logger (pino's `child`: an object and a JSON text of the
// request id per request). Per-request log lines are off unless debugging (api/app.ts), so most requests never log:
// this child is made only when something logs through the request, with the same bindings and options as before.
import type { FastifyBaseLogger } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];

class LazyRequestLogger {
  private made?: FastifyBaseLogger;
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly opts: ChildOptions,
  ) {}

  private get log(): FastifyBaseLogger {
    this.made ??= this.parent.child(this.bindings, this.opts);
    return this.made;
  }

  get level() {
    return this.log.level;
  }
  set level(l: string) {
    this.log.level = l;
  }
  fatal(...a: unknown[]) {
    (this.log.fatal as (...x: unknown[]) => void)(...a);
  }
  error(...a: unknown[]) {
    (this.log.error as (...x: unknown[]) => void)(...a);
  }
  warn(...a: unknown[]) {
    (this.log.warn as (...x: unknown[]) => void)(...a);
  }
  info(...a: unknown[]) {
    (this.log.info as (...x: unknown[]) => void)(...a);
  }
  debug(...a: unknown[]) {
    (this.log.debug as (...x: unknown[]) => void)(...a);
  }
  trace(...a: unknown[]) {
    (this.log.trace as (...x: unknown[]) => void)(...a);
  }
  silent(...a: unknown[]) {
    (this.log.silent as (...x: unknown[]) => void)(...a);
  }
  isLevelEnabled(level: string) {
    return (this.log as FastifyBaseLogger & { isLevelEnabled(l: string): boolean }).isLevelEnabled(level);
  }
  child(bindings: Bindings, opts?: ChildOptions) {
    return this.log.child(bindings, opts);
  }
}

/** Fastify's `childLoggerFactory`: a request logger that becomes pino's child on its first use. */
export function lazyChildLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  opts: ChildOptions,
): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, opts) as unknown as FastifyBaseLogger;
}
