// Reads the workspace's series from /metrics (the Prometheus text format; an API key sees its workspaces' series).
import { send } from './client';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string, prefix: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

export async function scrape(prefix: string, signal?: AbortSignal): Promise<Sample[]> {
  const res = await send('GET', '/metrics', { signal });
  return parseMetrics(await res.text(), prefix);
}
