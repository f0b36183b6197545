import assert from 'node:assert/strict';
import https from 'node:https';
import { describe, test } from 'node:test';
import express from 'express';
import pino from 'pino';
import { freePort } from '../../hack/localenv/ports.ts';
import { createCertificateAuthority } from '../../shared/pki.ts';
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
});
