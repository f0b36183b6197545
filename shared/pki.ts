/**
 * Certificates for the local environment and for servers that make their own
 * serving certificate: a CA, and leaf certificates signed by it.
 *
 * ECDSA P-256 through WebCrypto: key generation takes about a millisecond,
 * where RSA-2048 in pure JS (node-forge) takes hundreds.
 */
// @peculiar/x509 resolves its ASN.1 codecs through tsyringe, which needs this polyfill.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const tenYears = 10 * 365 * 24 * 3600 * 1000;
/** notBefore lies this far before now by default, for clocks behind ours. */
const defaultBackdateMs = 3600_000;

/** A certificate and its private key, both PEM. */
export interface KeyPair {
  cert: string;
  key: string;
}

export interface CertificateAuthority extends KeyPair {
  /** Signs a leaf certificate with this CA. */
  issue(options: LeafOptions): Promise<KeyPair>;
}

export interface LeafOptions {
  commonName: string;
  /** X.509 organizations: Kubernetes reads them as the user's groups. */
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client' | 'both';
  /** Validity from now (default ten years); servers that rotate their own certificates pick less. */
  validForMs?: number;
  /** How long before now it is valid already, for clocks behind ours (default an hour). */
  backdateMs?: number;
}

export async function createCertificateAuthority(
  commonName: string,
  validForMs: number = tenYears,
  backdateMs: number = defaultBackdateMs,
): Promise<CertificateAuthority> {
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${escapeDn(commonName)}`,
    notBefore: new Date(Date.now() - backdateMs),
    notAfter: new Date(Date.now() + validForMs),
    signingAlgorithm: algorithm,
    keys: keys as webcrypto.CryptoKeyPair,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey as webcrypto.CryptoKey),
    ],
  });
  return fromParts(
    cert,
    keys as webcrypto.CryptoKeyPair,
    await exportKey((keys as webcrypto.CryptoKeyPair).privateKey),
  );
}

/** Loads a CA from PEM, for example one kept in a Secret. */
export async function loadCertificateAuthority(pair: KeyPair): Promise<CertificateAuthority> {
  const cert = new x509.X509Certificate(pair.cert);
  const privateKey = await webcrypto.subtle.importKey('pkcs8', pemBody(pair.key), algorithm, true, ['sign']);
  const publicKey = await cert.publicKey.export(algorithm, ['verify']);
  return fromParts(cert, { privateKey, publicKey } as webcrypto.CryptoKeyPair, pair.key);
}

function fromParts(
  caCert: x509.X509Certificate,
  caKeys: webcrypto.CryptoKeyPair,
  keyPem: string,
): CertificateAuthority {
  return {
    cert: caCert.toString('pem'),
    key: keyPem,
    async issue(options: LeafOptions): Promise<KeyPair> {
      const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
      const subject = [`CN=${escapeDn(options.commonName)}`]
        .concat((options.organizations ?? []).map((o) => `O=${escapeDn(o)}`))
        .join(', ');
      const usages: string[] = [];
      if (options.usage !== 'client') usages.push(x509.ExtendedKeyUsage.serverAuth);
      if (options.usage !== 'server') usages.push(x509.ExtendedKeyUsage.clientAuth);
      const altNames = [
        ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
        ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
      ];
      const extensions: x509.Extension[] = [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
          true,
        ),
        new x509.ExtendedKeyUsageExtension(usages, false),
        await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
      ];
      if (altNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: randomSerial(),
        subject,
        issuer: caCert.subject,
        notBefore: new Date(Date.now() - (options.backdateMs ?? defaultBackdateMs)),
        notAfter: new Date(Date.now() + (options.validForMs ?? tenYears)),
        signingAlgorithm: algorithm,
        publicKey: keys.publicKey as webcrypto.CryptoKey,
        signingKey: caKeys.privateKey,
        extensions,
      });
      return {
        cert: cert.toString('pem'),
        key: await exportKey((keys as webcrypto.CryptoKeyPair).privateKey),
      };
    },
  };
}

async function exportKey(key: webcrypto.CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

function pemBody(pem: string): ArrayBuffer {
  const der = x509.PemConverter.decode(pem)[0];
  if (!der) throw new Error('no PEM block found in private key');
  return der;
}

function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive serial
  return Buffer.from(bytes).toString('hex');
}

function escapeDn(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1');
}

/** An ECDSA P-256 key pair as PEM (PKCS#8 private, SPKI public), e.g. for service-account tokens. */
export async function createSigningKey(): Promise<{ privateKey: string; publicKey: string }> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  return {
    privateKey: await exportKey(keys.privateKey),
    publicKey: x509.PemConverter.encode(
      await webcrypto.subtle.exportKey('spki', keys.publicKey),
      'PUBLIC KEY',
    ),
  };
}
