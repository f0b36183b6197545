/**
 * The gateway's CA and serving certificate, kept in one Secret
 * (`<gateway>-tls`: ca.crt, ca.key, ca-previous.crt, tls.crt, tls.key).
 * The approach of ../webhook-certificate.ts, whose rules it reuses
 * (renewalNeeded, caBundleOf): renew the serving certificate with a third of
 * its life left (same CA, so the APIService caBundle does not change), and
 * the CA with a third of its life left, keeping the old CA in the bundle
 * until it expires. The gateway reloads a renewed certificate from its
 * mounted files, and the aggregator trusts both CAs meanwhile, so a
 * rotation drops no request.
 *
 * Pure apart from key generation: the controller reads the Secret from its
 * informer and writes the result with server-side apply (it is the only
 * writer, behind leader election), so no read-modify-write race exists.
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { createCertificateAuthority, loadCertificateAuthority } from '../../../shared/pki.ts';
import { caBundleOf, type Renewal, renewalNeeded, type SecretData } from '../webhook-certificate.ts';

export type { Renewal, SecretData };

export interface CertificateSettings {
  /** DNS names and addresses the serving certificate must name. */
  hosts: string[];
  /** The certificates' common names derive from it. */
  subject: string;
  caValidForMs: number;
  servingValidForMs: number;
}

export interface CertificateState {
  data: SecretData;
  /** What was made anew ('none': `data` is what the Secret held). */
  renewal: Renewal;
  /** PEM CAs the APIService must trust. */
  caBundle: string;
  /** When to look again: the next renewal, or the previous CA's expiry (it then leaves the bundle). */
  recheckAt: number;
}

export async function servingCertificate(
  current: SecretData,
  settings: CertificateSettings,
  now: number,
): Promise<CertificateState> {
  const renewal = renewalNeeded(current, settings.hosts, now);
  const data = renewal === 'none' ? current : await issue(current, renewal, settings);
  return { data, renewal, caBundle: caBundleOf(data, now), recheckAt: recheckAt(data, now) };
}

async function issue(
  current: SecretData,
  renewal: Renewal,
  settings: CertificateSettings,
): Promise<SecretData> {
  const next: SecretData = {};
  let ca: Awaited<ReturnType<typeof createCertificateAuthority>>;
  if (renewal === 'ca') {
    ca = await createCertificateAuthority(`${settings.subject}-ca`, settings.caValidForMs);
    // Still trusted until it expires: a replica serving a certificate of the old CA keeps working.
    if (current['ca.crt'] && current['ca.key']) next['ca-previous.crt'] = current['ca.crt'];
  } else {
    ca = await loadCertificateAuthority({ cert: current['ca.crt'] ?? '', key: current['ca.key'] ?? '' });
    if (current['ca-previous.crt']) next['ca-previous.crt'] = current['ca-previous.crt'];
  }
  const leaf = await ca.issue({
    commonName: settings.subject,
    dnsNames: settings.hosts.filter((h) => !isIP(h)),
    ipAddresses: settings.hosts.filter((h) => isIP(h)),
    usage: 'server',
    validForMs: settings.servingValidForMs,
  });
  return { ...next, 'ca.crt': ca.cert, 'ca.key': ca.key, 'tls.crt': leaf.cert, 'tls.key': leaf.key };
}

/** The earliest of: the CA's and the leaf's renewal points (a third of life left), the previous CA's expiry. */
export function recheckAt(data: SecretData, now: number): number {
  const times: number[] = [];
  for (const key of ['ca.crt', 'tls.crt'] as const) {
    const cert = parse(data[key]);
    if (!cert) continue;
    const from = Date.parse(cert.validFrom);
    const to = Date.parse(cert.validTo);
    times.push(to - (to - from) / 3);
  }
  const previous = parse(data['ca-previous.crt']);
  if (previous) times.push(Date.parse(previous.validTo));
  const future = times.filter((t) => t > now);
  return future.length > 0 ? Math.min(...future) : now;
}

function parse(pem: string | undefined): X509Certificate | undefined {
  if (!pem) return undefined;
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

/** Secret `data` (base64) to PEM strings, and back. */
export function decodeSecretData(data: Record<string, string> | undefined): SecretData {
  return Object.fromEntries(
    Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
  ) as SecretData;
}

export function encodeSecretData(data: SecretData): Record<string, string> {
  return Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v as string).toString('base64')]),
  );
}
