import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { StatusError } from '../../../shared/kube/status.ts';
import { createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { ExternalIdentityExchanger, type ExternalRule, identityFrom } from './external-exchanger.ts';
import { validateSpec } from './validate.ts';

let ca: string;
let serving: KeyPair;
let server: https.Server;
let port: number;
let handler: (body: Record<string, unknown>, res: ServerResponse) => void;
const calls: Array<Record<string, unknown>> = [];

before(async () => {
  const authority = await createCertificateAuthority('exchanger-test-ca');
  ca = authority.cert;
  serving = await authority.issue({ commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
  server = https.createServer(serving, (req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(text) as Record<string, unknown>;
      calls.push(body);
      handler(body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

after(() => {
  server.closeAllConnections();
  server.close();
});

const alice: UserInfo = { name: 'ext-alice', uid: 'u1', groups: ['dev'], extra: { scopes: ['a'] } };

function rule(extra: Record<string, unknown> = {}, path = '/exchange'): ExternalRule {
  const config = validateSpec(
    {
      clientIdentityExchanger: {
        rules: [
          {
            name: 'external',
            type: 'ExternalIdentityExchanger',
            source: { userPattern: 'ext-' },
            url: `https://127.0.0.1:${port}${path}`,
            caBundle: ca,
            ...extra,
          },
        ],
      },
    },
    'test',
  );
  return config.rules[0] as ExternalRule;
}

function answer(status: number, body: unknown) {
  return (_req: Record<string, unknown>, res: ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };
}

async function refusal(promise: Promise<unknown>): Promise<StatusError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof StatusError, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

test('the service gets the caller and cluster, and its answer is the identity; answers are cached', async () => {
  calls.length = 0;
  handler = answer(200, { status: { user: { username: 'mapped-alice', groups: ['team'], uid: 'x-1' } } });
  const exchanger = new ExternalIdentityExchanger({ maxEntries: 10 });
  try {
    const r = rule();
    const identity = await exchanger.exchange(r, 'cfg@1', alice, 'c1');
    assert.deepEqual(identity, { name: 'mapped-alice', groups: ['team'], uid: 'x-1', extra: {} });
    assert.deepEqual(calls[0], {
      apiVersion: 'gateway.cluster.core.oam.dev/v1alpha1',
      kind: 'IdentityExchangeReview',
      spec: {
        rule: 'external',
        cluster: 'c1',
        user: { username: 'ext-alice', uid: 'u1', groups: ['dev'], extra: { scopes: ['a'] } },
      },
    });
    // Same caller and cluster: from the cache. Concurrent identical lookups share one call.
    await Promise.all([
      exchanger.exchange(r, 'cfg@1', alice, 'c1'),
      exchanger.exchange(r, 'cfg@1', alice, 'c2'),
      exchanger.exchange(r, 'cfg@1', alice, 'c2'),
    ]);
    assert.equal(calls.length, 2);
    // Another generation of the configuration never reuses an answer.
    await exchanger.exchange(r, 'cfg@2', alice, 'c1');
    assert.equal(calls.length, 3);
  } finally {
    exchanger.close();
  }
});

test('cacheTTLSeconds 0 asks every time; the cache is bounded', async () => {
  calls.length = 0;
  handler = answer(200, { status: { user: { username: 'm' } } });
  const exchanger = new ExternalIdentityExchanger({ maxEntries: 2 });
  try {
    const uncached = rule({ cacheTTLSeconds: 0 });
    await exchanger.exchange(uncached, 'k', alice, 'c1');
    await exchanger.exchange(uncached, 'k', alice, 'c1');
    assert.equal(calls.length, 2);
    const cached = rule();
    for (const cluster of ['a', 'b', 'c', 'd']) await exchanger.exchange(cached, 'k', alice, cluster);
    assert.equal(exchanger.cachedAnswers, 2);
  } finally {
    exchanger.close();
  }
});

test('a service that is down is a 503, a slow one too, and nothing falls back', async () => {
  const exchanger = new ExternalIdentityExchanger({ maxEntries: 10 });
  try {
    const down = rule();
    (down.external as { url: URL }).url = new URL('https://127.0.0.1:1/');
    const refused = await refusal(exchanger.exchange(down, 'k', alice, 'c1'));
    assert.equal(refused.code, 503);
    assert.match(
      refused.message,
      /identity exchanger "external" \(127\.0\.0\.1:1\) is unavailable: .*ECONNREFUSED/,
    );
    assert.match(refused.message, /not forwarded to cluster "c1"/);

    handler = (_body, res) =>
      setTimeout(() => answer(200, { status: { user: { username: 'late' } } })(_body, res), 3000);
    const slow = await refusal(exchanger.exchange(rule({ timeoutSeconds: 1 }), 'k', alice, 'c1'));
    assert.equal(slow.code, 503);
    assert.match(slow.message, /no answer within 1s/);
    // A failure is not cached: the next call asks again (and succeeds).
    handler = answer(200, { status: { user: { username: 'back' } } });
    assert.equal((await exchanger.exchange(rule({ timeoutSeconds: 1 }), 'k', alice, 'c1')).name, 'back');
  } finally {
    exchanger.close();
  }
});

test('a server whose certificate the CA bundle does not vouch for is a 503, not a connection', async () => {
  const other = await createCertificateAuthority('someone-else');
  const exchanger = new ExternalIdentityExchanger({ maxEntries: 10 });
  try {
    handler = answer(200, { status: { user: { username: 'm' } } });
    const err = await refusal(exchanger.exchange(rule({ caBundle: other.cert }), 'k', alice, 'c1'));
    assert.equal(err.code, 503);
    assert.match(err.message, /certificate/);
  } finally {
    exchanger.close();
  }
});

test('errors and unusable answers are a 502; a denial is a 403 with the reason', async () => {
  const exchanger = new ExternalIdentityExchanger({ maxEntries: 10 });
  try {
    const cases: Array<[number, unknown, RegExp]> = [
      [500, { oops: true }, /answered HTTP 500/],
      [200, 'not json', /not JSON/],
      [200, { status: {} }, /no status\.user/],
      [200, { status: { user: { username: '' } } }, /username/],
      [200, { status: { user: { username: 'a\r\nImpersonate-User: admin' } } }, /username/],
      [200, { status: { user: { username: 'a', groups: 'admins' } } }, /groups/],
      [200, 'x'.repeat(70 * 1024), /more than 65536 bytes/],
    ];
    for (const [code, body, message] of cases) {
      handler = answer(code, body);
      const err = await refusal(exchanger.exchange(rule({ cacheTTLSeconds: 0 }), 'k', alice, 'c1'));
      assert.equal(err.code, 502, String(message));
      assert.match(err.message, message);
    }
    handler = answer(200, { status: { denied: true, reason: 'not on the rota' } });
    const denied = await refusal(exchanger.exchange(rule({ cacheTTLSeconds: 0 }), 'k', alice, 'c1'));
    assert.equal(denied.code, 403);
    assert.match(denied.message, /refused user "ext-alice" on cluster "c1": not on the rota/);
  } finally {
    exchanger.close();
  }
});

test('identityFrom keeps extra and uid, and refuses what cannot become a header', () => {
  assert.deepEqual(identityFrom({ username: 'a', extra: { k: ['v'] } }), {
    name: 'a',
    groups: [],
    extra: { k: ['v'] },
  });
  assert.match(String(identityFrom({ username: 'a', extra: { k: 'v' } })), /extra/);
  assert.match(String(identityFrom({ username: 'a', uid: 5 })), /uid/);
  assert.match(String(identityFrom('a')), /no status\.user/);
});
