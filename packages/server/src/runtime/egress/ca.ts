// The per-sandbox certificate authority of TLS interception: minted when a sandbox's policy first has routing
// rules, ECDSA P-256, valid from a few minutes ago for CA_VALIDITY_DAYS, name-constrained to the routing
// destinations where that can be expressed (clients that honour name constraints refuse it for anything else).
// Its private key is never written anywhere: it lives in memory (the server's, then the egress child's).
// @peculiar/x509's dependency injection (tsyringe) needs the reflect-metadata polyfill loaded first.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { AsnConvert } from '@peculiar/asn1-schema';
import {
  GeneralName,
  GeneralSubtree,
  GeneralSubtrees,
  id_ce_nameConstraints,
  NameConstraints,
} from '@peculiar/asn1-x509';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** Longer than any sandbox is expected to live; a restarted server mints a new CA and rewrites the bundle. */
const CA_VALIDITY_DAYS = 30;
/** Leaf certificates are cheap to mint again: short, so a leaked one is soon useless. */
const LEAF_VALIDITY_DAYS = 2;
/** Clock skew between host and clients: certificates start this long before now. */
const BACKDATE_MS = 10 * 60_000;

export interface CaMaterial {
  certPem: string;
  keyPem: string;
}

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der)
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim()}\n-----END ${label}-----\n`;

/** A DNS name a name constraint can carry: the destinations' patterns as dNSName subtrees (`*.x` → `.x`). */
function permittedNames(destinations: string[]): string[] | undefined {
  if (destinations.some((d) => d === '*')) return undefined; // a global rule: no constraint can say it
  return [...new Set(destinations.map((d) => (d.startsWith('*.') ? d.slice(1) : d)))];
}

export async function mintCa(sandboxLabel: string, destinations: string[]): Promise<CaMaterial> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const names = permittedNames(destinations);
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(true, 0, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
  ];
  if (names?.length) {
    const constraints = new NameConstraints({
      permittedSubtrees: new GeneralSubtrees(
        names.map((n) => new GeneralSubtree({ base: new GeneralName({ dNSName: n }) })),
      ),
    });
    extensions.push(new x509.Extension(id_ce_nameConstraints, true, AsnConvert.serialize(constraints)));
  }
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=Berth egress CA for ${sandboxLabel.replace(/[,=+<>#;"\\]/g, '_')}`,
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + CA_VALIDITY_DAYS * 86_400_000),
    keys,
    signingAlgorithm: ALG,
    extensions,
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { certPem: cert.toString('pem'), keyPem: pem('PRIVATE KEY', pkcs8) };
}

/** Mints leaf certificates for host names under one CA, one key pair for all of them. */
export class LeafMinter {
  private caKey?: CryptoKey;
  private leafKeys?: CryptoKeyPair;
  private leafKeyPem?: string;
  private readonly ca: x509.X509Certificate;

  constructor(private readonly material: CaMaterial) {
    this.ca = new x509.X509Certificate(material.certPem);
  }

  async leaf(host: string): Promise<{ certPem: string; keyPem: string }> {
    if (!this.caKey || !this.leafKeys || !this.leafKeyPem) {
      const der = Buffer.from(this.material.keyPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
      this.caKey = await webcrypto.subtle.importKey('pkcs8', der, ALG, false, ['sign']);
      this.leafKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
      this.leafKeyPem = pem(
        'PRIVATE KEY',
        await webcrypto.subtle.exportKey('pkcs8', this.leafKeys.privateKey),
      );
    }
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: `CN=${host}`,
      issuer: this.ca.subject,
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(now + LEAF_VALIDITY_DAYS * 86_400_000),
      signingKey: this.caKey,
      publicKey: this.leafKeys.publicKey,
      signingAlgorithm: ALG,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: host }]),
        await x509.AuthorityKeyIdentifierExtension.create(this.ca, false),
      ],
    });
    return { certPem: `${cert.toString('pem')}\n`, keyPem: this.leafKeyPem };
  }
}

function randomSerial(): string {
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] &= 0x7f; // positive
  return Buffer.from(b).toString('hex');
}
