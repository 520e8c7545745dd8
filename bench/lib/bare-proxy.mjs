// A second baseline: the least a Node proxy hop can cost here — node:http in, one undici keep-alive pool
// out, bodies piped both ways, no auth, no metering. Berth's own overhead is what it adds beyond this.
import { createServer } from 'node:http';
import { Agent, request } from 'undici';

const target = process.env.TARGET;
const agent = new Agent({ keepAliveTimeout: 60_000, connections: 256 });
const server = createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  try {
    const up = await request(`${target}${req.url}`, {
      method: req.method,
      headers: {
        'content-type': req.headers['content-type'] ?? 'application/json',
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      },
      body: chunks.length ? Buffer.concat(chunks) : undefined,
      dispatcher: agent,
    });
    const type = up.headers['content-type'];
    res.writeHead(up.statusCode, type ? { 'content-type': type } : {});
    up.body.pipe(res);
  } catch {
    res.writeHead(502).end();
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(`listening http://127.0.0.1:${server.address().port}\n`),
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
