/**
 * The ClusterGateway schema with a description on every field, in a small
 * neutral form that openapi.ts renders as OpenAPI v2 definitions and v3
 * component schemas. `kubectl explain` (OpenAPI v3 since 1.27) shows these
 * descriptions, so they describe this gateway's behaviour, not Go types.
 *
 * Definition names follow what the Go apiserver's OpenAPI namer produces
 * for the original's types, so clients that look them up by name (and the
 * aggregator's merged v2 spec) see the same identifiers.
 */

export const gatewayPrefix = 'com.github.oam-dev.cluster-gateway.pkg.apis.cluster.v1alpha1.';
export const metaPrefix = 'io.k8s.apimachinery.pkg.apis.meta.v1.';

/** A reference to another named schema, with the referring field's description. */
export interface Ref {
  ref: string;
  description?: string;
}

export interface Schema {
  type?: 'object' | 'string' | 'boolean' | 'integer' | 'array';
  format?: string;
  description?: string;
  enum?: string[];
  properties?: Record<string, Schema | Ref>;
  required?: string[];
  items?: Schema | Ref;
  additionalProperties?: Schema;
  extensions?: Record<string, unknown>;
}

export function isRef(value: Schema | Ref): value is Ref {
  return 'ref' in value;
}

const apiVersionDoc =
  'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources';
const kindDoc =
  'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds';

const gvk = (kind: string) => ({
  'x-kubernetes-group-version-kind': [{ group: 'cluster.core.oam.dev', kind, version: 'v1alpha1' }],
});

const str = (description: string, extra: Partial<Schema> = {}): Schema => ({
  type: 'string',
  description,
  ...extra,
});
const stringMap = (description: string): Schema => ({
  type: 'object',
  description,
  additionalProperties: { type: 'string' },
});

export const gatewaySchemas: Record<string, Schema> = {
  ClusterGateway: {
    type: 'object',
    description:
      'ClusterGateway is a cluster registered with the gateway: where its kube-apiserver is, how the gateway authenticates to it, and whether it is healthy. Requests to the cluster go through the proxy subresource (clustergateways/<name>/proxy/<path>). ClusterGateways are read-only views of credential Secrets, OCM ManagedClusters and agent tunnels; this gateway never returns credential material (no token, certificate or private key).',
    properties: {
      apiVersion: str(apiVersionDoc),
      kind: str(kindDoc),
      metadata: {
        ref: `${metaPrefix}ObjectMeta`,
        description:
          "Standard object metadata. Labels and annotations come from the cluster's credential Secret and ManagedCluster (annotations that could hold secrets are dropped). More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
      },
      spec: {
        ref: `${gatewayPrefix}ClusterGatewaySpec`,
        description: 'Spec describes how the gateway reaches the cluster.',
      },
      status: {
        ref: `${gatewayPrefix}ClusterGatewayStatus`,
        description: 'Status reports whether the cluster is healthy, and why not.',
      },
    },
    extensions: gvk('ClusterGateway'),
  },
  ClusterGatewayList: {
    type: 'object',
    description: 'ClusterGatewayList is a list of ClusterGateways.',
    required: ['items'],
    properties: {
      apiVersion: str(apiVersionDoc),
      kind: str(kindDoc),
      metadata: {
        ref: `${metaPrefix}ListMeta`,
        description:
          'Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
      },
      items: {
        type: 'array',
        description: 'Items is the list of ClusterGateways.',
        items: { ref: `${gatewayPrefix}ClusterGateway` },
      },
    },
    extensions: gvk('ClusterGatewayList'),
  },
  ClusterGatewaySpec: {
    type: 'object',
    description: 'ClusterGatewaySpec describes how the gateway reaches a cluster.',
    required: ['provider', 'access'],
    properties: {
      provider: str('Provider is the cluster provider type. Reserved: always empty.'),
      access: {
        ref: `${gatewayPrefix}ClusterAccess`,
        description:
          "Access describes the cluster's kube-apiserver endpoint and the kind of credential used for it.",
      },
    },
  },
  ClusterAccess: {
    type: 'object',
    description:
      "ClusterAccess describes how the gateway connects and authenticates to the cluster's kube-apiserver.",
    required: ['endpoint'],
    properties: {
      endpoint: {
        ref: `${gatewayPrefix}ClusterEndpoint`,
        description: "Endpoint prescribes how to reach the cluster's kube-apiserver.",
      },
      credential: {
        ref: `${gatewayPrefix}ClusterAccessCredential`,
        description:
          'Credential describes how the gateway authenticates to the cluster. Only its type is shown: tokens, certificates and private keys are never returned by this API.',
      },
    },
  },
  ClusterEndpoint: {
    type: 'object',
    description: "ClusterEndpoint prescribes how to reach a cluster's kube-apiserver.",
    required: ['type'],
    properties: {
      type: str(
        "Type is the union discriminator. Const: a fixed URL (spec.access.endpoint.const), taken from the ManagedCluster (OCM integration) or from the `endpoint` key of the credential Secret. ClusterProxy: through the cluster's agent tunnel; no address is needed.",
        { enum: ['Const', 'ClusterProxy'] },
      ),
      const: {
        ref: `${gatewayPrefix}ClusterEndpointConst`,
        description: 'Const prescribes a fixed endpoint for requesting the cluster. Set when type is Const.',
      },
    },
  },
  ClusterEndpointConst: {
    type: 'object',
    description: 'ClusterEndpointConst is a fixed kube-apiserver endpoint.',
    required: ['address'],
    properties: {
      address: str(
        "Address is the URL of the cluster's kube-apiserver, e.g. https://example.com:6443, possibly with a path prefix that proxied request paths are appended to.",
      ),
      caBundle: str(
        "CABundle holds the PEM CA certificates (base64-encoded, as Kubernetes encodes bytes) that verify the kube-apiserver's serving certificate. From the ManagedCluster's client config or the Secret's ca.crt (or ca) key.",
        { format: 'byte' },
      ),
      insecure: {
        type: 'boolean',
        description:
          "Insecure means the kube-apiserver's serving certificate is not verified. Set when the credential Secret carries no CA (the original's behaviour).",
      },
      'proxy-url': str(
        "ProxyURL is the egress proxy (http, https or socks5) used to reach the kube-apiserver, from the Secret's proxy-url key. A password in it is shown as xxxxx.",
      ),
    },
  },
  ClusterAccessCredential: {
    type: 'object',
    description:
      'ClusterAccessCredential names the kind of credential the gateway uses for the cluster. The credential itself stays in the Secret.',
    required: ['type'],
    properties: {
      type: str(
        'Type is ServiceAccountToken (a bearer token, Secret key token), X509Certificate (a client certificate, Secret keys tls.crt and tls.key) or Dynamic (an exec credential plugin, Secret key exec).',
        { enum: ['ServiceAccountToken', 'X509Certificate', 'Dynamic'] },
      ),
    },
  },
  ClusterGatewayStatus: {
    type: 'object',
    description: 'ClusterGatewayStatus is the observed state of a cluster.',
    properties: {
      healthy: {
        type: 'boolean',
        description:
          "Healthy reports whether the cluster is considered reachable: from the gateway's prober when it has one, else the status.cluster.core.oam.dev/healthy annotation of the credential Secret (written through the health subresource), else the ManagedCluster's ManagedClusterConditionAvailable condition. Always false when the cluster cannot be proxied.",
      },
      healthyReason: str(
        'HealthyReason explains the health state, e.g. ConnectionTimeout, or, for a cluster that cannot be proxied, what is wrong with its configuration (a missing endpoint, an invalid certificate, no credential Secret).',
      ),
      tunnel: {
        ref: `${gatewayPrefix}ClusterGatewayTunnelStatus`,
        description:
          "Tunnel is the state of the cluster's agent tunnel (docs/tunnel.md): set for clusters reached through it (endpoint type ClusterProxy) and for clusters whose agent is attached.",
      },
    },
  },
  ClusterGatewayTunnelStatus: {
    type: 'object',
    description: "The state of a cluster's agent tunnel.",
    properties: {
      connected: {
        type: 'boolean',
        description:
          "Connected reports whether the cluster's agent holds a tunnel to a gateway replica. A ClusterProxy cluster without one cannot be proxied (503).",
      },
      connectedSince: {
        type: 'string',
        format: 'date-time',
        description: 'ConnectedSince is when the current tunnel connected (RFC 3339).',
      },
      replica: str('Replica is the gateway replica (pod name) that holds the tunnel.'),
    },
  },
};

const timeDoc = 'Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.';

/** The parts of meta/v1 the ClusterGateway schemas reference, with Kubernetes' own descriptions (abridged). */
export const metaSchemas: Record<string, Schema> = {
  Time: { type: 'string', format: 'date-time', description: timeDoc },
  ObjectMeta: {
    type: 'object',
    description:
      'ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.',
    properties: {
      name: str(
        'Name must be unique within a namespace. For ClusterGateways it is the cluster name: the name of the credential Secret and of the OCM ManagedCluster.',
      ),
      generateName: str(
        'GenerateName is an optional prefix used by the server to generate a unique name. Unused here.',
      ),
      namespace: str(
        'Namespace defines the space within which each name must be unique. ClusterGateways are cluster-scoped.',
      ),
      uid: str(
        'UID is the unique in time and space value for this object. For ClusterGateways it is derived from the name, so every gateway replica reports the same value.',
      ),
      resourceVersion: str(
        'An opaque value that represents the internal version of this object that can be used by clients to determine when objects have changed. It changes whenever anything observable about the cluster changes. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#concurrency-control-and-consistency',
      ),
      generation: {
        type: 'integer',
        format: 'int64',
        description:
          'A sequence number representing a specific generation of the desired state. Unused here.',
      },
      creationTimestamp: {
        ref: `${metaPrefix}Time`,
        description:
          'CreationTimestamp is a timestamp representing the server time when this object was created: that of the credential Secret (else the ManagedCluster, else the agent tunnel). It is represented in RFC3339 form and is in UTC.',
      },
      deletionTimestamp: {
        ref: `${metaPrefix}Time`,
        description:
          'DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted. Unused here.',
      },
      deletionGracePeriodSeconds: {
        type: 'integer',
        format: 'int64',
        description:
          'Number of seconds allowed for this object to gracefully terminate before it will be removed. Unused here.',
      },
      labels: stringMap(
        'Map of string keys and values that can be used to organize and categorize (scope and select) objects. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels',
      ),
      annotations: stringMap(
        'Annotations is an unstructured key value map stored with a resource that may be set by external tools to store and retrieve arbitrary metadata. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations',
      ),
      ownerReferences: {
        type: 'array',
        description: 'List of objects depended by this object. Unused here.',
        items: { ref: `${metaPrefix}OwnerReference` },
      },
      finalizers: {
        type: 'array',
        description: 'Must be empty before the object is deleted from the registry. Unused here.',
        items: { type: 'string' },
      },
    },
  },
  ListMeta: {
    type: 'object',
    description:
      'ListMeta describes metadata that synthetic resources must have, including lists and various status objects.',
    properties: {
      resourceVersion: str(
        "String that identifies the server's internal version of this object that can be used by clients to determine when objects have changed. Value must be treated as opaque by clients and passed unmodified back to the server.",
      ),
      continue: str(
        'continue may be set if the user set a limit on the number of items returned. Unused here: lists are complete.',
      ),
      remainingItemCount: {
        type: 'integer',
        format: 'int64',
        description:
          'remainingItemCount is the number of subsequent items in the list which are not included in this list response. Unused here.',
      },
      selfLink: str(
        'Deprecated: selfLink is a legacy read-only field that is no longer populated by the system.',
      ),
    },
  },
  OwnerReference: {
    type: 'object',
    description:
      'OwnerReference contains enough information to let you identify an owning object. An owning object must be in the same namespace as the dependent, or be cluster-scoped, so there is no namespace field.',
    required: ['apiVersion', 'kind', 'name', 'uid'],
    properties: {
      apiVersion: str('API version of the referent.'),
      kind: str('Kind of the referent.'),
      name: str('Name of the referent.'),
      uid: str('UID of the referent.'),
      controller: {
        type: 'boolean',
        description: 'If true, this reference points to the managing controller.',
      },
      blockOwnerDeletion: {
        type: 'boolean',
        description:
          'If true, AND if the owner has the "foregroundDeletion" finalizer, then the owner cannot be deleted from the key-value store until this reference is removed.',
      },
    },
  },
};
