/**
 * This replica's peer certificate (peer-identity.ts), from the hub's `kubernetes.io/kube-apiserver-client`
 * signer through the CertificateSigningRequest API:
 *
 * - the key is generated here, in memory (ECDSA P-256), and never written anywhere: no file, no Secret;
 * - the request asks for CN `cluster-gateway-peer:<namespace>:<replica>` (no O: no group on the hub),
 *   client auth only, for a day; the hub fills in who asked (this pod's ServiceAccount and, from its
 *   bound token, the pod's name), and the addon manager approves only when that is the gateway's
 *   ServiceAccount from the pod the CN names (manager/addon/gateway-deploy/peer-certificates.ts);
 * - the signed certificate is polled for (GET, with backoff and a deadline; Denied or Failed end the
 *   wait with the hub's reason), and renewed at two thirds of its life, the current one kept meanwhile.
 */
import 'reflect-metadata';
import { webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import type { KubeClient, KubeObject } from '../../../shared/kube/client.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { peerCommonName } from './peer-identity.ts';
import type { PeerTls } from './peers.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export const csrPath = '/apis/certificates.k8s.io/v1/certificatesigningrequests';
export const kubeApiserverClientSigner = 'kubernetes.io/kube-apiserver-client';
/** On every peer CSR: the addon manager judges these (and only these) as gateway peer requests. */
export const gatewayPeerCsrLabel = 'cluster.core.oam.dev/gateway-peer';
/** Requested validity: a day (the manager refuses more than its bound, peer-certificates.ts). */
export const peerCertificateSeconds = 24 * 3600;

const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface CertificateSigningRequest extends KubeObject {
  metadata: { name: string; labels?: Record<string, string>; [key: string]: unknown };
  spec: {
    request: string;
    signerName: string;
    usages?: string[];
    expirationSeconds?: number;
    username?: string;
    groups?: string[];
    extra?: Record<string, string[]>;
  };
  status?: {
    certificate?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** A fresh key and the PEM PKCS#10 request for `replica`'s peer certificate. */
export async function createPeerRequest(
  namespace: string,
  replica: string,
): Promise<{ request: string; key: string }> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${peerCommonName(namespace, replica)}`,
    keys,
    signingAlgorithm: algorithm,
  });
  const der = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { request: csr.toString('pem'), key: x509.PemConverter.encode(der, 'PRIVATE KEY') };
}

/** The CertificateSigningRequest object for `request` (PEM). */
export function peerCsrObject(request: string, expirationSeconds = peerCertificateSeconds): KubeObject {
  return {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: { generateName: 'cluster-gateway-peer-', labels: { [gatewayPeerCsrLabel]: 'true' } },
    spec: {
      request: Buffer.from(request).toString('base64'),
      signerName: kubeApiserverClientSigner,
      usages: ['digital signature', 'client auth'],
      expirationSeconds,
    },
  };
}

/** What a polled CSR says: issued (PEM), refused (why), or not yet. */
export function csrOutcome(
  csr: CertificateSigningRequest,
): { issued: string } | { refused: string } | undefined {
  for (const c of csr.status?.conditions ?? []) {
    if ((c.type === 'Denied' || c.type === 'Failed') && c.status !== 'False') {
      return { refused: `${c.type}${c.reason ? ` (${c.reason})` : ''}${c.message ? `: ${c.message}` : ''}` };
    }
  }
  const certificate = csr.status?.certificate;
  return certificate ? { issued: Buffer.from(certificate, 'base64').toString('utf8') } : undefined;
}

/** When to ask for the next certificate: two thirds into the life of `certPem`. */
export function renewalTime(certPem: string): Date {
  const cert = new X509Certificate(certPem);
  const from = cert.validFromDate.getTime();
  const to = cert.validToDate.getTime();
  return new Date(from + ((to - from) * 2) / 3);
}

export type PeerCertificateHub = Pick<KubeClient, 'create' | 'get'>;

export interface PeerCertificateOptions {
  hub: PeerCertificateHub;
  namespace: string;
  /** This replica's name: its pod's name (the manager compares them). */
  replica: string;
  /** Every certificate obtained, the first one and each renewal. */
  onCertificate: (pair: PeerTls) => void;
  log: {
    info(fields: object, message: string): void;
    warn(fields: object, message: string): void;
  };
  expirationSeconds?: number;
  /** How long one request may wait for approval and signing (default 5 min). */
  issueTimeoutMs?: number;
  /** First poll interval, doubled up to maxPollMs (defaults 250 ms, 5 s). */
  pollMs?: number;
  maxPollMs?: number;
  /** After a failed attempt, the next starts this much later, doubled up to 5 min (default 5 s). */
  retryMs?: number;
}

/** Obtains this replica's peer certificate and keeps it renewed. */
export class PeerCertificateSource {
  readonly #o: PeerCertificateOptions;
  readonly #abort = new AbortController();
  #current: PeerTls | undefined;

  constructor(options: PeerCertificateOptions) {
    this.#o = options;
  }

  get current(): PeerTls | undefined {
    return this.#current;
  }

  start(): void {
    void this.#run();
  }

  stop(): void {
    this.#abort.abort();
  }

  /** One certificate: a new key, a CSR, and its signed certificate. */
  async obtain(): Promise<PeerTls> {
    const { hub, namespace, replica } = this.#o;
    const { request, key } = await createPeerRequest(namespace, replica);
    const created = await hub.create<CertificateSigningRequest>(
      csrPath,
      peerCsrObject(request, this.#o.expirationSeconds),
    );
    const name = created.metadata.name;
    const deadline = Date.now() + (this.#o.issueTimeoutMs ?? 300_000);
    let wait = this.#o.pollMs ?? 250;
    for (let csr = created; ; ) {
      const outcome = csrOutcome(csr);
      if (outcome && 'refused' in outcome) {
        throw new Error(`CertificateSigningRequest ${name} ${outcome.refused}`);
      }
      if (outcome) return { cert: outcome.issued, key };
      if (Date.now() + wait > deadline) {
        throw new Error(
          `CertificateSigningRequest ${name} not signed within ${Math.round((this.#o.issueTimeoutMs ?? 300_000) / 1000)} s (is the addon manager running?)`,
        );
      }
      await this.#sleep(wait);
      wait = Math.min(wait * 2, this.#o.maxPollMs ?? 5_000);
      try {
        csr = await hub.get<CertificateSigningRequest>(`${csrPath}/${encodeURIComponent(name)}`);
      } catch (err) {
        if (err instanceof StatusError && err.code === 404) {
          throw new Error(`CertificateSigningRequest ${name} was deleted before it was signed`);
        }
        throw err;
      }
    }
  }

  async #run(): Promise<void> {
    let retry = this.#o.retryMs ?? 5_000;
    while (!this.#abort.signal.aborted) {
      try {
        const pair = await this.obtain();
        if (this.#abort.signal.aborted) return;
        this.#current = pair;
        this.#o.onCertificate(pair);
        const renewAt = renewalTime(pair.cert);
        this.#o.log.info(
          { replica: this.#o.replica, renewAt: renewAt.toISOString() },
          'tunnel peer certificate issued by the hub',
        );
        retry = this.#o.retryMs ?? 5_000;
        await this.#sleep(Math.max(0, renewAt.getTime() - Date.now()));
      } catch (err) {
        if (this.#abort.signal.aborted) return;
        this.#o.log.warn(
          { replica: this.#o.replica, err: (err as Error).message, retryInMs: retry },
          this.#current
            ? 'cannot renew the tunnel peer certificate; keeping the current one and retrying'
            : 'cannot obtain a tunnel peer certificate; the peer port refuses every replica until then',
        );
        await this.#sleep(retry);
        retry = Math.min(retry * 2, 300_000);
      }
    }
  }

  /** Resolves after `ms`, or at once when stopped (the loop then ends). */
  #sleep(ms: number): Promise<void> {
    const signal = this.#abort.signal;
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      // Timers beyond 2^31-1 ms fire at once: a long certificate is renewed by steps.
      const timer = setTimeout(done, Math.min(ms, 2 ** 31 - 1));
      timer.unref();
      function done() {
        signal.removeEventListener('abort', done);
        clearTimeout(timer);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
