import assert from 'node:assert/strict';
import https from 'node:https';
import { describe, test } from 'node:test';
import express from 'express';
import pino from 'pino';
import { freePort } from '../../hack/localenv/ports.ts';
import { createCertificateAuthority } from '../../shared/pki.ts';
import { admissionHandler, webhookPath } from './availability/lease-not-found-webhook.ts';
import { AddonMetrics } from './core/metrics.ts';
import { startHttpServers } from './http.ts';

describe('manager HTTP endpoints', () => {
  test('probes, metrics, webhook router over TLS, Status errors', async () => {
    let ready = false;
    const metrics = new AddonMetrics({ processMetrics: false });
    metrics.observeReconcile('deploy', 0.01, 'success');
    metrics.setAddonsByReason('ManifestApplied', new Map([['True/AddonManifestApplied', 2]]));
    const router = express.Router();
    router.post('/mutate', (req, res) => {
      res.json({ got: req.body.kind });
    });
    const servers = await startHttpServers({
      bindAddress: '127.0.0.1',
      httpPort: 0,
      webhookPort: 0,
      ready: () => ready,
      metrics,
      webhookRouter: router,
      log: pino({ level: 'silent' }),
    });
    try {
      const base = `http://127.0.0.1:${servers.httpPort}`;
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      assert.equal((await fetch(`${base}/readyz`)).status, 503);
      ready = true;
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const text = await (await fetch(`${base}/metrics`)).text();
      assert.match(text, /cluster_gateway_addon_reconciles_total\{controller="deploy",result="success"\} 1/);
      assert.match(
        text,
        /cluster_gateway_addon_managedclusteraddons\{condition="ManifestApplied",status="True",reason="AddonManifestApplied"\} 2/,
      );
      const missing = await fetch(`${base}/nope`);
      assert.equal(missing.status, 404);
      assert.equal(((await missing.json()) as { kind: string }).kind, 'Status');
      assert.equal(servers.webhookPort, 0, 'webhook listener off with --webhook-port=0');
    } finally {
      await servers.close();
    }
    const withWebhook = await startHttpServers({
      bindAddress: '127.0.0.1',
      httpPort: 0,
      webhookPort: await freePort(),
      tls: await (await createCertificateAuthority('http-test')).issue({
        commonName: '127.0.0.1',
        ipAddresses: ['127.0.0.1'],
        usage: 'server',
      }),
      ready: () => true,
      metrics,
      webhookRouter: router,
      log: pino({ level: 'silent' }),
    });
    try {
      const post = (path: string, body: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = https.request(
            {
              host: '127.0.0.1',
              port: withWebhook.webhookPort,
              path,
              method: 'POST',
              rejectUnauthorized: false,
              headers: { 'content-type': 'application/json' },
            },
            (res) => {
              let text = '';
              res.on('data', (c) => (text += c));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      assert.deepEqual(JSON.parse((await post('/mutate', '{"kind":"AdmissionReview"}')).body), {
        got: 'AdmissionReview',
      });
      const bad = await post('/mutate', '{not json');
      assert.equal(bad.status, 400);
      assert.match(JSON.parse(bad.body).message, /malformed request body/);
    } finally {
      await withWebhook.close();
    }
  });

  test('addons-by-reason series that disappear are removed, not left stale', async () => {
    const metrics = new AddonMetrics({ processMetrics: false });
    metrics.setAddonsByReason('ManifestApplied', new Map([['False/AddonManifestAppliedFailed', 1]]));
    metrics.setAddonsByReason('ManifestApplied', new Map([['True/AddonManifestApplied', 1]]));
    const { body } = await metrics.text();
    assert.doesNotMatch(body, /AddonManifestAppliedFailed/);
    assert.match(body, /AddonManifestApplied"\} 1/);
  });

  describe('the LeaseNotFound webhook and who may ask it', () => {
    const review = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'u1',
        operation: 'UPDATE',
        subResource: 'status',
        resource: {
          group: 'addon.open-cluster-management.io',
          version: 'v1beta1',
          resource: 'managedclusteraddons',
        },
        namespace: 'cluster1',
        object: {
          metadata: { name: 'cluster-gateway', namespace: 'cluster1' },
          status: {
            healthCheck: { mode: 'Lease' },
            conditions: [
              {
                type: 'Available',
                status: 'Unknown',
                reason: 'ManagedClusterAddOnLeaseNotFound',
                message: 'x',
              },
            ],
          },
        },
      },
    });
    const secret = {
      status: 'False' as const,
      reason: 'HeartbeatStale',
      message: 'secret verdict of cluster1',
    };

    async function serve(webhookClientCa?: string) {
      const router = express.Router();
      router.post(webhookPath, admissionHandler({ addonName: 'cluster-gateway', verdictFor: () => secret }));
      return startHttpServers({
        bindAddress: '127.0.0.1',
        httpPort: 0,
        webhookPort: await freePort(),
        tls: await (await createCertificateAuthority('serving')).issue({
          commonName: '127.0.0.1',
          ipAddresses: ['127.0.0.1'],
          usage: 'server',
        }),
        ...(webhookClientCa ? { webhookClientCa } : {}),
        ready: () => true,
        metrics: new AddonMetrics({ processMetrics: false }),
        webhookRouter: router,
        log: pino({ level: 'silent' }),
      });
    }

    function post(port: number, client?: { cert: string; key: string }) {
      return new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = https.request(
          {
            host: '127.0.0.1',
            port,
            path: webhookPath,
            method: 'POST',
            rejectUnauthorized: false,
            headers: { 'content-type': 'application/json' },
            ...(client ?? {}),
          },
          (res) => {
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
          },
        );
        req.on('error', reject);
        req.end(review);
      });
    }

    const patchOf = (body: string) =>
      JSON.parse(Buffer.from(JSON.parse(body).response.patch, 'base64').toString()) as {
        value?: { reason?: string };
      }[];

    test('with --webhook-client-ca: 401 without or with a foreign certificate; the verdict for the apiserver certificate', async () => {
      const clientCa = await createCertificateAuthority('webhook-client-ca');
      const apiserver = await clientCa.issue({
        commonName: 'kube-apiserver-webhook-client',
        usage: 'client',
      });
      const stranger = await (await createCertificateAuthority('other')).issue({
        commonName: 'x',
        usage: 'client',
      });
      const servers = await serve(clientCa.cert);
      try {
        for (const client of [undefined, { cert: stranger.cert, key: stranger.key }]) {
          const refused = await post(servers.webhookPort, client);
          assert.equal(refused.status, 401);
          assert.equal(JSON.parse(refused.body).kind, 'Status');
          assert.doesNotMatch(refused.body, /secret verdict/);
        }
        const ok = await post(servers.webhookPort, { cert: apiserver.cert, key: apiserver.key });
        assert.equal(ok.status, 200, ok.body);
        assert.equal(patchOf(ok.body).at(-1)?.value?.reason, 'HeartbeatStale');
        // A renewed serving certificate keeps the client CA.
        servers.setServingCertificate(
          await (await createCertificateAuthority('serving-2')).issue({
            commonName: '127.0.0.1',
            ipAddresses: ['127.0.0.1'],
            usage: 'server',
          }),
        );
        assert.equal((await post(servers.webhookPort)).status, 401);
        assert.equal(
          (await post(servers.webhookPort, { cert: apiserver.cert, key: apiserver.key })).status,
          200,
        );
      } finally {
        await servers.close();
      }
    });

    test('without a client CA: anonymous callers are answered, but never with the manager verdict', async () => {
      const servers = await serve();
      try {
        const res = await post(servers.webhookPort);
        assert.equal(res.status, 200, res.body);
        assert.equal(patchOf(res.body).at(-1)?.value?.reason, 'WaitingForAddonManager');
        assert.doesNotMatch(res.body, /secret verdict/);
        assert.doesNotMatch(
          Buffer.from(JSON.parse(res.body).response.patch, 'base64').toString(),
          /secret verdict|HeartbeatStale/,
        );
      } finally {
        await servers.close();
      }
    });
  });
});
