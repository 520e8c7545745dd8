// A build log as `berth deploy` shows it while it is written: every line passed through, and on a terminal each step
// the builder announces (its own `berth: …` lines, builds/build-script.ts) becomes the spinner's phase with its
// elapsed time — so the silence of `npm ci` or `tsc` still says what runs and for how long.
import type { Progress } from './progress.js';
import { paint } from './style.js';

/** The phases the builder's lines open, by how they begin. */
const PHASES: [RegExp, string][] = [
  [/^building on image /, 'preparing the image'],
  [/^unpacking /, 'unpacking the source'],
  [/^dependency cache hit/, 'dependencies from the cache'],
  [/^dependency cache miss/, 'installing dependencies'],
  [/^no lockfile: npm install/, 'installing dependencies (npm install)'],
  [/names files of the project/, 'installing dependencies'],
  [/from the workspace's dependency cache$/, 'copying dependencies'],
  [/^npm run build$/, 'compiling (npm run build)'],
  [/^npm run \S+ \(the project's own install script\)/, "running the project's install script"],
  [/^npm prune/, 'pruning dev dependencies'],
];

const PREFIX = 'berth: ';

export class BuildLogView {
  private held = '';

  constructor(private readonly progress: Progress) {}

  /** A chunk of the log as it arrives; whole lines are shown, a partial one waits for its end. */
  push(text: string) {
    this.held += text;
    const cut = this.held.lastIndexOf('\n') + 1;
    if (!cut) return;
    for (const line of this.held.slice(0, cut - 1).split('\n')) this.line(line);
    this.held = this.held.slice(cut);
  }

  end() {
    if (this.held) this.line(this.held);
    this.held = '';
  }

  private line(line: string) {
    const p = this.progress;
    if (!line.startsWith(PREFIX)) return p.log(`${line}\n`);
    const said = line.slice(PREFIX.length);
    p.log(`${p.live ? paint(process.stderr, 'dim', line) : line}\n`);
    if (said === 'build done') return p.end();
    if (said.startsWith('build failed')) return p.end(true);
    const phase = PHASES.find(([re]) => re.test(said))?.[1];
    if (phase) p.phase(phase, false);
  }
}
