// Deploys an agent or function from files through the API (PUT ?upload=true, then the zip to the upload URL) and
// waits for DEPLOYED; returns the milliseconds from the upload to DEPLOYED.
import yazl from 'yazl';

export async function zipOf(files) {
  const z = new yazl.ZipFile();
  for (const [name, data] of Object.entries(files))
    z.addBuffer(Buffer.isBuffer(data) ? data : Buffer.from(data), name, { mtime: new Date(0) });
  z.end();
  const chunks = [];
  for await (const c of z.outputStream) chunks.push(c);
  return Buffer.concat(chunks);
}

export async function deployZip(berth, plural, name, { spec, files }) {
  const put = await fetch(`${berth.url}/v0/${plural}/${name}?upload=true`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${berth.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ metadata: { name }, spec }),
  });
  if (!put.ok) throw new Error(`PUT ${name}: ${put.status} ${await put.text()}`);
  const body = await zipOf(files);
  const start = performance.now();
  const up = await fetch(put.headers.get('x-blaxel-upload-url'), {
    method: 'PUT',
    headers: { 'content-type': 'application/zip' },
    body,
  });
  if (!up.ok) throw new Error(`upload: ${up.status} ${await up.text()}`);
  for (;;) {
    const o = await berth.call('GET', `/v0/${plural}/${name}`);
    if (o.status === 'DEPLOYED') return performance.now() - start;
    if (o.status === 'FAILED') throw new Error(JSON.stringify(o.events.at(-1)));
    await new Promise((r) => setTimeout(r, 50));
  }
}
