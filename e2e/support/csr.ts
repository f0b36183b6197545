/** Builds PKCS#10 certificate requests, for the CSR approver's unit test and e2e (forged CSRs). */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A PEM CSR with CN=user and one O per group, and its private key (PEM). */
export async function certificateRequest(
  user: string,
  groups: string[],
): Promise<{ csr: string; key: string }> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const escapeDn = (v: string) => v.replace(/([,+"\\<>;=])/g, '\\$1');
  const name = [`CN=${escapeDn(user)}`, ...groups.map((g) => `O=${escapeDn(g)}`)].join(', ');
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys: keys as unknown as Parameters<typeof x509.Pkcs10CertificateRequestGenerator.create>[0]['keys'],
    signingAlgorithm: algorithm,
  });
  const key = x509.PemConverter.encode(
    await webcrypto.subtle.exportKey('pkcs8', keys.privateKey),
    'PRIVATE KEY',
  );
  return { csr: request.toString('pem'), key };
}
