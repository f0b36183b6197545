/**
 * The hub's real kube-aggregator routes an APIService to a process on this
 * machine. The hub has a node, so its aggregator resolves a Service to its
 * endpoints (--enable-aggregator-routing, as the chart's gateway pods need): a
 * Service without selector whose one endpoint is this process on the pods'
 * bridge address (Endpoints may not hold loopback addresses). The environment's
 * gateway is registered this way (hack/localenv/gateway.ts).
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { hostAddress } from '../hack/localenv/host-changes.ts';
import { waitFor, waitForConditions } from '../hack/localenv/wait.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { createCertificateAuthority } from '../shared/pki.ts';
import { hubClient } from './support/environment.ts';

const group = 'smoke.e2e.example.com';
const seen: { user?: string; groups: string[]; frontProxyCert?: string }[] = [];
let server: https.Server;
let hub: KubeClient;

before(async () => {
  hub = await hubClient();
  const ca = await createCertificateAuthority('smoke-ca');
  const serving = await ca.issue({ commonName: 'smoke', dnsNames: ['smoke.default.svc'], usage: 'server' });
  server = https.createServer({ ...serving, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    seen.push({
      user: req.headers['x-remote-user'] as string | undefined,
      groups: req.headersDistinct['x-remote-group'] ?? [],
      frontProxyCert: peer?.subject?.CN as string | undefined,
    });
    const send = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === `/apis/${group}/v1`) {
      return send({
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: `${group}/v1`,
        resources: [{ name: 'things', namespaced: false, kind: 'Thing', verbs: ['list'] }],
      });
    }
    if (req.url?.startsWith(`/apis/${group}/v1/things`)) {
      return send({
        kind: 'ThingList',
        apiVersion: `${group}/v1`,
        metadata: {},
        items: [{ metadata: { name: 'local' } }],
      });
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: 404, reason: 'NotFound' }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, hostAddress, resolve));
  const { port } = server.address() as AddressInfo;
  await hub.apply(
    '/api/v1/namespaces/default/services/smoke',
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'smoke', namespace: 'default' },
      spec: { ports: [{ name: 'https', port: 443, targetPort: port }] },
    },
    'e2e',
  );
  await hub.apply(
    '/api/v1/namespaces/default/endpoints/smoke',
    {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'smoke', namespace: 'default' },
      subsets: [{ addresses: [{ ip: hostAddress }], ports: [{ name: 'https', port }] }],
    },
    'e2e',
  );
  await hub.apply(
    `/apis/apiregistration.k8s.io/v1/apiservices/v1.${group}`,
    {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: `v1.${group}` },
      spec: {
        group,
        version: 'v1',
        service: { namespace: 'default', name: 'smoke', port: 443 },
        caBundle: Buffer.from(ca.cert).toString('base64'),
        groupPriorityMinimum: 1000,
        versionPriority: 10,
      },
    },
    'e2e',
  );
});

after(async () => {
  await hub.delete(`/apis/apiregistration.k8s.io/v1/apiservices/v1.${group}`);
  await hub.delete('/api/v1/namespaces/default/services/smoke');
  await hub.delete('/api/v1/namespaces/default/endpoints/smoke');
  hub.close();
  server.close();
  server.closeAllConnections();
});

test('the aggregator marks the APIService available and routes requests to the local process', async () => {
  await waitForConditions(hub, `/apis/apiregistration.k8s.io/v1/apiservices/v1.${group}`, ['Available'], {
    timeoutMs: 60_000,
  });
  // Available is the aggregator's availability controller speaking; the proxy handler of a new group is
  // installed by another controller, and was seen answering 503 for a few milliseconds after Available.
  const list = await waitFor(
    `the aggregator to route /apis/${group}/v1/things`,
    () =>
      hub
        .get<{ items: { metadata: { name: string } }[] }>(`/apis/${group}/v1/things`)
        .catch((err: unknown) => {
          if (err instanceof StatusError && (err.code === 503 || err.code === 404)) return undefined;
          throw err;
        }),
    { timeoutMs: 10_000, intervalMs: 100 },
  );
  assert.deepEqual(
    list.items.map((i) => i.metadata.name),
    ['local'],
  );
  // The request came through the aggregator: front-proxy client certificate, user in X-Remote-User.
  // The aggregator's own availability checks (as system:kube-aggregator) interleave with ours: skip them.
  const last = seen.filter((r) => r.user !== 'system:kube-aggregator').at(-1);
  assert.equal(last?.user, 'admin');
  assert.ok(last?.groups.includes('system:masters'));
  assert.equal(last?.frontProxyCert, 'front-proxy-client');
});

test('the front-proxy client certificate is signed by the hub front-proxy CA', async () => {
  const cm = await hub.get<{ data: Record<string, string> }>(
    '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication',
  );
  const caPem = cm.data['requestheader-client-ca-file'];
  assert.ok(caPem, 'requestheader CA published for aggregated servers');
  assert.ok(new X509Certificate(caPem).subject.includes('front-proxy-ca'));
});
