// What a long command is doing, on stderr (stdout keeps the result: a URL, a table). On a terminal: the current phase
// on one redrawn line with a spinner and its elapsed time — so a silent `npm ci` still shows life — replaced by
// `✓ phase  12.3s` when it ends. In a pipe or CI: one plain line per phase, stamped with the time since the command
// began, and no escape code. Output passed through (a build log) is printed above the spinner line.
import { elapsed, interactive, paint } from './style.js';

/** How often the spinner line is redrawn. */
const FRAME_MS = 100;
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export class Progress {
  private current?: { label: string; started: number };
  private timer?: NodeJS.Timeout;
  private frame = 0;
  private drawn = false;
  /** Passed-through output ended mid-line: the spinner waits for the line's end before it is drawn again. */
  private midLine = false;
  private readonly began: number;
  readonly live: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly now: () => number = Date.now,
  ) {
    this.began = now();
    this.live = interactive(out);
  }

  /**
   * Starts a phase, ending the one before as done; the same label again changes nothing. `echo: false` shows it only
   * on a terminal (in a pipe the output passed through already says it, e.g. the build log's own `berth:` lines).
   */
  phase(label: string, echo = true) {
    if (this.current?.label === label) return;
    this.end();
    this.current = { label, started: this.now() };
    if (!this.live) {
      if (!echo) return;
      this.out.write(`[${elapsed(this.now() - this.began).padStart(6)}] ${label}\n`);
      return;
    }
    this.timer ??= setInterval(() => this.draw(), FRAME_MS);
    this.timer.unref();
    this.draw();
  }

  /** Ends the current phase: `✓` (or `✗` when it failed) with how long it took, on a terminal. */
  end(failed = false) {
    const c = this.current;
    if (!c) return;
    this.current = undefined;
    if (!this.live) return;
    this.clear();
    const mark = failed ? paint(this.out, 'red', '✗') : paint(this.out, 'green', '✓');
    this.out.write(`${mark} ${c.label}  ${paint(this.out, 'dim', elapsed(this.now() - c.started))}\n`);
  }

  /** A line of its own (a status reached, a warning), above the spinner. */
  note(line: string) {
    this.clear();
    this.out.write(`${line}\n`);
    this.midLine = false;
    this.draw();
  }

  /** Output passed through as it comes (a build log). */
  log(text: string) {
    if (!text) return;
    this.clear();
    this.out.write(text);
    this.midLine = !text.endsWith('\n');
    this.draw();
  }

  /** Time since the command began, for its last line. */
  total() {
    return elapsed(this.now() - this.began);
  }

  /** Stops the spinner and leaves the line clean; the phase, if any, is ended as `failed` says. */
  stop(failed = false) {
    this.end(failed);
    clearInterval(this.timer);
    this.timer = undefined;
    this.clear();
  }

  private clear() {
    if (!this.drawn) return;
    this.out.write('\r\x1b[K');
    this.drawn = false;
  }

  private draw() {
    const c = this.current;
    if (!this.live || !c || this.midLine) return;
    const spin = paint(this.out, 'cyan', FRAMES[this.frame++ % FRAMES.length]);
    const took = paint(this.out, 'dim', `${Math.floor((this.now() - c.started) / 1000)}s`);
    // Cut to the terminal's width: a wrapped line could not be redrawn in place.
    const room = (this.out.columns || 80) - 8;
    const label = c.label.length > room ? `${c.label.slice(0, room - 1)}…` : c.label;
    this.out.write(`\r\x1b[K${spin} ${label}  ${took}`);
    this.drawn = true;
  }
}
