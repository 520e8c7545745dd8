// How the CLI writes for a person or for a program. Colours and redrawn lines only on a terminal that takes them:
// Node's hasColors() says no under NO_COLOR, NODE_DISABLE_COLORS or TERM=dumb (and yes under FORCE_COLOR). A pipe,
// a file, CI, or a terminal under NO_COLOR gets plain lines with no escape code at all.
import { styleText } from 'node:util';

type Out = NodeJS.WriteStream;
type Style = Parameters<typeof styleText>[0];

/** Whether `out` takes colours. */
export const coloured = (out: Out = process.stdout) =>
  out.isTTY === true && typeof out.hasColors === 'function' && out.hasColors();

/** Whether a line of `out` may be redrawn in place (a spinner): a terminal that takes escape codes. */
export const interactive = (out: Out = process.stderr) => coloured(out);

export const paint = (out: Out, style: Style, text: string) =>
  coloured(out) ? styleText(style, text) : text;

/** The colour of a status: green when serving, red when failed, yellow while on its way, dim once gone. */
export function statusStyle(status: string): Style | undefined {
  if (status === 'DEPLOYED' || status === 'succeeded') return 'green';
  if (status === 'FAILED' || status === 'failed') return 'red';
  if (['TERMINATED', 'DEACTIVATED', 'DELETED', 'cancelled'].includes(status)) return 'dim';
  if (status === '-' || !status) return undefined;
  return 'yellow';
}

export const paintStatus = (out: Out, status: string) => {
  const s = statusStyle(status);
  return s ? paint(out, s, status) : status;
};

/** `4.2s`, `1m05s`: how long something took, for people. */
export function elapsed(ms: number) {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}
