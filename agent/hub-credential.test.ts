import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KubeClient, KubeObject } from '../shared/kube/client.ts';
import { StatusError } from '../shared/kube/status.ts';
import { desiredSecret, HubCredentialWriter, upToDate } from './hub-credential.ts';

const quiet = { info() {}, warn() {} };
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** A hub that keeps one Secret, and a spoke that issues numbered tokens. */
function fakes() {
  const state = {
    secret: undefined as (KubeObject & { data?: Record<string, string> }) | undefined,
    writes: [] as { path: string; body: KubeObject; contentType?: string }[],
    tokens: 0,
    tokenRequests: [] as string[],
    conflict: false,
  };
  const hub = {
    async getOptional(path: string) {
      assert.equal(path, '/api/v1/namespaces/creds/secrets/c1');
      return state.secret ? structuredClone(state.secret) : undefined;
    },
    async request(method: string, path: string, options: { body: KubeObject; contentType?: string }) {
      assert.equal(method, 'PATCH');
      if (state.conflict) throw new StatusError({ code: 409, message: 'conflict with "admin"' } as never);
      state.writes.push({
        path,
        body: options.body,
        ...(options.contentType ? { contentType: options.contentType } : {}),
      });
      state.secret = structuredClone(options.body);
      return state.secret;
    },
  } as unknown as KubeClient;
  const spoke = {
    async create(path: string, body: KubeObject & { spec: { expirationSeconds: number } }) {
      state.tokenRequests.push(`${path} ${body.spec.expirationSeconds}`);
      state.tokens++;
      return {
        status: {
          token: `token-${state.tokens}`,
          expirationTimestamp: new Date(Date.now() + 3600_000).toISOString(),
        },
      };
    },
  } as unknown as KubeClient;
  return { state, hub, spoke };
}

test('hub-credential: a token of the ServiceAccount and the CA, applied without force; renewed when due, not before', async () => {
  const { state, hub, spoke } = fakes();
  const writer = new HubCredentialWriter({
    cluster: 'c1',
    trustModel: 'hub-credential',
    namespace: 'creds',
    hub: () => hub,
    spoke: () => spoke,
    spokeCa: () => 'CA-PEM',
    serviceAccount: { namespace: 'agent-ns', name: 'proxy' },
    tokenSeconds: 3600,
    rotateSeconds: 1800,
    checkSeconds: 60,
    log: quiet,
  });
  const t0 = Date.now();
  assert.equal(await writer.round(t0), 'written');
  assert.deepEqual(state.tokenRequests, ['/api/v1/namespaces/agent-ns/serviceaccounts/proxy/token 3600']);
  const write = state.writes[0]!;
  assert.equal(write.path, '/api/v1/namespaces/creds/secrets/c1?fieldManager=cluster-gateway-agent');
  assert.ok(!write.path.includes('force'), 'never takes over fields another manager owns');
  assert.equal(write.contentType, 'application/apply-patch+yaml');
  const secret = write.body as KubeObject & { data: Record<string, string> };
  assert.deepEqual(secret.metadata?.labels, {
    'cluster.core.oam.dev/cluster-endpoint-type': 'ClusterProxy',
    'app.kubernetes.io/managed-by': 'cluster-gateway-agent',
    'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken',
  });
  assert.deepEqual(secret.data, { token: b64('token-1'), 'ca.crt': b64('CA-PEM') });
  // Nothing changed: no write, no new token.
  assert.equal(await writer.round(t0 + 1000), 'unchanged');
  assert.equal(state.tokens, 1);
  // Someone edits the token away: repaired with the same token.
  state.secret!.data = { token: b64('tampered') };
  assert.equal(await writer.round(t0 + 2000), 'written');
  assert.equal(state.tokens, 1);
  assert.equal(state.secret!.data?.token, b64('token-1'));
  // Half its life later: a new token.
  assert.equal(await writer.round(t0 + 1800_000), 'written');
  assert.equal(state.tokens, 2);
  assert.equal(state.secret!.data?.token, b64('token-2'));
});

test('no-credential: the labels alone, and a credential left in the Secret is not tolerated', async () => {
  const { state, hub, spoke } = fakes();
  const writer = new HubCredentialWriter({
    cluster: 'c1',
    trustModel: 'no-credential',
    namespace: 'creds',
    hub: () => hub,
    spoke: () => spoke,
    spokeCa: () => 'CA-PEM',
    tokenSeconds: 3600,
    rotateSeconds: 1800,
    checkSeconds: 60,
    log: quiet,
  });
  assert.equal(await writer.round(), 'written');
  assert.equal(state.tokens, 0, 'no token is ever requested');
  assert.equal((state.writes[0]!.body as { data?: unknown }).data, undefined);
  assert.equal(state.secret?.metadata?.labels?.['cluster.core.oam.dev/cluster-credential-type'], undefined);
  assert.equal(await writer.round(), 'unchanged');
  state.secret!.data = { token: b64('left over') };
  assert.equal(await writer.round(), 'written');
});

test('an admin’s Secret (not labelled as the agent’s) is never taken over, nor is a field conflict forced', async () => {
  const admins = fakes();
  admins.state.secret = {
    metadata: {
      name: 'c1',
      labels: { 'cluster.core.oam.dev/cluster-credential-type': 'ServiceAccountToken' },
    },
    data: { token: b64('admin') },
  };
  const guarded = new HubCredentialWriter({
    cluster: 'c1',
    trustModel: 'hub-credential',
    namespace: 'creds',
    hub: () => admins.hub,
    spoke: () => admins.spoke,
    spokeCa: () => undefined,
    serviceAccount: { namespace: 'ns', name: 'proxy' },
    tokenSeconds: 3600,
    rotateSeconds: 1800,
    checkSeconds: 60,
    log: quiet,
  });
  await assert.rejects(
    guarded.round(),
    (err: unknown) => err instanceof StatusError && err.code === 409 && /not taken over/.test(err.message),
  );
  assert.equal(admins.state.writes.length, 0);
  assert.equal(admins.state.secret.data?.token, b64('admin'));

  const { state, hub, spoke } = fakes();
  state.conflict = true;
  const results: string[] = [];
  const writer = new HubCredentialWriter({
    cluster: 'c1',
    trustModel: 'no-credential',
    namespace: 'creds',
    hub: () => hub,
    spoke: () => spoke,
    spokeCa: () => undefined,
    tokenSeconds: 3600,
    rotateSeconds: 1800,
    checkSeconds: 60,
    log: quiet,
    onResult: (r) => results.push(r),
  });
  const stop = new AbortController();
  const loop = writer.run(stop.signal);
  await new Promise((r) => setTimeout(r, 50));
  stop.abort();
  await loop;
  assert.deepEqual(results, ['conflict']);
});

test('upToDate ignores fields of other managers but not missing or different ones', () => {
  const desired = desiredSecret(
    { cluster: 'c1', namespace: 'creds', trustModel: 'no-credential' },
    undefined,
    undefined,
  );
  const current = structuredClone(desired) as KubeObject;
  (current.metadata!.labels as Record<string, string>).team = 'a';
  (current.metadata as Record<string, unknown>).annotations = {
    ...(desired.metadata?.annotations as object),
    'status.cluster.core.oam.dev/healthy': 'true',
  };
  assert.equal(upToDate(current, desired), true);
  assert.equal(upToDate(undefined, desired), false);
  delete (current.metadata!.labels as Record<string, string>)['cluster.core.oam.dev/cluster-endpoint-type'];
  assert.equal(upToDate(current, desired), false);
});
