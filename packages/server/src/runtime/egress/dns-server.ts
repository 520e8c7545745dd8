// Berth's DNS for sandboxes under an egress policy: every port-53 query they send is redirected here (nftables).
// An allowed name gets the host's answer (A records the resolved-address guard lets through); any other name
// gets NXDOMAIN and is never sent upstream, so DNS labels cannot carry data out.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { createServer, type Server } from 'node:net';
import * as packet from 'dns-packet';
import { decide, type EgressPolicy, normalizeHost } from './policy.js';
import type { GuardedResolver } from './resolve.js';

/** Answers are cached by the sandbox's resolver this long: short, so a narrowed policy bites soon. */
const ANSWER_TTL_S = 5;
/** A TCP query (length-prefixed) larger than this is not a query. */
const MAX_TCP_QUERY_BYTES = 4096;
/** A TCP DNS client idle this long is dropped. */
const TCP_IDLE_MS = 10_000;

export interface DnsDecision {
  source: string;
  name: string;
  type: string;
  answer: 'NOERROR' | 'NXDOMAIN' | 'REFUSED';
  addresses: number;
}

export class EgressDns {
  private udp?: Socket;
  private tcp?: Server;

  constructor(
    private readonly policyOf: (source: string) => EgressPolicy,
    private readonly resolver: GuardedResolver,
    private readonly audit: (d: DnsDecision) => void = () => undefined,
  ) {}

  /** Listens on UDP and TCP (port 0: any free port, the same for both is not promised); resolves with the UDP port. */
  async listen(port: number, host = '0.0.0.0'): Promise<number> {
    const udp = createSocket('udp4');
    udp.on('message', (msg, rinfo) => void this.onUdp(udp, msg, rinfo));
    udp.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(port, host, () => resolve());
    });
    this.udp = udp;
    const tcp = createServer((sock) => {
      let buf = Buffer.alloc(0);
      sock.setTimeout(TCP_IDLE_MS, () => sock.destroy());
      sock.on('error', () => undefined);
      sock.on('data', async (d) => {
        buf = Buffer.concat([buf, d]);
        while (buf.length >= 2) {
          const len = buf.readUInt16BE(0);
          if (len > MAX_TCP_QUERY_BYTES) return sock.destroy();
          if (buf.length < 2 + len) return;
          const q = buf.subarray(2, 2 + len);
          buf = buf.subarray(2 + len);
          const out = await this.answer(q, sock.remoteAddress ?? '');
          if (out) sock.write(Buffer.concat([u16(out.length), out]));
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(port, host, () => resolve());
    });
    this.tcp = tcp;
    return udp.address().port;
  }

  private async onUdp(udp: Socket, msg: Buffer, rinfo: RemoteInfo): Promise<void> {
    const out = await this.answer(msg, rinfo.address);
    if (out) udp.send(out, rinfo.port, rinfo.address);
  }

  /** The response to one query message, or undefined for what is not a query (dropped silently). */
  async answer(msg: Buffer, source: string): Promise<Buffer | undefined> {
    let q: packet.Packet;
    try {
      q = packet.decode(msg);
    } catch {
      return undefined;
    }
    if (q.type !== 'query' || !q.questions?.length) return undefined;
    const question = q.questions[0];
    const reply = (rcode: 'NOERROR' | 'NXDOMAIN' | 'REFUSED', answers: packet.Answer[] = []) => {
      this.audit({
        source,
        name: question.name,
        type: question.type,
        answer: rcode,
        addresses: answers.length,
      });
      return packet.encode({
        type: 'response',
        id: q.id,
        flags: packet.RECURSION_DESIRED | packet.RECURSION_AVAILABLE | rcodeFlag(rcode),
        questions: [question],
        answers,
      });
    };
    // One question per message is what resolvers send; more is a way to smuggle names past the check.
    if (q.questions.length !== 1 || question.class !== 'IN') return reply('REFUSED');
    if (!decide(this.policyOf(source), question.name).allow) return reply('NXDOMAIN');
    // Allowed: IPv4 addresses only (sandboxes have no IPv6 route); other types get an empty answer, so nothing
    // but the address lookup the proxy repeats anyway ever reaches the upstream resolver.
    if (question.type !== 'A') return reply('NOERROR');
    const r = await this.resolver.resolve(source, normalizeHost(question.name) ?? question.name);
    if (!r.addresses.length) return reply('NXDOMAIN');
    return reply(
      'NOERROR',
      r.addresses.map((data) => ({ type: 'A', name: question.name, class: 'IN', ttl: ANSWER_TTL_S, data })),
    );
  }

  close(): void {
    this.udp?.close();
    this.tcp?.close();
  }
}

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
};

/** dns-packet carries the response code in the low four bits of the flags. */
function rcodeFlag(rcode: 'NOERROR' | 'NXDOMAIN' | 'REFUSED'): number {
  return { NOERROR: 0, NXDOMAIN: 3, REFUSED: 5 }[rcode];
}
