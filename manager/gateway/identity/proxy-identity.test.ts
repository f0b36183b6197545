import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UserInfo } from '../../../shared/identity/user.ts';
import { failureStatus, StatusError } from '../../../shared/kube/status.ts';
import { INLINE_CONFIGURATION_ANNOTATION, type ProxyConfiguration } from './configuration.ts';
import { ProxyConfigurationStore } from './configuration-store.ts';
import type { ExternalRule } from './external-exchanger.ts';
import { ProxyIdentity } from './proxy-identity.ts';
import { validateSpec } from './validate.ts';

const seed = validateSpec(
  {
    clientIdentityExchanger: {
      rules: [
        {
          name: 'super-user',
          source: { group: 'sudoer' },
          type: 'PrivilegedIdentityExchanger',
          priority: 10,
        },
        {
          name: 'mapping',
          source: { user: 'user-12345', cluster: 'cluster-34567' },
          target: { user: 'user-34567', groups: ['mapped'], uid: 'u-34567' },
          type: 'StaticMappingIdentityExchanger',
          priority: 100,
        },
        {
          name: 'external',
          source: { userPattern: '^ext-' },
          url: 'https://exchanger.example/',
          type: 'ExternalIdentityExchanger',
          priority: 20,
        },
      ],
    },
  },
  'global',
);

const user = (name: string, groups: string[] = []): UserInfo => ({
  name,
  uid: 'hub-uid',
  groups,
  extra: { scopes: ['x'] },
});

interface Call {
  rule: string;
  key: string;
  user: string;
  cluster: string;
}

function setup(
  options: {
    file?: ProxyConfiguration;
    penetrateAll?: boolean;
    authorizeProxySubpath?: boolean;
    fail?: StatusError;
  } = {},
) {
  const calls: Call[] = [];
  const store = new ProxyConfigurationStore({
    file: options.file ?? seed,
    globalObjectName: '',
    watchesObjects: false,
  });
  const identity = new ProxyIdentity({
    store,
    external: {
      exchange: async (rule: ExternalRule, key: string, u: UserInfo, cluster: string) => {
        calls.push({ rule: rule.name, key, user: u.name, cluster });
        if (options.fail) throw options.fail;
        return { name: `mapped-${u.name}`, groups: ['ext-team'], extra: {} };
      },
    },
    penetrateAll: options.penetrateAll ?? false,
    authorizeProxySubpath: options.authorizeProxySubpath ?? false,
  });
  return { identity, calls };
}

const on = new URLSearchParams('impersonate=true');
const off = new URLSearchParams();
const cluster = (name: string, annotations: Record<string, string> = {}) => ({ name, annotations });

async function identityOf(id: ProxyIdentity, u: UserInfo, c: string, query = on) {
  return id.identityFor(u, c, id.plan(cluster(c)), query);
}

test('without penetration the cluster sees the gateway credential, whatever the rules say', async () => {
  const { identity, calls } = setup();
  assert.deepEqual(await identityOf(identity, user('ext-alice'), 'c1', off), { mode: 'cluster-credential' });
  assert.deepEqual(await identityOf(identity, user('user-12345'), 'cluster-34567', off), {
    mode: 'cluster-credential',
  });
  assert.equal(calls.length, 0);
});

test("the seed's example: mapped, privileged, external, and the hub identity when nothing matches", async () => {
  const { identity, calls } = setup();
  const mapped = await identityOf(identity, user('user-12345'), 'cluster-34567');
  assert.deepEqual(mapped, {
    identity: { name: 'user-34567', groups: ['mapped'], uid: 'u-34567', extra: {} },
    mode: 'static-mapping',
    rule: { name: 'mapping', origin: 'global' },
  });
  const sudo = await identityOf(identity, user('bob', ['sudoer']), 'cluster-34567');
  assert.deepEqual(sudo, { mode: 'privileged', rule: { name: 'super-user', origin: 'global' } });
  assert.equal(sudo.identity, undefined, 'no impersonation: the cluster credential');
  const ext = await identityOf(identity, user('ext-alice'), 'c9');
  assert.equal(ext.identity?.name, 'mapped-ext-alice');
  assert.equal(ext.mode, 'external');
  assert.deepEqual(calls, [{ rule: 'external', key: 'global#', user: 'ext-alice', cluster: 'c9' }]);
  // user-12345 elsewhere: no rule, the hub identity passes through (without the hub uid, as before).
  const passed = await identityOf(identity, user('user-12345'), 'cluster-1');
  assert.deepEqual(passed, {
    identity: { name: 'user-12345', groups: [], extra: { scopes: ['x'] } },
    mode: 'caller',
  });
});

test('the ClientIdentityPenetration gate applies the rules to every request', async () => {
  const { identity } = setup({ penetrateAll: true });
  assert.equal(
    (await identityOf(identity, user('user-12345'), 'cluster-34567', off)).identity?.name,
    'user-34567',
  );
});

test('a failing external exchanger fails the request: never the cluster credential, never the next rule', async () => {
  const fail = new StatusError(failureStatus(503, 'identity exchanger "external" is unavailable'));
  const { identity } = setup({ fail });
  // ext-bob is also a sudoer: the privileged rule has a lower priority and must not be used instead.
  await assert.rejects(
    identityOf(identity, user('ext-bob', ['sudoer']), 'c1'),
    (err: unknown) => err === fail,
  );
});

test("a cluster's own rules come before the global ones", async () => {
  const { identity } = setup();
  const annotated = cluster('cluster-34567', {
    [INLINE_CONFIGURATION_ANNOTATION]: `spec:
  clientIdentityExchanger:
    rules:
    - name: local
      type: StaticMappingIdentityExchanger
      source: {user: user-12345}
      target: {user: local-user}
      priority: -100
`,
  });
  const plan = identity.plan(annotated);
  const result = await identity.identityFor(user('user-12345'), 'cluster-34567', plan, on);
  assert.equal(result.identity?.name, 'local-user');
  assert.match(result.rule?.origin ?? '', /annotation .* of cluster "cluster-34567"/);
});

test('local authorization: the flag, the global or the cluster configuration turns it on; none turns it off', () => {
  const withSubpath = (value: boolean) => validateSpec({ authorizeProxySubpath: value }, 'g');
  const clusterSays = (value: boolean) =>
    cluster('c1', { [INLINE_CONFIGURATION_ANNOTATION]: `spec: {authorizeProxySubpath: ${value}}` });
  assert.equal(setup({ file: withSubpath(false) }).identity.plan(cluster('c1')).authorizeProxySubpath, false);
  assert.equal(setup({ file: withSubpath(true) }).identity.plan(cluster('c1')).authorizeProxySubpath, true);
  assert.equal(
    setup({ file: withSubpath(false) }).identity.plan(clusterSays(true)).authorizeProxySubpath,
    true,
  );
  assert.equal(
    setup({ file: withSubpath(true) }).identity.plan(clusterSays(false)).authorizeProxySubpath,
    true,
  );
  assert.equal(
    setup({ file: withSubpath(false), authorizeProxySubpath: true }).identity.plan(clusterSays(false))
      .authorizeProxySubpath,
    true,
  );
});
