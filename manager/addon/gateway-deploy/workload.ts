/**
 * The gateway's workload as pure builders: its ServiceAccount, Deployment,
 * Service and PodDisruptionBudget. The pod runs with the chart's security
 * context (non-root, read-only root filesystem, no privilege escalation, no
 * capabilities, seccomp RuntimeDefault), spreads its replicas over nodes,
 * and never loses a serving replica in a rollout (maxUnavailable 0).
 */
import { containerEnv, expandContainerEnv } from '../../../shared/cli-flags.ts';
import type { KubeObject } from '../../../shared/kube/client.ts';
import { type GatewayFlagValues, renderGatewayArgs } from '../../gateway/options.ts';
import { applyPodSettings } from '../core/pod-settings.ts';
import {
  type GatewayNames,
  gatewayObjectLabels,
  servingCertificateDir,
  tunnelPeerPort,
  verdictKeyFile,
} from './names.ts';
import { checkAsGateway, type GatewayDeployOptions } from './options.ts';

/** What the builders need beyond the names: the options and the addon whose agents may attach. */
export interface GatewaySpec {
  names: GatewayNames;
  options: Omit<GatewayDeployOptions, 'enabled' | 'ownerClusterRole' | 'name' | 'credentialNamespace'>;
  addonName: string;
}

/**
 * Node flags of the gateway process.
 * - `--max-semi-space-size=2`: V8's young generation grows to 16 MB semi-spaces under the allocation
 *   of large proxied bodies and keeps them. At 2 MB the gateway's RSS after a LIST and 10 MB
 *   benchmark is about 50 MB lower, for no measurable CPU (docs/benchmarks-log.md, "Memory under load").
 * - `--expose-gc`: the memory trimmer (manager/gateway/memory-trim.ts) needs the one collection that
 *   empties V8's page pool after a burst. main.ts takes it off the global object at startup.
 */
export const gatewayNodeFlags = ['--max-semi-space-size=2', '--expose-gc'];

/** Where the image keeps Node's compile cache (filled at build time; read-only at run time is fine). */
const compileCache = '/app/.cache/node-compile-cache';

export function labelsOf(names: GatewayNames): Record<string, string> {
  return { ...gatewayObjectLabels, ...names.podSelector };
}

function meta(names: GatewayNames, name = names.name) {
  return { name, namespace: names.namespace, labels: labelsOf(names) };
}

export function serviceAccount({ names }: GatewaySpec): KubeObject {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(names) };
}

/**
 * The gateway's own flags first, rendered through the gateway's flag table; the user's (--gateway-args)
 * after, so that they win where both set one.
 */
export function gatewayArgs(spec: GatewaySpec): string[] {
  const { names, options, addonName } = spec;
  return [
    ...renderGatewayArgs({
      'secure-port': options.port,
      'bind-address': '0.0.0.0',
      'tls-cert-file': `${servingCertificateDir}/tls.crt`,
      'tls-private-key-file': `${servingCertificateDir}/tls.key`,
      'secret-namespace': names.credentialNamespace,
      'tunnel-addon-name': addonName,
      // The same Secret entry in every replica, kept through certificate rotations (serving-certificate.ts).
      'probe-verdict-key-file': `${servingCertificateDir}/${verdictKeyFile}`,
      ...peerFlags(spec),
    }),
    ...options.args,
  ];
}

/**
 * The container's environment variables that its args refer to as `$(NAME)`, with a value of the kind
 * the kubelet puts there (the pod's name and IP are known only once it runs).
 */
const sampleFieldRefs: Record<string, string> = { POD_NAME: 'cluster-gateway-0', POD_IP: '10.0.0.1' };

/**
 * The gateway's whole command line, as its pods would get it, checked by the gateway's own parser:
 * the manager calls this at start, so that --gateway-args that the gateway would refuse in
 * combination with the manager's flags (e.g. a --tunnel-lease-duration out of range, checked only
 * with tunnel sharing on) stop the manager rather than every gateway pod.
 */
export function checkGatewayCommandLine(spec: GatewaySpec): void {
  checkAsGateway(expandContainerEnv(gatewayArgs(spec), sampleFieldRefs));
}

/** Whether the gateway accepts agent tunnels: on unless --gateway-args turns --agent-tunnels off (the last one wins). */
export function agentTunnelsOn({ options }: Pick<GatewaySpec, 'options'>): boolean {
  const last = options.args.findLast((a) => a === '--agent-tunnels' || a.startsWith('--agent-tunnels='));
  return last !== '--agent-tunnels=false';
}

/**
 * Tunnel sharing between replicas: an agent's tunnel lands on one replica, and the others forward its
 * cluster's requests there (tunnel/replicas.ts), found through a Lease per cluster in the gateway's
 * namespace. Each replica proves itself on the peer port with a client certificate of the hub's
 * kube-apiserver-client signer, CN `cluster-gateway-peer:<namespace>:<pod name>`, requested with a key
 * that never leaves the pod's memory and approved by this manager for the gateway's ServiceAccount
 * from that very pod only (peer-certificates.ts). The serving pair is not a peer credential: whoever
 * may read the gateway's TLS Secret (the CA key included) cannot pass for a replica. With one replica
 * it costs a Lease write per tunnel, a CSR a day and an idle listener, and a scale-up needs no restart.
 */
function peerFlags(spec: GatewaySpec): GatewayFlagValues {
  if (!agentTunnelsOn(spec)) return {};
  return {
    'tunnel-peer-port': tunnelPeerPort,
    // The kubelet expands it from the container's env (POD_IP, below).
    'tunnel-peer-address': `${containerEnv('POD_IP')}:${tunnelPeerPort}`,
    // Also the namespace in the replicas' peer certificates (--tunnel-peer-namespace's default): the pods'.
    'tunnel-lease-namespace': spec.names.namespace,
  };
}

export function deployment(spec: GatewaySpec): KubeObject {
  const { names, options } = spec;
  const https = { port: 'https', scheme: 'HTTPS' };
  // The user's affinity, priority class, pod annotations and labels (--gateway-*) around the gateway's own.
  const pod = applyPodSettings(options.pod, {
    labels: labelsOf(names),
    affinity: {
      podAntiAffinity: {
        // Preferred, not required: a one-node hub still runs every replica.
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 100,
            podAffinityTerm: {
              labelSelector: { matchLabels: names.podSelector },
              topologyKey: 'kubernetes.io/hostname',
            },
          },
        ],
      },
    },
  });
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(names),
    spec: {
      replicas: options.replicas,
      selector: { matchLabels: names.podSelector },
      // A new replica serves before an old one stops: the APIService always has somewhere to go.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      template: {
        metadata: pod.metadata,
        spec: {
          serviceAccountName: names.name,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            runAsGroup: 65532,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          ...pod.spec,
          ...(Object.keys(options.nodeSelector).length > 0 ? { nodeSelector: options.nodeSelector } : {}),
          ...(options.tolerations.length > 0 ? { tolerations: options.tolerations } : {}),
          ...(options.imagePullSecrets.length > 0
            ? { imagePullSecrets: options.imagePullSecrets.map((name) => ({ name })) }
            : {}),
          containers: [
            {
              name: 'gateway',
              image: options.image,
              imagePullPolicy: options.imagePullPolicy,
              command: ['node', ...gatewayNodeFlags, '/app/manager/gateway/main.ts'],
              args: gatewayArgs(spec),
              env: [
                { name: 'NODE_COMPILE_CACHE', value: compileCache },
                // The replica's name in its tunnel Leases and its peer certificate (whose CSR the hub
                // records with the pod's name from its bound token), and where the other replicas reach
                // its peer port.
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              ],
              ports: [
                {
                  name: 'https',
                  containerPort: options.port,
                  protocol: 'TCP',
                  ...(options.hostPort ? { hostPort: options.hostPort } : {}),
                },
                ...(agentTunnelsOn(spec)
                  ? [{ name: 'tunnel-peer', containerPort: tunnelPeerPort, protocol: 'TCP' }]
                  : []),
              ],
              readinessProbe: { httpGet: { path: '/readyz', ...https }, periodSeconds: 5 },
              livenessProbe: {
                httpGet: { path: '/healthz', ...https },
                periodSeconds: 10,
                failureThreshold: 3,
              },
              ...(Object.keys(options.resources).length > 0 ? { resources: options.resources } : {}),
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [
                { name: 'tls', mountPath: servingCertificateDir, readOnly: true },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          volumes: [
            {
              name: 'tls',
              // The serving pair and the verdict key: the CA's key (and its certificates) stay in the Secret,
              // out of the pod.
              secret: {
                secretName: names.tlsSecret,
                items: [
                  { key: 'tls.crt', path: 'tls.crt' },
                  { key: 'tls.key', path: 'tls.key' },
                  { key: verdictKeyFile, path: verdictKeyFile },
                ],
              },
            },
            { name: 'tmp', emptyDir: {} },
          ],
        },
      },
    },
  };
}

/** The Service the APIService names; with an external name, a DNS alias for a gateway outside the pod network. */
export function service({ names, options }: GatewaySpec): KubeObject {
  const spec = options.serviceExternalName
    ? {
        type: 'ExternalName',
        externalName: options.serviceExternalName,
        ports: [{ name: 'https', port: apiServicePort({ options }), protocol: 'TCP' }],
      }
    : {
        type: 'ClusterIP',
        selector: names.podSelector,
        ports: [{ name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' }],
      };
  return { apiVersion: 'v1', kind: 'Service', metadata: meta(names), spec };
}

/** The port the aggregator dials: the Service's 443, or the gateway's own port behind an external name. */
export function apiServicePort({ options }: Pick<GatewaySpec, 'options'>): number {
  if (!options.serviceExternalName) return 443;
  return options.hostPort || options.port;
}

export function podDisruptionBudget({ names }: GatewaySpec): KubeObject {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: meta(names),
    // One replica at a time may be evicted (a node drain), so two or more keep serving.
    spec: { maxUnavailable: 1, selector: { matchLabels: names.podSelector } },
  };
}

/** Host names the serving certificate names: the Service's DNS names (the aggregator's TLS ServerName is `<svc>.<ns>.svc`). */
export function servingHosts({ names, options }: Pick<GatewaySpec, 'names' | 'options'>): string[] {
  const svc = `${names.name}.${names.namespace}`;
  const hosts = [names.name, svc, `${svc}.svc`, `${svc}.svc.cluster.local`];
  if (options.serviceExternalName) hosts.push(options.serviceExternalName);
  return hosts;
}
