// What the cluster tests of upload URLs share: the agent template as a zip, and a URL's path sent to one server.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import yazl from 'yazl';
import type { Proc } from './cluster-support.js';

const TEMPLATE = join(import.meta.dirname, '../../../../templates/agent-python');

/** The Python agent template zipped, with `extra` as one more file (a distinct upload). */
export async function templateZip(extra?: string): Promise<Blob> {
  const z = new yazl.ZipFile();
  for (const f of readdirSync(TEMPLATE)) z.addFile(join(TEMPLATE, f), f);
  if (extra) z.addBuffer(Buffer.from(extra), 'extra.txt');
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return new Blob([new Uint8Array(Buffer.concat(chunks))]);
}

/** An upload URL's path through `p` (the public address is a name the tests do not resolve). */
export const through = (p: Proc, url: string) => `${p.url}${new URL(url).pathname}`;

export const putZip = (url: string, body: Blob) =>
  fetch(url, { method: 'PUT', headers: { 'content-type': 'application/zip' }, body });
