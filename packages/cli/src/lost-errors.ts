// What `berth serve` does with an error no code path handled (decision 095): it logs it through the server's
// redacting logger and exits at once, as a kill -9 would end it. Everything Berth runs is made to survive that (its
// restart re-adopts sandboxes, replicas and tasks; chaos tests kill it under load), while an operation whose error
// was lost has left state nobody knows: going on could hold a lease, a slot or a half-made sandbox for ever.
import type { RunningServer } from '@berth/server';

type Logger = RunningServer['logger'];

/** The exit status of a server ended by a lost error (EX_SOFTWARE: an internal software error). */
export const LOST_ERROR_EXIT = 70;

interface ProcessLike {
  on(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
  on(event: 'uncaughtException', listener: (err: Error) => void): unknown;
}

export function exitOnLostErrors(
  logger: Logger,
  proc: ProcessLike = process,
  exit: (code: number) => void = (code) => process.exit(code),
): void {
  const end = (kind: string) => (err: unknown) => {
    logger.fatal(
      { err, kind },
      `${kind}: an error no code path handled; exiting so that the restart finds a known state`,
    );
    logger.flush?.();
    exit(LOST_ERROR_EXIT);
  };
  proc.on('unhandledRejection', end('unhandled rejection'));
  proc.on('uncaughtException', end('uncaught exception'));
}
