/**
 * The gateway's CA and serving certificate, kept in one Secret
 * (`<gateway>-tls`: ca.crt, ca.key, ca-previous.crt, tls.crt, tls.key, and
 * ca-bundle.crt, the current and previous CA, the APIService's caBundle while a CA rotates),
 * with one more entry that is no certificate: verdict.key, the key every replica signs
 * the prober's verdicts on ManagedClusters with (--probe-verdict-key-file). It is made
 * once, when missing, and carried over unchanged through every renewal and CA rotation:
 * replicas started before and after one must hold the same key, or each would take the
 * others' verdicts for forgeries. The Secret sits in the manager's namespace, out of any
 * klusterlet's reach.
 * The approach of ../webhook-certificate.ts, whose rules it reuses
 * (repairNeeded, caBundleOf): renew the serving certificate with a third of
 * its life left (same CA, so the APIService caBundle does not change), and
 * the CA with a third of its life left, keeping the old CA in the bundle
 * until it expires; with a maintenance window, at its next tick but never
 * later than a sixth of the life left (rotation-schedule.ts). The gateway
 * reloads a renewed certificate from its mounted files, and the aggregator
 * trusts both CAs meanwhile, so a rotation drops no request.
 *
 * Pure apart from key generation: the controller reads the Secret from its
 * informer and writes the result with server-side apply (it is the only
 * writer, behind leader election), so no read-modify-write race exists.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { createCertificateAuthority, loadCertificateAuthority } from '../../../shared/pki.ts';
import { minProbeVerdictKeyBytes } from '../../gateway/options.ts';
import {
  type SecretData as CertificateData,
  caBundleOf,
  type Renewal,
  repairNeeded,
} from '../core/webhook-certificate.ts';
import { verdictKeyFile } from './names.ts';
import {
  type Lifetime,
  type RotationSchedule,
  type RotationTime,
  rotationTime,
} from './rotation-schedule.ts';

export type { Renewal };

/** The Secret's entries: the certificates, and the verdict key (hex text, so it survives the UTF-8 decoding below). */
export type SecretData = CertificateData & { [verdictKeyFile]?: string };

export interface CertificateSettings {
  /** DNS names and addresses the serving certificate must name. */
  hosts: string[];
  /** The certificates' common names derive from it. */
  subject: string;
  caValidForMs: number;
  servingValidForMs: number;
  /** The maintenance window for rotations; none: rotate when due. */
  schedule?: RotationSchedule;
}

export interface CertificateState {
  data: SecretData;
  /** What was made anew ('none': `data` is what the Secret held). */
  renewal: Renewal;
  /** Why, for the log: 'repair' (missing, unreadable, not naming every host) or the rotation's reason. */
  reason: RotationTime['reason'] | 'repair' | 'none';
  /** PEM CAs the APIService must trust. */
  caBundle: string;
  /** verdict.key was missing (or too short for the gateway) and was made now. */
  verdictKeyGenerated: boolean;
  /** When to look again: the next rotation, or the previous CA's expiry (it then leaves the bundle). */
  recheckAt: number;
}

/**
 * How long before now a certificate is valid already, for clocks behind the manager's: an hour, less for a
 * short validity (a tenth of it), where an hour would be most of the life that rotation is measured on.
 */
export function backdateMs(validForMs: number): number {
  return Math.min(3600_000, validForMs / 10);
}

export async function servingCertificate(
  current: SecretData,
  settings: CertificateSettings,
  now: number,
): Promise<CertificateState> {
  const plan = planRotation(current, settings, now);
  const certificates = plan.renewal === 'none' ? current : await issue(current, plan.renewal, settings);
  const verdictKey = verdictKeyOf(current);
  const data = { ...certificates, [verdictKeyFile]: verdictKey.key };
  return {
    data,
    verdictKeyGenerated: verdictKey.generated,
    renewal: plan.renewal,
    reason: plan.reason,
    caBundle: caBundleOf(data, now),
    recheckAt: recheckAt(data, settings, now),
  };
}

/**
 * The verdict key the Secret holds, else a new one: 32 random bytes as 64 hex characters (the gateway
 * takes the file's bytes as the key). Regenerated only when missing or shorter than the gateway accepts,
 * since an unusable key would stop every replica at start.
 */
export function verdictKeyOf(current: SecretData): { key: string; generated: boolean } {
  const held = current[verdictKeyFile];
  if (held && Buffer.byteLength(held) >= minProbeVerdictKeyBytes) return { key: held, generated: false };
  return { key: randomBytes(32).toString('hex'), generated: true };
}

/** What to renew now, and why. Pure. */
export function planRotation(
  data: SecretData,
  settings: CertificateSettings,
  now: number,
): { renewal: Renewal; reason: CertificateState['reason'] } {
  const repair = repairNeeded(data, settings.hosts);
  if (repair === 'ca') return { renewal: 'ca', reason: 'repair' };
  const ca = rotationOf(data['ca.crt'], settings.caValidForMs, settings, now);
  if (ca && ca.at <= now) return { renewal: 'ca', reason: ca.reason };
  // The CA bundle is written with every certificate; a Secret from before it existed gets one with a new leaf.
  if (repair === 'serving' || !data['ca-bundle.crt']) return { renewal: 'serving', reason: 'repair' };
  const leaf = rotationOf(data['tls.crt'], settings.servingValidForMs, settings, now);
  if (leaf && leaf.at <= now) return { renewal: 'serving', reason: leaf.reason };
  return { renewal: 'none', reason: 'none' };
}

async function issue(
  current: SecretData,
  renewal: Renewal,
  settings: CertificateSettings,
): Promise<SecretData> {
  const next: SecretData = {};
  let ca: Awaited<ReturnType<typeof createCertificateAuthority>>;
  if (renewal === 'ca') {
    ca = await createCertificateAuthority(
      `${settings.subject}-ca`,
      settings.caValidForMs,
      backdateMs(settings.caValidForMs),
    );
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
    // Server only: the aggregator is its one client. It is no peer credential (a Secret reader could mint one
    // with ca.key): replicas prove themselves with the hub signer's certificates (tunnel/peer-certificate.ts).
    usage: 'server',
    validForMs: settings.servingValidForMs,
    backdateMs: backdateMs(settings.servingValidForMs),
  });
  const bundle = [ca.cert, next['ca-previous.crt']].filter((pem): pem is string => !!pem);
  return {
    ...next,
    'ca.crt': ca.cert,
    'ca.key': ca.key,
    'tls.crt': leaf.cert,
    'tls.key': leaf.key,
    'ca-bundle.crt': bundle.map((pem) => `${pem.trimEnd()}\n`).join(''),
  };
}

/** The earliest of: the CA's and the leaf's rotation times (rotation-schedule.ts), the previous CA's expiry. */
export function recheckAt(data: SecretData, settings: CertificateSettings, now: number): number {
  const times: number[] = [];
  for (const [key, validity] of [
    ['ca.crt', settings.caValidForMs],
    ['tls.crt', settings.servingValidForMs],
  ] as const) {
    const rotation = rotationOf(data[key], validity, settings, now);
    if (rotation) times.push(rotation.at);
  }
  const previous = parse(data['ca-previous.crt']);
  if (previous) times.push(Date.parse(previous.validTo));
  const future = times.filter((t) => t > now);
  return future.length > 0 ? Math.min(...future) : now;
}

function rotationOf(
  pem: string | undefined,
  validForMs: number,
  settings: CertificateSettings,
  now: number,
): RotationTime | undefined {
  const cert = parse(pem);
  return cert
    ? rotationTime(lifetimeOf(cert), validForMs, backdateMs(validForMs), now, settings.schedule)
    : undefined;
}

function lifetimeOf(cert: X509Certificate): Lifetime {
  return { notBefore: Date.parse(cert.validFrom), notAfter: Date.parse(cert.validTo) };
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
