/**
 * KubeClient.fromKubeconfig with credentials that change: a real exec plugin
 * (a shell script) and a loopback HTTPS server that rejects a revoked token.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { createCertificateAuthority } from '../pki.ts';
import { KubeClient } from './client.ts';
import { StatusError } from './status.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'client-credentials-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('an exec plugin in the kubeconfig: run once, its token sent, run again after a 401', async () => {
  const ca = await createCertificateAuthority('client-credentials-ca');
  const serving = await ca.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
  const revoked = new Set<string>();
  const seen: string[] = [];
  const server = https.createServer({ ...serving }, (req, res) => {
    const auth = req.headers.authorization ?? '';
    seen.push(auth);
    const ok = auth.startsWith('Bearer ') && !revoked.has(auth.slice(7));
    res.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
    res.end(ok ? '{"kind":"Namespace"}' : '{"kind":"Status","code":401,"message":"Unauthorized"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.close());
  const { port } = server.address() as AddressInfo;

  // Each run prints token-<n>, counting runs in a file.
  const counter = path.join(dir, 'runs');
  writeFileSync(counter, '0');
  const plugin = path.join(dir, 'plugin.sh');
  writeFileSync(
    plugin,
    `#!/bin/sh
n=$(($(cat "${counter}") + 1)); echo $n > "${counter}"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"token-%s"}}' $n
`,
  );
  chmodSync(plugin, 0o755);
  const kubeconfig = path.join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      'current-context': 'hub',
      contexts: [{ name: 'hub', context: { cluster: 'hub', user: 'plugin' } }],
      clusters: [
        {
          name: 'hub',
          cluster: {
            server: `https://127.0.0.1:${port}`,
            'certificate-authority-data': Buffer.from(ca.cert).toString('base64'),
          },
        },
      ],
      users: [
        {
          name: 'plugin',
          user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './plugin.sh' } },
        },
      ],
    }),
  );

  const client = await KubeClient.fromKubeconfig(kubeconfig);
  after(() => client.close());
  await Promise.all([client.get('/api/v1/namespaces/a'), client.get('/api/v1/namespaces/b')]);
  assert.deepEqual(seen, ['Bearer token-1', 'Bearer token-1']);
  assert.equal(readFileSync(counter, 'utf8').trim(), '1', 'one run for concurrent requests');

  revoked.add('token-1');
  await assert.rejects(
    client.get('/api/v1/namespaces/a'),
    (err) => err instanceof StatusError && err.code === 401,
  );
  await client.get('/api/v1/namespaces/a');
  assert.deepEqual(seen.slice(2), ['Bearer token-1', 'Bearer token-2']);
});

test('a server that never answers: request() gives up after its timeout with an error naming the request', async () => {
  const ca = await createCertificateAuthority('client-timeout-ca');
  const serving = await ca.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
  // Accepts, reads the request, and never writes: a frozen apiserver or a half-open connection.
  const server = https.createServer({ ...serving }, () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => server.closeAllConnections());
  after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const client = KubeClient.fromConnection(`https://127.0.0.1:${port}`, { ca: ca.cert });
  const started = Date.now();
  await assert.rejects(
    client.request('GET', '/api/v1/namespaces', { timeoutMs: 300 }),
    /GET \/api\/v1\/namespaces: no complete answer from https:\/\/127\.0\.0\.1:\d+ within 0\.3 s/,
  );
  const waited = Date.now() - started;
  assert.ok(waited >= 300 && waited < 5000, `gave up after ${waited} ms`);
  client.close();
});
