/**
 * The request path of the gateway, in order: operational endpoints ->
 * authentication -> discovery/OpenAPI -> authorization -> the
 * clustergateways API (list, get, watch, health) or the proxy.
 *
 * A reader following a proxied request goes: server.ts (TLS, sockets) ->
 * here (who is asking, may they) -> proxy/cluster-proxy.ts (the upstream).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { failureStatus, type KubeStatus, StatusError } from '../../shared/kube/status.ts';
import { discoveryResponse } from './api/discovery.ts';
import { type HealthMarkStore, readRequestBody, writeClusterGatewayHealth } from './api/health-write.ts';
import { openApiResponse } from './api/openapi.ts';
import { getClusterGateway, listClusterGateways, notFound, notSynced } from './api/read.ts';
import { errorResponse, writeResponse } from './api/response.ts';
import { serveWatch, type WatchHistory } from './api/watch.ts';
import { identityToPenetrate } from './auth/impersonation.ts';
import { proxiedRequestAttributes, requestAttributes } from './auth/request-attributes.ts';
import type { Authenticator, AuthorizationAttributes, Authorizer, UserInfo } from './auth/user.ts';
import type { ClusterDirectory, ClusterTarget } from './clusters/cluster.ts';
import { metricsContentType, metricsText, recordUpgradeRequest, trackInflightRequest } from './metrics.ts';
import type { ClusterProxy } from './proxy/index.ts';
import { matchClusterGatewayPath, parseProxyPath, writeStatusToSocket } from './proxy/index.ts';

export interface RouteDeps {
  directory: ClusterDirectory & Partial<WatchHistory>;
  authenticator: Authenticator;
  authorizer: Authorizer;
  proxy: ClusterProxy;
  /** True once clusters and the authentication config are loaded. */
  ready: () => boolean;
  /** Impersonate the caller on every proxied request (ClientIdentityPenetration). */
  impersonateAll: boolean;
  /** Also authorize the proxied request itself on the hub (--authorize-proxy-subpath). */
  authorizeProxySubpath: boolean;
  /** Answer 503 at once for clusters whose last probe failed (--reject-unhealthy). */
  rejectUnhealthy: boolean;
  /** Where PUT/PATCH of clustergateways/{name}/health record a health mark; without it they are 405. */
  health?: HealthMarkStore;
  log: { warn(obj: object, msg: string): void; debug(obj: object, msg: string): void };
}

const apiPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

export function createRoutes(deps: RouteDeps) {
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
    await authorize(user, requestAttributes(method, req.url ?? '/'));
    const proxyPath = parseProxyPath(req.url ?? '/', { goQuery: deps.authorizeProxySubpath });
    if (proxyPath) {
      const target = await proxyTarget(user, method, proxyPath.cluster, proxyPath.upstreamPath);
      return deps.proxy.handleRequest(
        req,
        res,
        target,
        proxyPath.upstreamPath,
        penetrate(user, url.searchParams),
      );
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
    // Authorized above as update/patch on clustergateways/health (request-attributes.ts).
    if (
      route?.subresource === 'health' &&
      !route.rest &&
      (method === 'PUT' || method === 'PATCH') &&
      deps.health
    ) {
      const body = await readRequestBody(req);
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
      if (url.searchParams.get('watch') === 'true' || url.searchParams.get('watch') === '1') {
        const abort = new AbortController();
        res.once('close', () => abort.abort());
        return serveWatch(deps.directory, res, { ...readRequest, signal: abort.signal });
      }
      return writeResponse(res, listClusterGateways(deps.directory, readRequest));
    }
    if (route.subresource && route.subresource !== 'health') {
      throw new StatusError(failureStatus(404, `clustergateways have no subresource "${route.subresource}"`));
    }
    return writeResponse(res, getClusterGateway(deps.directory, route.name, readRequest));
  }

  async function onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    recordUpgradeRequest(req.headers.upgrade);
    const url = new URL(req.url ?? '/', 'https://gateway');
    const proxyPath = parseProxyPath(req.url ?? '/', { goQuery: deps.authorizeProxySubpath });
    if (!proxyPath) {
      throw new StatusError(
        failureStatus(400, 'upgrades are only supported on clustergateways/{name}/proxy'),
      );
    }
    const user = await deps.authenticator.authenticate(req);
    if (!user) throw new StatusError(failureStatus(401, 'Unauthorized'));
    const method = req.method ?? 'GET';
    await authorize(user, requestAttributes(method, req.url ?? '/'));
    const target = await proxyTarget(user, method, proxyPath.cluster, proxyPath.upstreamPath);
    deps.proxy.handleUpgrade(
      req,
      socket,
      head,
      target,
      proxyPath.upstreamPath,
      penetrate(user, url.searchParams),
    );
  }

  async function proxyTarget(
    user: UserInfo,
    method: string,
    name: string,
    upstreamPath: string,
  ): Promise<ClusterTarget> {
    const target = deps.directory.get(name);
    if (!target) throw deps.directory.synced ? notFound(name) : notSynced();
    if (deps.rejectUnhealthy && !target.health.healthy) {
      throw new StatusError(
        failureStatus(
          503,
          `cluster "${name}" is unhealthy: ${target.health.reason ?? 'its last health probe failed'}`,
        ),
      );
    }
    if (deps.authorizeProxySubpath) {
      await authorize(user, proxiedRequestAttributes(method, upstreamPath), { proxied: true });
    }
    return target;
  }

  function penetrate(user: UserInfo, query: URLSearchParams): UserInfo | undefined {
    return identityToPenetrate(user, query, { always: deps.impersonateAll });
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
