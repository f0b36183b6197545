/**
 * Answers without a credential (issue 30 item 6), on the environment's real pods:
 * - the manager's LeaseNotFound webhook, given --webhook-client-ca, refuses an anonymous
 *   AdmissionReview (401) and one signed by another CA, while the hub apiserver, which presents its
 *   webhook client certificate (hack/localenv/apiserver.ts), gets the manager's verdict.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { webhookPath } from '../manager/addon/availability/lease-not-found-webhook.ts';
import { createCertificateAuthority } from '../shared/pki.ts';
import { type AddonManagerProcess, startAddonManager } from './support/addon-manager.ts';
import { environmentState, hubClient } from './support/environment.ts';

describe('the LeaseNotFound webhook with --webhook-client-ca', { concurrency: false }, () => {
  let manager: AddonManagerProcess;
  const hubDir = () => path.join(environmentState().stateDir, 'hub');

  const review = JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'probe',
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

  const post = (client?: { cert: string; key: string }) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: manager.webhookPort,
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

  before(async () => {
    // Not registered with the hub (--tls-cert-file: bring your own configuration), so the
    // environment's own manager keeps its webhook; this one only answers on its port.
    const serving = await (await createCertificateAuthority('e2e-webhook-serving')).issue({
      commonName: '127.0.0.1',
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
    });
    const dir = path.join(environmentState().stateDir, 'webhook-auth');
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'tls.crt'), serving.cert);
    writeFileSync(path.join(dir, 'tls.key'), serving.key);
    manager = await startAddonManager(
      'e2e-webhook-auth',
      [
        `--webhook-client-ca=${path.join(hubDir(), 'webhook-client-ca.crt')}`,
        `--tls-cert-file=${path.join(dir, 'tls.crt')}`,
        `--tls-private-key-file=${path.join(dir, 'tls.key')}`,
        '--addon-name=e2e-webhook-auth',
        '--deploy-gateway=false',
      ],
      { webhook: true },
    );
  });
  after(async () => {
    await manager?.stop();
    const hub = await hubClient();
    await hub
      .delete('/apis/addon.open-cluster-management.io/v1alpha1/clustermanagementaddons/e2e-webhook-auth')
      .catch(() => {});
    hub.close();
  });

  test('an anonymous AdmissionReview is refused with 401, and one with a foreign certificate', async () => {
    const anonymous = await post();
    assert.equal(anonymous.status, 401, anonymous.body);
    assert.equal(JSON.parse(anonymous.body).kind, 'Status');
    const stranger = await (await createCertificateAuthority('e2e-stranger')).issue({
      commonName: 'system:kube-apiserver',
      usage: 'client',
    });
    assert.equal((await post(stranger)).status, 401);
  });

  test("the hub apiserver's webhook client certificate is answered", async () => {
    const res = await post({
      cert: readFileSync(path.join(hubDir(), 'webhook-client.crt'), 'utf8'),
      key: readFileSync(path.join(hubDir(), 'webhook-client.key'), 'utf8'),
    });
    assert.equal(res.status, 200, res.body);
    assert.equal(JSON.parse(res.body).response.uid, 'probe');
  });
});
