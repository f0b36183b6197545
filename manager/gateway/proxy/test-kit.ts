/**
 * Test fixtures for the gateway's proxy: a front HTTP server that routes proxy URLs to a
 * ClusterProxy, and ClusterTargets aimed at the connection layer's test servers
 * (shared/transport/test-kit.ts, shared/forward/test-kit.ts, re-exported here for the proxy's tests).
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { listen, type TestServer, testPki } from '../../../shared/transport/test-kit.ts';
import type { ClusterTarget, ConstEndpoint, Credential, Endpoint } from '../clusters/cluster.ts';
import { type ClusterProxy, type ClusterProxyOptions, createClusterProxy } from './cluster-proxy.ts';
import { parseProxyPath } from './path.ts';

export { headerValues, type Reply, send } from '../../../shared/forward/test-kit.ts';
export {
  eventually,
  listen,
  startUpstream,
  type TestPki,
  type TestServer,
  testPki,
} from '../../../shared/transport/test-kit.ts';

export const PROXY_PREFIX = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways/';

/**
 * The gateway's front door as the API server would wire it: parse the proxy
 * URL, look the cluster up, hand over to the proxy.
 */
export function startFront(
  proxy: ClusterProxy,
  clusters: (name: string) => ClusterTarget | undefined,
  identity?: (req: http.IncomingMessage) => UserInfo | undefined,
): Promise<TestServer> {
  const server = http.createServer((req, res) => {
    const parsed = parseProxyPath(req.url ?? '');
    const target = parsed && clusters(parsed.cluster);
    if (!parsed || !target) {
      res.writeHead(404).end();
      return;
    }
    proxy.handleRequest(req, res, target, parsed.upstreamPath, identity?.(req));
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Socket, head: Buffer) => {
    const parsed = parseProxyPath(req.url ?? '');
    const target = parsed && clusters(parsed.cluster);
    if (!parsed || !target) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    proxy.handleUpgrade(req, socket, head, target, parsed.upstreamPath, identity?.(req));
  });
  return listen(server);
}

export interface ProxyFixture {
  proxy: ClusterProxy;
  front: TestServer;
  /** Closes the front server, the proxy and the upstream. */
  close(): Promise<void>;
}

/** A fresh ClusterProxy behind a front server whose one cluster, "c1", is `upstream` (Const endpoint). */
export async function proxyTo(
  upstream: TestServer,
  options: ClusterProxyOptions = {},
): Promise<ProxyFixture> {
  const proxy = createClusterProxy(options);
  const target = clusterTarget('c1', await constEndpoint(upstream.port));
  const front = await startFront(proxy, (name) => (name === 'c1' ? target : undefined));
  return {
    proxy,
    front,
    close: async () => {
      await front.close();
      proxy.close();
      await upstream.close();
    },
  };
}

export function clusterTarget(
  name: string,
  endpoint: Endpoint,
  credential: Credential = { type: 'ServiceAccountToken', token: 'cluster-token' },
  connectionKey = 'key-1',
): ClusterTarget {
  return {
    name,
    labels: {},
    annotations: {},
    creationTimestamp: '2026-01-01T00:00:00Z',
    resourceVersion: '1',
    endpoint,
    credential,
    health: { healthy: true },
    connectionKey,
  };
}

/** A Const endpoint at the test upstream, trusting the test CA. */
export async function constEndpoint(port: number, path = ''): Promise<ConstEndpoint> {
  return {
    type: 'Const',
    address: `https://127.0.0.1:${port}${path}`,
    caBundle: (await testPki()).ca,
    insecure: false,
  };
}
