/**
 * The request path of the gateway, in order: operational endpoints ->
 * authentication -> discovery/OpenAPI -> authorization -> the
 * clustergateways API (list, get, watch, health) or the proxy.
 *
 * A reader following a proxied request goes: server.ts (TLS, sockets) ->
 * here (who is asking, may they) -> identity/proxy-identity.ts (as whom the
 * cluster sees it, and whether the hub checks the proxied path) ->
 * proxy/cluster-proxy.ts (the upstream).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { UserInfo } from '../../shared/identity/user.ts';
import { clusterOfflineStatus } from '../../shared/kube/cluster-offline.ts';
import { failureStatus, type KubeStatus, StatusError } from '../../shared/kube/status.ts';
import { tunnelUpgradeProtocol } from '../../shared/tunnel/protocol.ts';
import { discoveryResponse } from './api/discovery.ts';
import { type HealthMarkStore, readRequestBody, writeClusterGatewayHealth } from './api/health-write.ts';
import { openApiResponse } from './api/openapi.ts';
import { getClusterGateway, listClusterGateways, notFound, notSynced } from './api/read.ts';
import { errorResponse, writeResponse } from './api/response.ts';
import { serveWatch } from './api/watch.ts';
import type { Authenticator, AuthorizationAttributes, Authorizer } from './auth/contracts.ts';
import { proxiedRequestAttributes, requestAttributes } from './auth/request-attributes.ts';
import type { ClusterDirectory, ClusterTarget } from './clusters/cluster.ts';
import { offlineAnswer } from './clusters/offline-causes.ts';
import { type AccessLogger, accessRecord, logProxiedRequest } from './identity/access-log.ts';
import type { ProxyIdentity } from './identity/proxy-identity.ts';
import { flagsOnlyIdentity } from './identity/setup.ts';
import {
  metricsContentType,
  metricsText,
  recordUpgradeRequest,
  trackInflightRequest,
} from './metrics/gateway-metrics.ts';
import type { ClusterProxy, ProxyAccess, ProxyPath } from './proxy/index.ts';
import { matchClusterGatewayPath, parseProxyPath, writeStatusToSocket } from './proxy/index.ts';
import { matchAttachPath } from './tunnel/attach.ts';

export interface RouteDeps {
  directory: ClusterDirectory;
  authenticator: Authenticator;
  authorizer: Authorizer;
  proxy: ClusterProxy;
  /** True once clusters and the authentication config are loaded. */
  ready: () => boolean;
  /** Impersonate the caller on every proxied request (ClientIdentityPenetration). */
  impersonateAll: boolean;
  /** Also authorize the proxied request itself on the hub (--authorize-proxy-subpath). */
  authorizeProxySubpath: boolean;
  /** Exchange rules and per-cluster settings (identity/); default: the two flags above alone. */
  identity?: ProxyIdentity;
  /** Where requests the gateway refuses before forwarding are logged like forwarded ones. */
  accessLog?: AccessLogger;
  /**
   * Also answer marked and probed-unhealthy clusters at once with a ClusterOffline 503 (--reject-unhealthy);
   * tunnel-down clusters are answered so always (clusters/offline-causes.ts).
   */
  rejectUnhealthy: boolean;
  /** --health-check-interval with the prober on: the retryAfterSeconds of a probed-unhealthy answer. */
  probeIntervalSeconds?: number;
  /** Where PUT/PATCH of clustergateways/{name}/health record a health mark; without it they are 405. */
  health?: HealthMarkStore;
  /**
   * Waits until this replica's caches hold what the hub holds for a cluster (api/fresh-read.ts):
   * before a GET of one ClusterGateway and before a health write checks its resourceVersion.
   */
  freshRead?: (name: string) => Promise<void>;
  log: { warn(obj: object, msg: string): void; debug(obj: object, msg: string): void };
  /** Agent tunnels: upgrades on clustergateways/{name}/attach (tunnel/attach.ts); without it they are 400. */
  tunnel?: {
    attach(req: IncomingMessage, socket: Duplex, head: Buffer, cluster: string): Promise<void>;
  };
}

const apiPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

export function createRoutes(deps: RouteDeps) {
  const identity = deps.identity ?? flagsOnlyIdentity(deps.impersonateAll, deps.authorizeProxySubpath);

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://gateway');
    const path = url.pathname;
    // Probes of the kubelet and the aggregator's availability check: no credentials needed.
    if (path === '/healthz' || path === '/livez') return text(res, 200, 'ok');
    if (path === '/readyz')
      return deps.ready() ? text(res, 200, 'ok') : text(res, 503, 'clusters not loaded yet');

    const user = await deps.authenticator.authenticate(req);
    if (!user) throw new StatusError(failureStatus(401, 'Unauthorized'));

    if (path === '/metrics') {
      await authorize(user, { kind: 'nonResource', verb: 'get', path });
      res.writeHead(200, { 'content-type': metricsContentType });
      return void res.end(await metricsText());
    }
    // Discovery and OpenAPI are public to authenticated users, as system:discovery grants on the hub.
    const discovery =
      discoveryResponse(path, { accept: req.headers.accept, ifNoneMatch: req.headers['if-none-match'] }) ??
      openApiResponse(path, { query: url.searchParams, ifNoneMatch: req.headers['if-none-match'] });
    if (discovery) return writeResponse(res, discovery);

    if (!path.startsWith(apiPrefix))
      throw new StatusError(failureStatus(404, `the server could not find ${path}`));
    const method = req.method ?? 'GET';
    const attributes = requestAttributes(method, req.url ?? '/');
    await authorize(user, attributes);
    const proxyPath = parseProxyPath(req.url ?? '/');
    if (proxyPath) {
      const p = await prepareProxy(user, method, req.url ?? '/', proxyPath, url.searchParams);
      return deps.proxy.handleRequest(req, res, p.target, p.upstreamPath, p.identity, p.access);
    }
    const isCollection = path === apiPrefix || path === `${apiPrefix}/`;
    const route = isCollection ? undefined : matchClusterGatewayPath(req.url ?? '/');
    if (!isCollection && !route) {
      const name = path.slice(apiPrefix.length + 1).split('/')[0];
      throw new StatusError(
        failureStatus(
          404,
          matchClusterGatewayPath(`${apiPrefix}/${name}`)
            ? `the server could not find the requested resource ${path}`
            : `${name} is not a valid cluster name (lowercase DNS-1123 subdomain)`,
        ),
      );
    }
    if (deps.tunnel && route?.subresource === 'attach' && matchAttachPath(req.url ?? '/') !== undefined) {
      throw new StatusError(
        failureStatus(
          400,
          `clustergateways/${route.name}/attach is the tunnel of the cluster's agent: it takes an upgrade (Connection: Upgrade, Upgrade: ${tunnelUpgradeProtocol})`,
        ),
      );
    }
    // Authorized above as update/patch on clustergateways/health (request-attributes.ts).
    if (
      route?.subresource === 'health' &&
      !route.rest &&
      (method === 'PUT' || method === 'PATCH') &&
      deps.health
    ) {
      const body = await readRequestBody(req);
      await deps.freshRead?.(route.name);
      return writeResponse(
        res,
        await writeClusterGatewayHealth(deps.directory, deps.health, {
          method,
          name: route.name,
          contentType: req.headers['content-type'],
          body,
          query: url.searchParams,
          accept: req.headers.accept,
        }),
      );
    }
    if (method !== 'GET' && method !== 'HEAD') {
      throw new StatusError(
        failureStatus(
          405,
          `${method} is not supported on clustergateways: they are read-only views of cluster Secrets and OCM ManagedClusters (only clustergateways/{name}/health takes PUT and PATCH)`,
        ),
      );
    }
    const readRequest = { query: url.searchParams, accept: req.headers.accept };
    if (isCollection || !route) {
      // Serve what was authorized: list or watch is the verb request-attributes.ts derived (Go's reading of
      // `watch`, where anything but "false" and "0" is a watch), never a second reading of the query.
      if (attributes.verb === 'watch') {
        const abort = new AbortController();
        res.once('close', () => abort.abort());
        return serveWatch(deps.directory, res, { ...readRequest, signal: abort.signal });
      }
      return writeResponse(res, await listClusterGateways(deps.directory, readRequest));
    }
    if (route.subresource && route.subresource !== 'health') {
      throw new StatusError(failureStatus(404, `clustergateways have no subresource "${route.subresource}"`));
    }
    await deps.freshRead?.(route.name);
    return writeResponse(res, getClusterGateway(deps.directory, route.name, readRequest));
  }

  async function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // An agent's tunnel: authenticated, bound to its cluster and authorized in tunnel/attach.ts.
    const attachCluster = deps.tunnel ? matchAttachPath(req.url ?? '/') : undefined;
    if (deps.tunnel && attachCluster !== undefined) {
      return deps.tunnel.attach(req, socket, head, attachCluster);
    }
    recordUpgradeRequest(req.headers.upgrade);
    const url = new URL(req.url ?? '/', 'https://gateway');
    const proxyPath = parseProxyPath(req.url ?? '/');
    if (!proxyPath) {
      throw new StatusError(
        failureStatus(400, 'upgrades are only supported on clustergateways/{name}/proxy'),
      );
    }
    const user = await deps.authenticator.authenticate(req);
    if (!user) throw new StatusError(failureStatus(401, 'Unauthorized'));
    const method = req.method ?? 'GET';
    await authorize(user, requestAttributes(method, req.url ?? '/'));
    const p = await prepareProxy(user, method, req.url ?? '/', proxyPath, url.searchParams);
    deps.proxy.handleUpgrade(req, socket, head, p.target, p.upstreamPath, p.identity, p.access);
  }

  /**
   * Everything decided before a proxied request leaves: the cluster, its
   * proxy configuration, the hub's check of the proxied path when the flag or
   * the configuration asks for it (then the query forwarded is the one a Go
   * server parses, so the cluster reads exactly what was authorized), and the
   * identity the cluster will see. A refusal is access-logged like a
   * forwarded request.
   */
  async function prepareProxy(
    user: UserInfo,
    method: string,
    rawUrl: string,
    proxyPath: ProxyPath,
    query: URLSearchParams,
  ): Promise<{ target: ClusterTarget; upstreamPath: string; identity?: UserInfo; access: ProxyAccess }> {
    const name = proxyPath.cluster;
    let upstreamPath = proxyPath.upstreamPath;
    try {
      const target = deps.directory.get(name);
      if (!target) throw deps.directory.synced ? notFound(name) : notSynced();
      // A cluster known to be offline is answered at once with its ClusterOffline causes, before any
      // identity work: its tunnel is down, or (--reject-unhealthy) it is marked or probed unhealthy.
      // Unknown (not probed yet, e.g. just after a restart) is not offline: clusters/offline-causes.ts.
      const offline = offlineAnswer(target, {
        rejectUnhealthy: deps.rejectUnhealthy,
        ...(deps.probeIntervalSeconds ? { probeIntervalSeconds: deps.probeIntervalSeconds } : {}),
      });
      if (offline) throw new StatusError(clusterOfflineStatus(offline));
      const plan = identity.plan(target);
      if (plan.authorizeProxySubpath) {
        upstreamPath = parseProxyPath(rawUrl, { goQuery: true })?.upstreamPath ?? upstreamPath;
        await authorize(user, proxiedRequestAttributes(method, upstreamPath), { proxied: true });
      }
      // A no-credential cluster (tunnel/, the agent acts with its own token) has no identity of its own
      // to lend: every request runs as the caller, or as the identity an exchange rule maps it to.
      const noCredential =
        target.endpoint?.type === 'ClusterProxy' && target.endpoint.trustModel === 'no-credential';
      const effective = await identity.identityFor(
        user,
        name,
        plan,
        noCredential ? penetrating(query) : query,
      );
      if (noCredential && !effective.identity) {
        throw new StatusError(
          failureStatus(
            403,
            `cluster "${name}" has no credential on the hub (its agent acts as the caller): requests to it cannot use the ${effective.mode} identity${effective.rule ? ` of rule "${effective.rule.name}" (${effective.rule.origin})` : ''}`,
          ),
        );
      }
      return {
        target,
        upstreamPath,
        ...(effective.identity ? { identity: effective.identity } : {}),
        access: accessRecord(user, effective),
      };
    } catch (err) {
      if (deps.accessLog) {
        const code = err instanceof StatusError ? err.code : 500;
        logProxiedRequest(deps.accessLog, {
          cluster: name,
          method,
          upstreamPath,
          code,
          access: accessRecord(user),
        });
      }
      throw err;
    }
  }

  async function authorize(
    user: UserInfo,
    attributes: AuthorizationAttributes,
    context: { proxied?: boolean } = {},
  ): Promise<void> {
    const decision = await deps.authorizer.authorize(user, attributes, context);
    if (decision.allowed) return;
    throw new StatusError(forbidden(user, attributes, decision.reason));
  }

  return {
    /** Request listener: never throws, every failure becomes a metav1.Status. */
    request(req: IncomingMessage, res: ServerResponse): void {
      const done = trackInflightRequest();
      res.once('close', done);
      onRequest(req, res).catch((err: unknown) => {
        if (!(err instanceof StatusError)) deps.log.warn({ err, url: req.url }, 'request failed');
        if (res.headersSent) return void res.destroy();
        writeResponse(res, errorResponse(err));
      });
    },
    /** Upgrade listener (exec, attach, port-forward). */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
      onUpgrade(req, socket, head).catch((err: unknown) => {
        if (!(err instanceof StatusError)) deps.log.warn({ err, url: req.url }, 'upgrade failed');
        const status: KubeStatus =
          err instanceof StatusError ? err.status : failureStatus(500, 'internal error');
        writeStatusToSocket(socket, status);
      });
    },
  };
}

/** The query as if the caller had asked for identity penetration (`?impersonate=true`). */
function penetrating(query: URLSearchParams): URLSearchParams {
  const forced = new URLSearchParams(query);
  forced.set('impersonate', 'true');
  return forced;
}

/** The message Kubernetes gives, so users recognise it: `User "x" cannot get resource ...`. */
function forbidden(user: UserInfo, a: AuthorizationAttributes, reason: string): KubeStatus {
  let message: string;
  if (a.kind === 'nonResource') {
    message = `User "${user.name}" cannot ${a.verb} path "${a.path}"`;
  } else {
    const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
    const scope = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
    message = `${a.name ? `${a.resource} "${a.name}" is forbidden: ` : ''}User "${user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" ${scope}`;
  }
  if (reason) message += `: ${reason}`;
  return failureStatus(
    403,
    message,
    a.kind === 'resource'
      ? { group: a.group, kind: a.resource, ...(a.name ? { name: a.name } : {}) }
      : undefined,
  );
}

function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(body);
}
