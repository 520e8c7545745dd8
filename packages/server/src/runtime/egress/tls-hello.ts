// Reads the server name (SNI) out of a TLS ClientHello without terminating TLS: what the transparent proxy
// routes on, and what an explicit CONNECT's first bytes are checked against (SNI must equal the CONNECT host).

export type HelloResult = { complete: false } | { complete: true; tls: boolean; sni?: string };

/** A ClientHello bigger than this (one TLS record's maximum plus its header) is not waited for. */
export const MAX_HELLO_BYTES = 16_384 + 5;

/**
 * Looks at the bytes received so far: not TLS at all (first byte is not a handshake record), an incomplete
 * record (wait for more), or a complete ClientHello with or without a server name.
 */
export function parseClientHello(buf: Buffer): HelloResult {
  if (buf.length < 1) return { complete: false };
  if (buf[0] !== 0x16) return { complete: true, tls: false };
  if (buf.length < 5) return { complete: false };
  const recordLen = buf.readUInt16BE(3);
  if (buf.length < 5 + recordLen) return { complete: false };
  try {
    return { complete: true, tls: true, sni: sniOf(buf.subarray(5, 5 + recordLen)) };
  } catch {
    return { complete: true, tls: true };
  }
}

function sniOf(hs: Buffer): string | undefined {
  if (hs[0] !== 0x01) return undefined; // not a ClientHello
  let p = 4 + 2 + 32; // handshake header, client version, random
  p += 1 + hs[p]; // session id
  p += 2 + hs.readUInt16BE(p); // cipher suites
  p += 1 + hs[p]; // compression methods
  const end = p + 2 + hs.readUInt16BE(p);
  p += 2;
  while (p + 4 <= end) {
    const type = hs.readUInt16BE(p);
    const len = hs.readUInt16BE(p + 2);
    p += 4;
    if (type === 0) {
      // server_name: list length, then entries of (type, length, name); type 0 is a host name
      let q = p + 2;
      while (q + 3 <= p + len) {
        const nameType = hs[q];
        const nameLen = hs.readUInt16BE(q + 1);
        if (nameType === 0) return hs.subarray(q + 3, q + 3 + nameLen).toString('latin1');
        q += 3 + nameLen;
      }
      return undefined;
    }
    p += len;
  }
  return undefined;
}

/** The Host header of a plain HTTP request head, once the head is complete; undefined while incomplete. */
export function parseHttpHost(buf: Buffer): { complete: boolean; host?: string } {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return { complete: false };
  const head = buf.subarray(0, end).toString('latin1');
  const m = /\r\nhost:[ \t]*([^\r\n]*)/i.exec(head);
  return { complete: true, host: m ? stripPort(m[1].trim()) : undefined };
}

export function stripPort(hostPort: string): string {
  if (hostPort.startsWith('[')) return hostPort.slice(0, hostPort.indexOf(']') + 1);
  const i = hostPort.lastIndexOf(':');
  return i >= 0 ? hostPort.slice(0, i) : hostPort;
}
