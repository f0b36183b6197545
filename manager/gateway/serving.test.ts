import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import tls from 'node:tls';
import { createCertificateAuthority } from '../../shared/pki.ts';
import { ServingEndpoint } from './serving.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'serving-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Replaces a file as the kubelet's runner does: write beside, rename over. */
function replace(file: string, content: string): void {
  writeFileSync(`${file}.tmp`, content);
  renameSync(`${file}.tmp`, file);
}

/** The serial number of the certificate a new TLS connection is served. */
function servedSerial(port: number, ca: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ port, host: '127.0.0.1', ca, servername: 'localhost' }, () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.end();
    });
    socket.on('error', reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a renewed certificate is served to new connections, open connections keep working, a torn pair waits for its key', async () => {
  const oldCa = await createCertificateAuthority('old-ca');
  const newCa = await createCertificateAuthority('new-ca');
  const leaf = (ca: typeof oldCa) =>
    ca.issue({ commonName: 'gw', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usage: 'server' });
  const first = await leaf(oldCa);
  const certFile = path.join(dir, 'tls.crt');
  const keyFile = path.join(dir, 'tls.key');
  replace(certFile, first.cert);
  replace(keyFile, first.key);
  const endpoint = await ServingEndpoint.create(
    { certFile, keyFile, reloadIntervalMs: 50 },
    { info: () => {} },
  );
  const port = await endpoint.listen(0, '127.0.0.1', {
    request: (_req, res) => res.end('ok'),
    upgrade: (_req, socket) => socket.destroy(),
  });
  const trusted = [oldCa.cert, newCa.cert];
  try {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: trusted });
    const get = () =>
      new Promise<{ body: string; reused: boolean }>((resolve, reject) => {
        const req = https.get(
          { host: '127.0.0.1', port, path: '/', agent, servername: 'localhost' },
          (res) => {
            let body = '';
            res.on('data', (c) => {
              body += c;
            });
            res.on('end', () => resolve({ body, reused: req.reusedSocket }));
          },
        );
        req.on('error', reject);
      });
    assert.equal((await get()).body, 'ok');
    const firstSerial = await servedSerial(port, trusted);

    // The certificate replaced first, its key some time later (two files, two renames): the torn pair is
    // never applied, the old pair keeps being served meanwhile.
    const second = await leaf(newCa);
    replace(certFile, second.cert);
    await sleep(300);
    assert.equal(await servedSerial(port, trusted), firstSerial, 'old pair kept while the key lags');
    replace(keyFile, second.key);
    let served = firstSerial;
    for (let i = 0; i < 40 && served === firstSerial; i++) {
      await sleep(50);
      served = await servedSerial(port, trusted);
    }
    assert.notEqual(served, firstSerial, 'the new certificate is served');
    assert.equal(served, new (await import('node:crypto')).X509Certificate(second.cert).serialNumber);

    // The connection opened before the reload is still the one in use, and still answers.
    const again = await get();
    assert.equal(again.body, 'ok');
    assert.equal(again.reused, true, 'the keep-alive connection survived the reload');
    agent.destroy();
  } finally {
    await endpoint.close();
  }
});
