// The one way Berth sends a request outward for a user: callbacks, git clones, model providers, image registries
// (and the OAuth token endpoints to come). Two checks, one policy (address-policy.ts):
// - at write time, `urlIssue` judges a URL a spec stores (a 422 naming the field and the setting that opens it);
// - at connect time, the undici connector of `agent()`/`fetch()` resolves the name itself, judges every address it
//   gets, and dials only those — IP literals included (Node's net skips its `lookup` hook for them), so a name
//   that changes its answer between the two checks (DNS rebinding) still lands nowhere closed. `vet()` gives the
//   same vetted addresses to what is not undici (git, pinned with curl's resolve list).
// Redirects are each a new connection through the same connector, so they are judged like the first hop.
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import type { FieldIssue } from '../errors.js';
import { AddressPolicy, closedReason } from './address-policy.js';

/** The server's setting that opens ranges to its outbound requests (config.ts has its older aliases). */
export const OUTBOUND_SETTING = 'BERTH_OUTBOUND_ALLOW_CIDRS';
/**
 * A name that does not resolve within this at write time is let through: a write does not wait on a slow resolver,
 * and the connect-time check judges the name whenever it is used.
 */
export const WRITE_LOOKUP_TIMEOUT_MS = 3_000;

/** Every address a name resolves to, in the resolver's order. */
export type Lookup = (host: string) => Promise<string[]>;

/** A destination the outbound rules close: never retried, never dialled. */
export class OutboundRefused extends Error {
  override name = 'OutboundRefused';
}

export interface OutboundOptions {
  /** CIDRs (IPv4 and IPv6) opened: config.outboundAllowCidrs. */
  allowCidrs: string[];
  /** Ranges of this host beside its interfaces (the sandboxes' network), never opened. */
  hostRanges?: string[];
  /** Resolves names (tests inject one to play a rebinding name); default: the host's resolver, every address. */
  lookup?: Lookup;
  /** The host's interface addresses (tests); default: os.networkInterfaces(). */
  interfaces?: () => string[];
}

const systemLookup: Lookup = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** RFC 6761: `localhost` and names under it are loopback, whatever a resolver says. */
const isLocalhostName = (host: string) => /(^|\.)localhost\.?$/i.test(host);

export class Outbound {
  readonly policy: AddressPolicy;
  private readonly lookup: Lookup;
  private shared?: Agent;

  constructor(opts: OutboundOptions) {
    this.policy = new AddressPolicy({
      allowCidrs: opts.allowCidrs,
      loopback: 'when-listed',
      hostRanges: opts.hostRanges,
      interfaces: opts.interfaces,
    });
    this.lookup = opts.lookup ?? systemLookup;
  }

  /**
   * The addresses `host` (a URL's hostname: a name, or an IP literal with or without brackets) may be dialled at,
   * in order. Throws OutboundRefused when any address it resolves to is closed (a name answering one public and
   * one private address is not trusted with either), and the resolver's own error when it does not resolve.
   */
  async vet(host: string, timeoutMs?: number): Promise<string[]> {
    const h = host.replace(/^\[|\]$/g, '');
    const addresses = isIP(h)
      ? [h]
      : isLocalhostName(h)
        ? ['127.0.0.1', '::1']
        : await withTimeout(this.lookup(h), timeoutMs);
    if (!addresses.length) throw new Error(`${h} has no address`);
    for (const a of addresses) {
      const v = this.policy.judge(a);
      if (!v.open)
        throw new OutboundRefused(
          `${a === h ? '' : `${h} resolves to ${a}: `}${closedReason(v, OUTBOUND_SETTING)}`,
        );
    }
    return addresses;
  }

  /**
   * The write-time check of a URL stored at `pointer` (a JSON pointer into the request body): an issue when it is
   * not http(s) or its host is closed; none when the host does not resolve now (judged again at connect time).
   */
  async urlIssue(url: string, pointer: string): Promise<FieldIssue | undefined> {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return { pointer, message: 'must be an absolute http or https URL' };
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      return { pointer, message: 'must be an http or https URL' };
    try {
      await this.vet(u.hostname, WRITE_LOOKUP_TIMEOUT_MS);
    } catch (e) {
      if (e instanceof OutboundRefused)
        return { pointer, message: `is not a destination Berth sends requests to: ${e.message}` };
    }
    return undefined;
  }

  /** An undici connector that dials `options.hostname` only at vetted addresses (the next one if one fails). */
  connector(tls: buildConnector.BuildOptions = {}): buildConnector.connector {
    const base = buildConnector(tls);
    return (options, callback) => {
      const name = options.hostname;
      // The certificate is checked against the name asked for, not the address dialled.
      const servername = options.servername || (isIP(name) ? undefined : name);
      this.vet(name).then(
        (vetted) => {
          // IPv4 first: a host whose IPv6 route is broken would otherwise hold each new connection for the whole
          // connect timeout (sandboxes and the docs assume IPv4; Node's happy eyeballs needs a name, not a list).
          const addresses = [...vetted].sort((a, b) => isIP(a) - isIP(b));
          const dial = (i: number) =>
            base({ ...options, hostname: addresses[i], servername }, (...args) => {
              if (args[0] && i + 1 < addresses.length) dial(i + 1);
              else callback(...args);
            });
          dial(0);
        },
        (err: Error) => callback(err, null),
      );
    };
  }

  /** An undici Agent whose every connection goes through `connector()`; `options.connect` may carry TLS options. */
  agent(options: Agent.Options = {}): Agent {
    const tls = typeof options.connect === 'object' ? options.connect : {};
    return new Agent({ ...options, connect: this.connector(tls) });
  }

  /** undici's fetch through one shared vetted Agent. A redirect it follows is a new, vetted connection. */
  fetch(input: Parameters<typeof undiciFetch>[0], init: Parameters<typeof undiciFetch>[1] = {}) {
    this.shared ??= this.agent();
    return undiciFetch(input, { ...init, dispatcher: this.shared });
  }

  async close(): Promise<void> {
    await this.shared?.close();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number | undefined): Promise<T> {
  if (ms === undefined) return p;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
