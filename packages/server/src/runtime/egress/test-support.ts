// For the egress unit tests: a real DNS server on loopback that answers from a fixed table and records every
// query it receives, standing in for the upstream resolver (never for Berth's DNS, which the tests run as is).
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as packet from 'dns-packet';

/**
 * A one-day self-signed P-256 certificate for `name`, made in `dir` (key.pem, cert.pem). `san`: its subjectAltName
 * names (`true`: `name` alone). The one maker of test certificates: the egress tests' upstreams and the egress
 * bench (bench/sandboxes/egress.mjs, through dist/) use it too.
 */
export function selfSignedCert(
  dir: string,
  name: string,
  san: boolean | string[] = false,
): { key: Buffer; cert: Buffer; keyPath: string; certPath: string } {
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  const sans = san === true ? [name] : san || [];
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-keyout',
      keyPath,
      '-out',
      certPath,
      '-subj',
      `/CN=${name}`,
      ...(sans.length ? ['-addext', `subjectAltName=${sans.map((n) => `DNS:${n}`).join(',')}`] : []),
    ],
    { stdio: 'ignore' },
  );
  return { key: readFileSync(keyPath), cert: readFileSync(certPath), keyPath, certPath };
}

export interface FakeResolver {
  server: string;
  queries: string[];
  close(): void;
}

/**
 * `table`: A records by name and `txt`: TXT records by name (a test may change either while the server runs, e.g. a
 * custom domain's challenge); `ttl`: the A records' TTL in seconds.
 */
export async function startFakeResolver(
  table: Record<string, string>,
  txt: Record<string, string[]> = {},
  ttl = 5,
): Promise<FakeResolver> {
  const udp = createSocket('udp4');
  const queries: string[] = [];
  udp.on('message', (msg, r) => {
    const q = packet.decode(msg);
    const question = q.questions?.[0];
    if (!question) return;
    queries.push(question.name);
    const records = question.type === 'TXT' ? txt[question.name] : undefined;
    const data = table[question.name] ?? (records?.length ? 'txt' : undefined);
    const answers: packet.Answer[] =
      question.type === 'TXT'
        ? (records ?? []).map((r) => ({ type: 'TXT', name: question.name, ttl: 0, data: r }))
        : data && question.type === 'A'
          ? [{ type: 'A', name: question.name, ttl, data }]
          : [];
    udp.send(
      packet.encode({
        type: 'response',
        id: q.id,
        flags: data ? 0x180 : 0x183,
        questions: q.questions,
        answers,
      }),
      r.port,
      r.address,
    );
  });
  await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', () => resolve()));
  return { server: `127.0.0.1:${udp.address().port}`, queries, close: () => udp.close() };
}

/** One query to a DNS server over UDP: the response code and the A records. */
export async function queryA(
  server: { host: string; port: number },
  name: string,
  type: 'A' | 'AAAA' | 'TXT' = 'A',
): Promise<{ rcode: string; addresses: string[] }> {
  const udp = createSocket('udp4');
  try {
    const reply = await new Promise<Buffer>((resolve, reject) => {
      udp.once('message', resolve);
      udp.once('error', reject);
      udp.send(
        packet.encode({
          type: 'query',
          id: 7,
          flags: packet.RECURSION_DESIRED,
          questions: [{ type, name, class: 'IN' }],
        }),
        server.port,
        server.host,
      );
    });
    // dns-packet decodes the response code, its types do not declare it.
    const r = packet.decode(reply) as packet.DecodedPacket & { rcode?: string };
    return {
      rcode: r.rcode ?? '',
      addresses: (r.answers ?? []).flatMap((a) => (a.type === 'A' ? [String(a.data)] : [])),
    };
  } finally {
    udp.close();
  }
}
