// The baseline: bare Fastify routes returning the same JSON bodies Berth returns for GET /v0/policies/{name} and for
// the page of GET /v0/policies the benchmark asks for.
import Fastify from 'fastify';

const body = process.env.BARE_BODY ?? '{}';
const listBody = process.env.BARE_LIST_BODY ?? '[]';
const app = Fastify({ logger: false });
app.get('/v0/policies/:name', async (_req, reply) => reply.type('application/json').send(body));
app.get('/v0/policies', async (_req, reply) => reply.type('application/json').send(listBody));
app.put('/v0/policies/:name', async (_req, reply) => reply.type('application/json').send(body));
await app.listen({ host: '127.0.0.1', port: 0 });
const a = app.server.address();
process.stdout.write(`listening http://127.0.0.1:${a.port}\n`);
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
