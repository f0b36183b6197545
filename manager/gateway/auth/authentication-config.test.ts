import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createCertificateAuthority } from '../../../shared/pki.ts';
import { parseAuthenticationConfig, trustedClientCAs } from './authentication-config.ts';

test('parses the extension-apiserver-authentication ConfigMap as the kube-apiserver writes it', async () => {
  const frontProxy = await createCertificateAuthority('front-proxy-ca');
  const client = await createCertificateAuthority('client-ca');
  const config = parseAuthenticationConfig({
    'client-ca-file': client.cert,
    'requestheader-client-ca-file': `${frontProxy.cert}\n${client.cert}\n`,
    'requestheader-allowed-names': '["front-proxy-client"]',
    'requestheader-username-headers': '["X-Remote-User"]',
    'requestheader-group-headers': '[" X-Remote-Group ", ""]',
    'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
  });
  assert.equal(config.requestHeader?.roots.length, 2);
  assert.deepEqual(config.requestHeader?.allowedNames, ['front-proxy-client']);
  assert.deepEqual(config.requestHeader?.usernameHeaders, ['x-remote-user']);
  assert.deepEqual(config.requestHeader?.uidHeaders, []);
  assert.deepEqual(config.requestHeader?.groupHeaders, ['x-remote-group']);
  assert.deepEqual(config.requestHeader?.extraHeaderPrefixes, ['x-remote-extra-']);
  assert.equal(config.clientCA?.roots.length, 1);
  assert.equal(trustedClientCAs(config).length, 2);
});

test('missing CA files switch the corresponding authenticator off', () => {
  assert.deepEqual(parseAuthenticationConfig({}), {});
  assert.deepEqual(parseAuthenticationConfig(undefined), {});
  assert.deepEqual(trustedClientCAs({}), []);
});

test('malformed content is an error, not an empty configuration', async () => {
  const ca = await createCertificateAuthority('ca');
  assert.throws(
    () => parseAuthenticationConfig({ 'client-ca-file': 'not a certificate' }),
    /no PEM certificate/,
  );
  assert.throws(
    () =>
      parseAuthenticationConfig({
        'requestheader-client-ca-file': ca.cert,
        'requestheader-allowed-names': 'a,b',
      }),
    /requestheader-allowed-names: not a JSON array/,
  );
  assert.throws(
    () =>
      parseAuthenticationConfig({
        'requestheader-client-ca-file': ca.cert,
        'requestheader-group-headers': '[1]',
      }),
    /not a JSON array of strings/,
  );
});
