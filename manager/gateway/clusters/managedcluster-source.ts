/**
 * Clusters from OCM ManagedClusters (the original's --ocm-integration):
 * the address and CA come from spec.managedClusterClientConfigs[0], the
 * credentials still from the same-named Secret (merged in merge.ts), and
 * health from the ManagedClusterConditionAvailable condition.
 *
 * A ManagedCluster's spec is not the hub admin's word: the bootstrap
 * identity handed to every joining cluster may create one under any name,
 * and a spoke's registration agent (or anyone with `update managedclusters`)
 * may rewrite its client configs. Unlike the original, which took the URL
 * of any ManagedCluster, it is only *trusted* once the hub accepted it
 * (`spec.hubAcceptsClient`, which OCM guards with the managedclusters/accept
 * permission) and it joined (`ManagedClusterJoined=True`, set by the hub's
 * registration controller after signing the agent's CSR), and its URL is
 * used only with https: the gateway sends the cluster's credential there.
 * An untrusted ManagedCluster contributes nothing (no address, CA, labels
 * or health); `distrust` says why, for the cluster's problem.
 *
 * A ManagedCluster's annotations are not the hub admin's word either: the
 * klusterlet's ClusterRole allows `update` on its own ManagedCluster, and
 * OCM's ManagedCluster webhook checks only the accept field, the name, the
 * client config URLs and the cluster-set label (registration, OCM v1.3.1).
 * So the settings the gateway reads from annotations are screened here
 * (screenSettings): none that could send hub callers' identities somewhere,
 * choose among the hub admins' configurations, or pass for the prober's
 * verdict is taken from a ManagedCluster. What was ignored, and why, shows
 * on the ClusterGateway (keys.ts annotationIgnoredSettings).
 *
 * The ManagedCluster CRD may not be installed (plain KubeVela setups); the
 * informer then reports an empty, synced collection and keeps checking, so
 * the integration starts working as soon as OCM is installed.
 */
import type { KubeObject } from '../../../shared/kube/client.ts';
import { Informer, type InformerClient, type InformerOptions } from '../../../shared/kube/informer.ts';
import {
  CONFIGURATION_KIND,
  CONFIGURATION_REFERENCE_ANNOTATION,
  INLINE_CONFIGURATION_ANNOTATION,
  InvalidConfigurationError,
} from '../identity/configuration.ts';
import { parseConfiguration } from '../identity/parse.ts';
import type { ClusterHealth } from './cluster.ts';
import { parseResourceVersion, probeFromAnnotations } from './health-precedence.ts';
import {
  annotationIgnoredSettings,
  annotationProbedHealthy,
  annotationProbedReason,
  annotationProbedSignature,
} from './keys.ts';
import { publicAnnotations } from './metadata.ts';
import { isPemCertificate, parseEndpointAddress } from './parse-util.ts';
import { verdictSignatureValid } from './verdict-signature.ts';

export const managedClusterPath = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
export const availableCondition = 'ManagedClusterConditionAvailable';
export const joinedCondition = 'ManagedClusterJoined';

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

export interface ManagedClusterObject extends KubeObject {
  spec?: {
    hubAcceptsClient?: boolean;
    managedClusterClientConfigs?: Array<{ url?: string; caBundle?: string }>;
  };
  status?: { conditions?: Condition[] };
}

export interface ManagedClusterInfo {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
  /** Why this ManagedCluster is not trusted (not accepted or not joined); then nothing below is used. */
  distrust?: string;
  /** Set only for a trusted ManagedCluster whose URL is https. */
  address?: string;
  addressProblem?: string;
  /** PEM, decoded from the base64 caBundle. */
  caBundle?: string;
  health: ClusterHealth;
  /**
   * The prober's verdict recorded on the ManagedCluster (a cluster without a credential Secret); only
   * when it carries a valid signature (verdict-signature.ts).
   */
  probe?: ClusterHealth;
  /** Annotations not used because the managed cluster may have written them, each with why. */
  ignoredSettings?: string[];
  /** The ManagedCluster's resourceVersion (clusters/registry.ts derives the ClusterGateway's from it). */
  resourceVersion: number;
}

export interface ManagedClusterParseOptions {
  /** The key prober verdicts on ManagedClusters are signed with; without one, none is trusted. */
  verdictKey?: Uint8Array | undefined;
}

export function parseManagedCluster(
  cluster: ManagedClusterObject,
  options: ManagedClusterParseOptions = {},
): ManagedClusterInfo {
  const meta = cluster.metadata ?? {};
  const name = meta.name ?? '';
  const screened = screenSettings(
    name,
    typeof meta.uid === 'string' ? meta.uid : '',
    meta.annotations ?? {},
    options.verdictKey,
  );
  const info: ManagedClusterInfo = {
    name,
    labels: { ...(meta.labels ?? {}) },
    annotations: publicAnnotations(screened.annotations),
    creationTimestamp: typeof meta.creationTimestamp === 'string' ? meta.creationTimestamp : '',
    health: managedClusterHealth(cluster.status?.conditions),
    resourceVersion: parseResourceVersion(meta.resourceVersion),
  };
  if (screened.probe) info.probe = screened.probe;
  if (screened.ignored.length) info.ignoredSettings = screened.ignored;
  const distrust = managedClusterDistrust(cluster);
  if (distrust) {
    info.distrust = distrust;
    return info;
  }
  const config = cluster.spec?.managedClusterClientConfigs?.[0];
  const source = 'ManagedCluster spec.managedClusterClientConfigs[0].url';
  if (!config?.url) {
    info.addressProblem = 'ManagedCluster has no spec.managedClusterClientConfigs[0].url';
  } else {
    const address = parseEndpointAddress(config.url, source);
    if (!address.ok) info.addressProblem = address.problem;
    else if (!address.value.toLowerCase().startsWith('https://')) {
      // Plain http would hand the cluster's bearer token to whoever is on the path.
      info.addressProblem = `${source} ${JSON.stringify(config.url.trim())} is not used: a ManagedCluster's URL must be https://`;
    } else info.address = address.value;
  }
  if (info.address && config?.caBundle) {
    const pem = Buffer.from(config.caBundle, 'base64').toString('utf8');
    // An unusable CA is ignored here; the merge falls back to the Secret's CA or the system roots.
    if (isPemCertificate(pem)) info.caBundle = pem;
  }
  return info;
}

interface Screened {
  annotations: Record<string, string>;
  probe?: ClusterHealth;
  ignored: string[];
}

/**
 * The ManagedCluster's annotations without the settings a managed cluster must not choose:
 * - the name reference to a ClusterGatewayProxyConfiguration (this project's own annotation, so no
 *   compatibility is lost): the hub admins' configurations are for the hub admins to assign, and one
 *   written for another cluster may hand out the cluster credential or call an exchange service;
 * - the Go original's inline configuration when it has an ExternalIdentityExchanger rule: that rule's
 *   URL receives every matching hub caller's name, groups, uid and extra. The whole configuration is
 *   ignored, not just the rule: without it a lower rule (a privileged one, say) would match in its
 *   place, which its author never meant. Other inline configurations keep working as in the original:
 *   they only decide who requests to this very cluster run as, there. An invalid one is left to the
 *   configuration store, which refuses requests to the cluster until it is fixed (it never comes into
 *   force);
 * - the prober's verdict unless it carries a valid signature (verdict-signature.ts).
 * An operator's health mark (`status.cluster.core.oam.dev/healthy`) is kept: a cluster marking itself
 * unhealthy only takes itself out of service, and a healthy mark never outranks the prober's verdict
 * (clusters/health-precedence.ts). The one thing that cannot be checked here is a klusterlet removing
 * an operator's mark; an admission policy on the hub can refuse that (docs/security.md).
 */
function screenSettings(
  name: string,
  uid: string,
  source: Record<string, string>,
  verdictKey: Uint8Array | undefined,
): Screened {
  const annotations = { ...source };
  const ignored: string[] = [];
  const where = `on ManagedCluster ${JSON.stringify(name)}`;
  const writable = 'its klusterlet may write the ManagedCluster';
  delete annotations[annotationIgnoredSettings];

  if (annotations[CONFIGURATION_REFERENCE_ANNOTATION] !== undefined) {
    delete annotations[CONFIGURATION_REFERENCE_ANNOTATION];
    ignored.push(
      `annotation ${CONFIGURATION_REFERENCE_ANNOTATION} ${where} is ignored: ${writable}, so it may not choose which ${CONFIGURATION_KIND} applies to it; put the annotation on the cluster's credential Secret, or match the cluster with source.cluster in the global configuration`,
    );
  }

  const inline = annotations[INLINE_CONFIGURATION_ANNOTATION];
  if (inline !== undefined) {
    const external = externalRuleOf(inline, `annotation ${INLINE_CONFIGURATION_ANNOTATION} ${where}`);
    if (external !== undefined) {
      delete annotations[INLINE_CONFIGURATION_ANNOTATION];
      ignored.push(
        `annotation ${INLINE_CONFIGURATION_ANNOTATION} ${where} is ignored: its rule ${JSON.stringify(external.slice(0, 63))} is an ExternalIdentityExchanger, which sends hub callers' identities to a URL, and ${writable}; exchange services are taken only from ${CONFIGURATION_KIND} objects, the --cluster-gateway-proxy-config file or the credential Secret's annotation`,
      );
    }
  }

  let probe: ClusterHealth | undefined;
  const probed = annotations[annotationProbedHealthy];
  if (probed !== undefined || annotations[annotationProbedReason] !== undefined) {
    const verdict = { uid, name, healthy: probed ?? '', reason: annotations[annotationProbedReason] ?? '' };
    if (verdictSignatureValid(verdictKey, verdict, annotations[annotationProbedSignature])) {
      probe = probeFromAnnotations(annotations);
    } else {
      delete annotations[annotationProbedHealthy];
      delete annotations[annotationProbedReason];
      ignored.push(
        `annotations ${annotationProbedHealthy} and ${annotationProbedReason} ${where} are ignored: they do not carry this gateway's signature (${annotationProbedSignature}), and ${writable}`,
      );
    }
  }
  delete annotations[annotationProbedSignature];
  return { annotations, ...(probe ? { probe } : {}), ignored };
}

/** The name of the first ExternalIdentityExchanger rule of a valid configuration; undefined otherwise. */
function externalRuleOf(text: string, origin: string): string | undefined {
  try {
    return parseConfiguration(text, origin).rules.find((r) => r.type === 'ExternalIdentityExchanger')?.name;
  } catch (err) {
    if (err instanceof InvalidConfigurationError) return undefined;
    throw err;
  }
}

/**
 * undefined when the hub accepted the ManagedCluster and it joined;
 * otherwise why its spec must not be believed.
 */
export function managedClusterDistrust(cluster: ManagedClusterObject): string | undefined {
  if (cluster.spec?.hubAcceptsClient !== true) {
    return 'ManagedCluster is not accepted by the hub (spec.hubAcceptsClient is not true), so its URL and CA are ignored';
  }
  const joined = cluster.status?.conditions?.find((c) => c.type === joinedCondition);
  if (joined?.status !== 'True') {
    return `ManagedCluster has not joined (${joinedCondition} is ${joined?.status ?? 'missing'}), so its URL and CA are ignored`;
  }
  return undefined;
}

/** The Available condition of a trusted ManagedCluster; undefined for an untrusted one. */
export function trustedManagedClusterHealth(cluster: ManagedClusterObject): ClusterHealth | undefined {
  return managedClusterDistrust(cluster) ? undefined : managedClusterHealth(cluster.status?.conditions);
}

/** Available=True is healthy; anything else is not, with the condition's reason. */
export function managedClusterHealth(conditions: Condition[] | undefined): ClusterHealth {
  const available = conditions?.find((c) => c.type === availableCondition);
  if (!available) return { healthy: false, reason: `ManagedCluster has no ${availableCondition} condition` };
  if (available.status === 'True')
    return { healthy: true, ...(available.reason ? { reason: available.reason } : {}) };
  const reason = available.reason || `${availableCondition}=${available.status ?? 'Unknown'}`;
  return { healthy: false, reason: available.message ? `${reason}: ${available.message}` : reason };
}

/** Receives parsed ManagedClusters; the registry implements it. */
export interface ManagedClusterSink {
  /** `version` as for SecretSink.setSecret. */
  setManagedCluster(name: string, info: ManagedClusterInfo | undefined, version: number): void;
  advance?(resourceVersion: string): void;
}

export interface ManagedClusterSourceOptions extends ManagedClusterParseOptions {
  informer?: Partial<Omit<InformerOptions, 'path'>>;
}

export class ManagedClusterSource {
  readonly informer: Informer<ManagedClusterObject>;

  constructor(client: InformerClient, options: ManagedClusterSourceOptions, sink: ManagedClusterSink) {
    this.informer = new Informer<ManagedClusterObject>(client, {
      ...options.informer,
      path: managedClusterPath,
    });
    const version = () => parseResourceVersion(this.informer.resourceVersion);
    const update = (cluster: ManagedClusterObject) => {
      const info = parseManagedCluster(cluster, { verdictKey: options.verdictKey });
      sink.setManagedCluster(info.name, info, version());
    };
    this.informer.on({
      onAdd: update,
      onUpdate: (_old, cluster) => update(cluster),
      onDelete: (cluster) => sink.setManagedCluster(cluster.metadata?.name ?? '', undefined, version()),
      onSync: (resourceVersion) => sink.advance?.(resourceVersion),
    });
  }

  get hasSynced(): boolean {
    return this.informer.hasSynced;
  }

  /** True while the ManagedCluster CRD is not installed. */
  get absent(): boolean {
    return this.informer.absent;
  }

  start(): Promise<void> {
    return this.informer.start();
  }

  stop(): void {
    this.informer.stop();
  }
}
