/**
 * Clusters from credential Secrets, the Go original's primary source
 * (clustergateway_types_secret.go): one Secret per cluster in the secret
 * namespace, named after the cluster, labelled with
 * `cluster.core.oam.dev/cluster-credential-type`.
 *
 * parseClusterSecret never throws and never drops a Secret: whatever is
 * wrong with it becomes an endpoint or credential problem, so the cluster
 * is listed with a clear reason instead of silently missing (the original
 * logged a warning and skipped it).
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import type { ExecConfig } from '../../../shared/kube/exec-credential.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import type { ClusterHealth, Credential, EndpointType } from './cluster.ts';
import { parseResourceVersion, probeFromAnnotations } from './health-precedence.ts';
import {
  annotationHealthy,
  annotationHealthyReason,
  labelCredentialType,
  labelEndpointType,
} from './keys.ts';
import { publicAnnotations } from './metadata.ts';
import { isPemCertificate, parseEndpointAddress, parseGoBool, parseProxyUrl } from './parse-util.ts';

export interface SecretObject extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

/**
 * What one credential Secret says about its cluster. Endpoint parts are kept
 * apart (address, CA, proxy) because with OCM integration the address and CA
 * may come from the ManagedCluster instead (see merge.ts); each part carries
 * its own problem.
 */
export interface SecretClusterInfo {
  name: string;
  /** For messages that point the admin at the Secret. */
  namespace: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
  /** Declared by the endpoint-type label; Const when absent. */
  endpointType: EndpointType;
  endpointTypeProblem?: string;
  /**
   * The Secret names an endpoint (data key `endpoint` is set, valid or not).
   * Then it is the cluster's endpoint, whatever a ManagedCluster says.
   */
  endpointGiven: boolean;
  /** From data key `endpoint`, normalised (https:// added when no scheme is given). */
  address?: string;
  addressProblem?: string;
  /** PEM CA from data key `ca.crt` or `ca`. */
  caBundle?: string;
  caProblem?: string;
  proxyUrl?: string;
  proxyProblem?: string;
  /**
   * The no-credential trust model: a ClusterProxy Secret with no credential-type label and no
   * credential data. The hub holds nothing for the cluster; its agent acts as the caller.
   */
  noCredential?: boolean;
  /** Declared by the credential-type label (normalised), even when the data is incomplete. */
  credentialType?: string;
  credential?: Credential;
  credentialProblem?: string;
  /** The Dynamic credential's plugin (data key exec); the ExecRefresher runs it when enabled. */
  exec?: ExecConfig;
  /** From the status annotations, when present. */
  health?: ClusterHealth;
  /** The prober's verdict recorded on the Secret (health/probe-store.ts). */
  probe?: ClusterHealth;
  /** The Secret's resourceVersion: what the ClusterGateway's own is derived from (clusters/registry.ts). */
  resourceVersion: number;
}

const credentialAliases: Record<string, string> = {
  ServiceAccountToken: 'ServiceAccountToken',
  X509Certificate: 'X509Certificate',
  // docs/local-run.md of the original says X509 although its code only accepts X509Certificate.
  X509: 'X509Certificate',
  Dynamic: 'Dynamic',
};

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const raw = data?.[key];
  if (raw === undefined) return undefined;
  return Buffer.from(raw, 'base64').toString('utf8');
}

export function parseClusterSecret(secret: SecretObject): SecretClusterInfo {
  const meta = secret.metadata ?? {};
  const labels = { ...(meta.labels ?? {}) };
  const annotations = meta.annotations ?? {};
  const data = secret.data;
  const info: SecretClusterInfo = {
    name: meta.name ?? '',
    namespace: meta.namespace ?? '',
    labels,
    annotations: publicAnnotations(annotations),
    creationTimestamp: typeof meta.creationTimestamp === 'string' ? meta.creationTimestamp : '',
    endpointType: 'Const',
    endpointGiven: false,
    resourceVersion: parseResourceVersion(meta.resourceVersion),
  };
  const probe = probeFromAnnotations(annotations);
  if (probe) info.probe = probe;

  const endpointType = labels[labelEndpointType] ?? 'Const';
  if (endpointType === 'Const' || endpointType === 'ClusterProxy') info.endpointType = endpointType;
  else {
    info.endpointTypeProblem = `label ${labelEndpointType}=${JSON.stringify(endpointType)} is not supported (use Const or ClusterProxy)`;
  }

  const endpoint = decode(data, 'endpoint');
  if (endpoint === undefined || !endpoint.trim()) info.addressProblem = 'data key endpoint is missing';
  else {
    info.endpointGiven = true;
    const address = parseEndpointAddress(endpoint, 'data key endpoint');
    if (address.ok) info.address = address.value;
    else info.addressProblem = address.problem;
  }

  const caKey = data?.['ca.crt'] !== undefined ? 'ca.crt' : 'ca';
  const ca = decode(data, caKey);
  if (ca?.trim()) {
    if (isPemCertificate(ca)) info.caBundle = ca;
    else info.caProblem = `data key ${caKey} is not a PEM certificate`;
  }

  const proxy = decode(data, 'proxy-url');
  if (proxy?.trim()) {
    const parsed = parseProxyUrl(proxy, 'data key proxy-url');
    if (parsed.ok) info.proxyUrl = parsed.value;
    else info.proxyProblem = parsed.problem;
  }

  if (
    info.endpointType === 'ClusterProxy' &&
    labels[labelCredentialType] === undefined &&
    !['token', 'tls.crt', 'tls.key', 'exec'].some((key) => data?.[key] !== undefined)
  ) {
    info.noCredential = true;
  } else {
    parseCredential(data, labels[labelCredentialType], info);
  }

  const healthy = annotations[annotationHealthy];
  const reason = annotations[annotationHealthyReason];
  if (healthy !== undefined) {
    const value = parseGoBool(healthy);
    info.health =
      value === undefined
        ? { healthy: false, reason: `invalid ${annotationHealthy} annotation ${JSON.stringify(healthy)}` }
        : { healthy: value, ...(reason ? { reason } : {}) };
  } else if (reason) {
    info.health = { healthy: false, reason };
  }
  return info;
}

function parseCredential(
  data: Record<string, string> | undefined,
  declared: string | undefined,
  info: SecretClusterInfo,
): void {
  if (declared === undefined) {
    info.credentialProblem = `label ${labelCredentialType} is missing`;
    return;
  }
  const type = credentialAliases[declared];
  if (!type) {
    info.credentialType = declared;
    info.credentialProblem = `credential type ${JSON.stringify(declared)} is not supported (use ServiceAccountToken, X509Certificate or Dynamic)`;
    return;
  }
  info.credentialType = type;
  switch (type) {
    case 'ServiceAccountToken': {
      // A token read from a file usually ends with a newline, which would break the header.
      const token = decode(data, 'token')?.trim();
      if (token) info.credential = { type, token };
      else info.credentialProblem = 'credential type ServiceAccountToken needs data key token';
      return;
    }
    case 'X509Certificate': {
      const certificate = decode(data, 'tls.crt');
      const privateKey = decode(data, 'tls.key');
      const missing = [!certificate?.trim() && 'tls.crt', !privateKey?.trim() && 'tls.key'].filter(Boolean);
      if (missing.length || !certificate || !privateKey) {
        info.credentialProblem = `credential type X509Certificate needs data key ${missing.join(' and ')}`;
      } else if (!isPemCertificate(certificate)) {
        info.credentialProblem = 'data key tls.crt is not a PEM certificate';
      } else if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(privateKey)) {
        info.credentialProblem = 'data key tls.key is not a PEM private key';
      } else {
        info.credential = { type, certificate, privateKey };
      }
      return;
    }
    default: {
      info.credential = { type: 'Dynamic' };
      const parsed = parseExecConfig(decode(data, 'exec'));
      if (typeof parsed === 'string') info.credentialProblem = parsed;
      else {
        info.exec = parsed;
        // Replaced by the ExecRefresher when --enable-exec-credentials is on.
        info.credentialProblem = execDisabledProblem;
      }
    }
  }
}

export const execDisabledProblem =
  'exec credentials are disabled: start the gateway with --enable-exec-credentials';

/** The clientcmd ExecConfig in data key exec, or a problem string. */
function parseExecConfig(exec: string | undefined): ExecConfig | string {
  if (!exec?.trim())
    return 'credential type Dynamic needs data key exec (a client.authentication.k8s.io ExecConfig)';
  let config: Partial<Record<keyof ExecConfig, unknown>>;
  try {
    config = JSON.parse(exec);
  } catch {
    return 'data key exec is not valid JSON';
  }
  if (typeof config !== 'object' || config === null) return 'data key exec is not a JSON object';
  const { apiVersion, command, args, env, installHint, provideClusterInfo } = config;
  if (typeof command !== 'string' || !command) return 'data key exec has no command';
  if (apiVersion !== undefined && typeof apiVersion !== 'string')
    return 'data key exec: apiVersion is not a string';
  if (args !== undefined && !(Array.isArray(args) && args.every((a) => typeof a === 'string'))) {
    return 'data key exec: args is not a list of strings';
  }
  const envOk = (e: unknown) =>
    typeof e === 'object' &&
    e !== null &&
    typeof (e as { name?: unknown }).name === 'string' &&
    typeof (e as { value?: unknown }).value === 'string';
  if (env != null && !(Array.isArray(env) && env.every(envOk))) {
    return 'data key exec: env is not a list of {name, value}';
  }
  return {
    command,
    ...(apiVersion ? { apiVersion } : {}),
    ...(args ? { args: args as string[] } : {}),
    ...(env ? { env: env as ExecConfig['env'] } : {}),
    ...(typeof installHint === 'string' ? { installHint } : {}),
    ...(provideClusterInfo === true ? { provideClusterInfo } : {}),
  };
}

/** Receives parsed Secrets; the registry implements it. */
export interface SecretSink {
  /**
   * `version`: the revision of the change (the Secret's resourceVersion, or for a deletion the
   * revision that deleted it), from informer.resourceVersion.
   */
  setSecret(name: string, info: SecretClusterInfo | undefined, version: number): void;
  /** The source has applied every change up to `resourceVersion` (see Informer's onSync). */
  advance?(resourceVersion: string): void;
}

export interface SecretSourceOptions {
  namespace: string;
  informer?: Partial<Omit<InformerOptions, 'path' | 'labelSelector'>>;
}

/** Label selector of the no-credential trust model's Secrets: ClusterProxy, no credential type. */
export const noCredentialSelector = `${labelEndpointType}=ClusterProxy,!${labelCredentialType}`;

/**
 * Watches credential Secrets and feeds them, parsed, to a sink: those with a credential-type label
 * (the original's selector), and the no-credential trust model's (a ClusterProxy Secret without one,
 * agent/hub-credential.ts). A label selector cannot say "either", hence two informers over disjoint
 * sets; a Secret moving from one to the other is deleted from the sink only when neither has it.
 */
export class SecretSource {
  readonly informer: Informer<SecretObject>;
  readonly noCredential: Informer<SecretObject>;

  constructor(client: InformerClient, options: SecretSourceOptions, sink: SecretSink) {
    const path = `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/secrets`;
    // LIST filters on Exists, as the original does.
    this.informer = new Informer<SecretObject>(client, {
      ...options.informer,
      path,
      labelSelector: labelCredentialType,
    });
    this.noCredential = new Informer<SecretObject>(client, {
      ...options.informer,
      path,
      labelSelector: noCredentialSelector,
    });
    const both = [this.informer, this.noCredential];
    for (const informer of both) {
      const other = informer === this.informer ? this.noCredential : this.informer;
      const version = () => parseResourceVersion(informer.resourceVersion);
      const update = (secret: SecretObject) => {
        const info = parseClusterSecret(secret);
        sink.setSecret(info.name, info, version());
      };
      informer.on({
        onAdd: update,
        onUpdate: (_old, secret) => update(secret),
        onDelete: (secret) => {
          const key = `${secret.metadata?.namespace}/${secret.metadata?.name}`;
          const still = other.get(key);
          if (still) update(still);
          else sink.setSecret(secret.metadata?.name ?? '', undefined, version());
        },
        onSync: (resourceVersion) => sink.advance?.(resourceVersion),
      });
    }
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced && this.noCredential.hasSynced;
  }

  async start(): Promise<void> {
    await Promise.all([this.informer.start(), this.noCredential.start()]);
  }

  stop(): void {
    this.informer.stop();
    this.noCredential.stop();
  }
}
