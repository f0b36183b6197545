/**
 * A bounded, deterministic fuzz of proxy paths, queries and headers through
 * a gateway run with --authorize-proxy-subpath, against the real hub and
 * cluster1. For every case, on real evidence (the apiservers' audit logs):
 *
 * - the gateway answers, and it is still alive and serving at the end;
 * - no 5xx comes from the gateway itself: a 5xx is one cluster1 answered;
 * - nothing reaches cluster1 without a SubjectAccessReview that allowed it;
 * - the SubjectAccessReview the gateway asked the hub (hub audit log,
 *   RequestResponse) has exactly the attributes cluster1 derived from what
 *   it received (cluster1 audit log: verb, objectRef or path);
 * - cluster1 never sees an identity other than the gateway's or the caller's.
 *
 * Each case runs as its own user (fuzz-<n>), so its reviews are its own and
 * never cached; a final `cgfuzz=<run>-<n>` query segment finds its audit events.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../hack/localenv/wait.ts';
import { goPathUnescape } from '../manager/gateway/auth/go-url.ts';
import type { KubeClient } from '../shared/kube/client.ts';
import { type AuditEvent, auditEvents, subjectAccessReviews } from './support/audit.ts';
import { hubClient } from './support/environment.ts';
import { type RawResponse, rawRequest } from './support/raw-request.ts';
import { grantOnHub, hubGroup, revokeOnHub } from './support/rbac.ts';
import { type SecondGateway, startSecondGateway } from './support/second-gateway.ts';
import { proxyPrefix } from './support/users.ts';

const seed = 0x5eed_c6a7;
const cases = 300;
const group = 'cg-fuzzers';
const runId = Date.now().toString(36);

let hub: KubeClient;
let gateway: SecondGateway;

before(async () => {
  hub = await hubClient();
  await grantOnHub(
    hub,
    group,
    [hubGroup(group)],
    [
      { apiGroups: ['cluster.core.oam.dev'], resources: ['clustergateways/proxy'], verbs: ['*'] },
      // Reads only: every mutation the fuzz sends is refused by the hub, never run on cluster1.
      { apiGroups: ['', 'apps'], resources: ['*'], verbs: ['get', 'list', 'watch'] },
      { nonResourceURLs: ['*'], verbs: ['get', 'head'] },
    ],
  );
  gateway = await startSecondGateway('gateway-security-fuzz', ['--authorize-proxy-subpath']);
  await waitFor('the fuzz group to be allowed', async () => {
    const res = await send(-1, 'GET', `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default`, []);
    return res.status === 200;
  });
});

after(async () => {
  gateway?.stop();
  await revokeOnHub(hub, group);
  hub?.close();
});

function userOf(n: number): string {
  return `fuzz-${runId}-${n}`;
}

function send(n: number, method: string, target: string, headers: string[]): Promise<RawResponse> {
  return rawRequest(gateway.url, method, target, {
    frontProxy: true,
    headers: ['X-Remote-User', userOf(n), 'X-Remote-Group', group, ...headers],
    timeoutMs: 20_000,
  });
}

/** mulberry32: small, deterministic, good enough to pick from lists. */
function random(initial: number): (n: number) => number {
  let state = initial;
  return (n) => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
}

const templates = [
  ['api', 'v1', 'namespaces', 'default', 'configmaps'],
  ['api', 'v1', 'namespaces', 'default', 'configmaps', 'kube-root-ca.crt'],
  ['api', 'v1', 'namespaces', 'kube-system', 'secrets'],
  ['api', 'v1', 'namespaces', 'default', 'serviceaccounts', 'default'],
  ['api', 'v1', 'namespaces', 'default', 'pods', 'web-0', 'log'],
  ['api', 'v1', 'namespaces', 'default', 'services', 'web', 'proxy', 'x'],
  ['api', 'v1', 'namespaces', 'default'],
  ['api', 'v1', 'namespaces', 'default', 'status'],
  ['api', 'v1', 'nodes'],
  ['api', 'v1', 'watch', 'namespaces', 'default', 'configmaps'],
  ['api', 'v1', 'proxy', 'namespaces', 'default', 'services', 'web'],
  ['apis', 'apps', 'v1', 'namespaces', 'default', 'deployments'],
  ['apis', 'apps', 'v1'],
  ['api', 'v1'],
  ['version'],
  ['healthz'],
  ['apis'],
];
const oddSegments = [
  '',
  '.',
  '..',
  '%2e',
  '%2E%2E',
  'a%2Fb',
  '%2f',
  'x;y',
  ';',
  '%3B',
  '%25',
  '%252F',
  'secrets',
  'configmaps',
  'default',
  'kube-system',
  'watch',
  'proxy',
  'status',
  'namespaces',
  '%73ecrets',
  'kube-root-ca.crt',
  '%FF',
  '%C3%A9',
  'a+b',
  '~',
  '@',
  ':',
  'x%00',
];
const queryAtoms = [
  'watch=1',
  'watch=true',
  'watch=false',
  'watch=FALSE',
  'watch=fal%C5%BFe',
  'watch=',
  'watch',
  'watch=0;',
  'fieldSelector=metadata.name=kube-root-ca.crt',
  'fieldSelector=metadata.name%3Ddefault',
  'fieldSelector=metadata.name=default,x=;',
  'fieldSelector=metadata.name=default%zz',
  'fieldSelector=metadata.name==default',
  'fieldSelector=metadata.name!=default',
  'fieldSelector=%20metadata.name=default',
  'fieldSelector=metadata.name=a\\,b',
  'fieldSelector=metadata.name=a\\x',
  'fieldSelector=metadata.name=zz,metadata.name=default',
  'fieldSelector=metadata.name=..',
  'fieldSelector=metadata.name=a%2Fb',
  'fieldSelector=metadata.name=%E2%82',
  'fieldSelector=metadata.namespace=default',
  'labelSelector=app%3Dweb',
  'labelSelector=app+in+(a,b)',
  'labelSelector=app+in+(a',
  'labelSelector=!app',
  'labelSelector=%3D',
  'limit=5',
  'limit=x',
  'limit=+3',
  'timeoutSeconds=x',
  'resourceVersion=0',
  'impersonate=true',
  'impersonate=true;',
  'a=%zz',
  '%',
  ';',
  '&',
  '=',
  '==',
  'a=b=c',
  '+=+',
  '%26=%3D',
  'dryRun=All',
  'pretty=true',
  'follow=true',
  'x=%C0%AF',
];
const headerAtoms = [
  ['Impersonate-User', 'system:admin'],
  ['Impersonate-Group', 'system:masters'],
  ['Impersonate-Uid', '0'],
  ['Impersonate-Extra-Scopes', 'all'],
  ['Authorization', 'Bearer not-a-token'],
  ['X-Forwarded-For', '10.0.0.1'],
  ['Accept', 'application/vnd.kubernetes.protobuf'],
  ['Accept', 'application/json;as=Table;v=v1;g=meta.k8s.io'],
  ['Connection', 'close'],
  ['Connection', 'X-Foo', 'X-Foo', 'bar'],
  ['Content-Type', 'application/json'],
  ['User-Agent', 'fuzz/'.repeat(800)],
  ['Accept-Encoding', 'gzip'],
  ['TE', 'trailers'],
  ['Via', '1.1 fuzz'],
  ['Audit-ID', 'spoofed-audit-id'],
  ['X-Remote-Extra-Scopes', 'admin'],
];
const methods = ['GET', 'GET', 'GET', 'GET', 'HEAD', 'DELETE', 'POST', 'PUT', 'PATCH', 'OPTIONS'];

interface FuzzCase {
  n: number;
  method: string;
  target: string;
  headers: string[];
}

function generate(): FuzzCase[] {
  const rnd = random(seed);
  const pick = <T>(list: readonly T[]): T => list[rnd(list.length)]!;
  return Array.from({ length: cases }, (_, n) => {
    const segments = [...pick(templates)];
    for (let k = rnd(3); k > 0; k--) {
      const at = rnd(segments.length + 1);
      if (rnd(2) === 0 && at < segments.length) segments[at] = pick(oddSegments);
      else segments.splice(at, 0, pick(oddSegments));
    }
    if (rnd(6) === 0 && segments.length > 0) {
      // Percent-encode one character of a segment, as a client may.
      const at = rnd(segments.length);
      const segment = segments[at]!;
      const i = rnd(Math.max(segment.length, 1));
      if (segment[i] && /[a-z]/.test(segment[i]!)) {
        segments[at] = `${segment.slice(0, i)}%${segment.charCodeAt(i).toString(16)}${segment.slice(i + 1)}`;
      }
    }
    const path = `/${segments.join(rnd(8) === 0 ? '//' : '/')}${rnd(8) === 0 ? '/' : ''}`;
    const query = [
      'timeoutSeconds=1',
      ...Array.from({ length: rnd(5) }, () => pick(queryAtoms)),
      `cgfuzz=${runId}-${n}`,
    ];
    const headers = Array.from({ length: rnd(3) }, () => pick(headerAtoms)).flat();
    const method = pick(methods);
    return { n, method, target: `${proxyPrefix}/cluster1/proxy${path}?${query.join('&')}`, headers };
  });
}

type Attributes = Record<string, string>;

/** Attributes without empty values (so "" and absent compare equal), keys sorted. */
function compact(attributes: Record<string, unknown>): Attributes {
  const out: Attributes = {};
  for (const key of Object.keys(attributes).sort()) {
    const value = attributes[key];
    if (typeof value === 'string' && value) out[key] = value;
  }
  return out;
}

/** What cluster1 derived from the request it received, in SubjectAccessReview terms. */
function receivedAttributes(event: AuditEvent): { resource?: Attributes; nonResource?: Attributes } {
  if (event.objectRef) {
    const o = event.objectRef;
    return {
      resource: compact({
        verb: event.verb,
        group: o.apiGroup,
        version: o.apiVersion,
        resource: o.resource,
        subresource: o.subresource,
        name: o.name,
        namespace: o.namespace,
      }),
    };
  }
  const rawPath = event.requestURI.split('?')[0] ?? '';
  return { nonResource: compact({ verb: event.verb, path: goPathUnescape(rawPath) ?? rawPath }) };
}

test(`${cases} fuzzed proxy requests: no crash, no 5xx of the gateway's own, reviews match what the cluster received`, async () => {
  const fuzz = generate();
  const responses = new Map<number, RawResponse | Error>();
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < fuzz.length) {
        const c = fuzz[next++]!;
        responses.set(
          c.n,
          await send(c.n, c.method, c.target, c.headers).catch((err: unknown) =>
            err instanceof Error ? err : new Error(String(err)),
          ),
        );
      }
    }),
  );
  const elapsed = Date.now() - started;
  assert.ok(gateway.alive(), 'the gateway process is alive');
  assert.equal((await rawRequest(gateway.url, 'GET', '/readyz')).status, 200);

  // Audit events are written as responses complete; give the last ones a moment.
  const last = fuzz.at(-1)!;
  await waitFor('the audit logs to hold the last cases', () =>
    subjectAccessReviews().some((r) => r.spec.user === userOf(last.n)),
  ).catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const reviews = subjectAccessReviews().filter((r) => r.spec.user.startsWith(`fuzz-${runId}-`));
  const events = auditEvents('cluster1');
  const marker = new RegExp(`[?&]cgfuzz=${runId}-(\\d+)(?:&|$)`);
  const eventsByCase = new Map<number, AuditEvent[]>();
  for (const event of events) {
    const m = marker.exec(event.requestURI);
    if (m) eventsByCase.set(Number(m[1]), [...(eventsByCase.get(Number(m[1])) ?? []), event]);
  }

  const failures: string[] = [];
  const tally = { forwarded: 0, denied: 0, refusedBeforeReview: 0, clusterErrors: 0 };
  for (const c of fuzz) {
    const describeCase = `#${c.n} ${c.method} ${c.target} ${JSON.stringify(c.headers).slice(0, 120)}`;
    const res = responses.get(c.n);
    if (!res || res instanceof Error) {
      failures.push(`${describeCase}: no answer (${res?.message})`);
      continue;
    }
    const received = eventsByCase.get(c.n) ?? [];
    const inner = reviews.filter(
      (r) => r.spec.user === userOf(c.n) && r.spec.resourceAttributes?.resource !== 'clustergateways',
    );
    if (res.status >= 500 && !received.some((e) => e.responseStatus?.code === res.status)) {
      failures.push(`${describeCase}: ${res.status} from the gateway itself: ${res.body.slice(0, 300)}`);
    }
    for (const e of received) {
      if (e.impersonatedUser && e.impersonatedUser.username !== userOf(c.n)) {
        failures.push(`${describeCase}: cluster1 saw impersonated user ${e.impersonatedUser.username}`);
      }
    }
    if (inner.length === 0) {
      tally.refusedBeforeReview++;
      if (received.length > 0)
        failures.push(`${describeCase}: reached cluster1 without a review of the proxied request`);
      continue;
    }
    if (inner.length > 1) failures.push(`${describeCase}: ${inner.length} reviews of the proxied request`);
    const review = inner[0]!;
    if (!review.allowed) {
      tally.denied++;
      if (received.length > 0) failures.push(`${describeCase}: denied by the hub, yet reached cluster1`);
      if (res.status !== 403) failures.push(`${describeCase}: denied by the hub, answered ${res.status}`);
      continue;
    }
    if (received.length === 0) {
      failures.push(
        `${describeCase}: allowed (${JSON.stringify(review.spec)}), answered ${res.status}, never reached cluster1`,
      );
      continue;
    }
    tally.forwarded++;
    if (res.status >= 500) tally.clusterErrors++;
    const asked = review.spec.resourceAttributes
      ? { resource: compact(review.spec.resourceAttributes) }
      : { nonResource: compact(review.spec.nonResourceAttributes ?? {}) };
    for (const e of received) {
      const got = receivedAttributes(e);
      if (JSON.stringify(got) !== JSON.stringify(asked)) {
        failures.push(
          `${describeCase}: authorized ${JSON.stringify(asked)}, cluster1 received ${JSON.stringify(got)} (${e.requestURI})`,
        );
      }
    }
  }
  process.stderr.write(
    `fuzz seed ${seed}: ${cases} cases in ${elapsed} ms: ${JSON.stringify(tally)}; failures ${failures.length}\n`,
  );
  assert.deepEqual(failures.slice(0, 20), []);
  assert.ok(
    tally.forwarded > cases / 5,
    `enough cases reached the cluster to mean something (${tally.forwarded})`,
  );
  assert.ok(tally.denied > 0, 'some cases were refused by the hub');

  // Legitimate traffic still works after the fuzz.
  const ok = await send(
    -2,
    'GET',
    `${proxyPrefix}/cluster1/proxy/api/v1/namespaces/default/configmaps/kube-root-ca.crt`,
    [],
  );
  assert.equal(ok.status, 200, ok.body);
  assert.ok(gateway.alive());
});
