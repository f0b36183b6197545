/**
 * Least privilege, checked: the chart rendered by the real helm, with the gateway's rules
 * (manager/addon/gateway-deploy/rbac.ts, which the manager grants), holds no broad grant (broad-grants.ts:
 * a sensitive resource or verb without resourceNames, or a wildcard) that is not on the reviewed list of
 * docs/install.md, "Permissions: the broad grants and why", each with its reason; and no row of that list
 * is stale.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../hack/localenv/binaries.ts';
import { gatewayNames } from '../manager/addon/gateway-deploy/names.ts';
import { gatewayRbac } from '../manager/addon/gateway-deploy/rbac.ts';
import {
  broadGrants,
  compareWithReviewed,
  type Grant,
  parseReviewed,
  type Rule,
  sensitive,
} from './broad-grants.ts';

import { chart, helm, helmMissing } from './chart-under-test.ts';

const run = promisify(execFile);
const docs = path.join(repoRoot, 'docs', 'install.md');
const releaseNamespace = 'cg-system';

interface RoleObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Rule[];
}

/** Every broad grant of the chart rendered with `set`, and of the gateway the manager it renders deploys. */
async function grantsOf(set: Record<string, string> = {}): Promise<Grant[]> {
  const args = Object.entries(set).flatMap(([k, v]) => ['--set', `${k}=${v}`]);
  const { stdout } = await run(helm, ['template', 'cg', chart, '--namespace', releaseNamespace, ...args]);
  const objects = parseAllDocuments(stdout)
    .map((d) => d.toJS() as RoleObject | null)
    .filter((o): o is RoleObject => !!o);
  // The release's base name (cg + the chart's name) makes the manager's: see _helpers.tpl.
  const manager = 'cg-cluster-gateway-addon-manager';
  const credentialNamespace =
    set['gateway.credentialNamespace.name'] ?? 'open-cluster-management-credentials';
  const scopeOf = (o: RoleObject) =>
    o.kind === 'ClusterRole'
      ? 'hub-wide'
      : o.metadata.namespace === releaseNamespace
        ? 'release namespace'
        : o.metadata.namespace === credentialNamespace
          ? 'credential namespace'
          : `namespace ${o.metadata.namespace}`;
  const roles = (list: RoleObject[], subject: (o: RoleObject) => string) =>
    list
      .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
      .flatMap((o) => broadGrants(subject(o), scopeOf(o), o.rules ?? []));
  const chartGrants = roles(objects, (o) => (o.metadata.name === manager ? 'manager' : o.metadata.name));
  if (set['gateway.enabled'] === 'false') return chartGrants;
  const gateway = gatewayRbac(
    gatewayNames(releaseNamespace, set['gateway.name'] ?? 'cluster-gateway', credentialNamespace),
    {},
  ) as RoleObject[];
  return [...chartGrants, ...roles(gateway, () => 'gateway')];
}

const show = (g: Grant) => `| ${g.subject} | ${g.scope} | \`${g.resource}\` | ${g.verb} | <why> |`;

describe('permissions: every broad grant is reviewed', { skip: helmMissing }, () => {
  const reviewed = parseReviewed(readFileSync(docs, 'utf8'));

  test('the chart and the gateway: each broad grant is on the reviewed list, and no row is stale', async () => {
    const { unreviewed, stale } = compareWithReviewed(await grantsOf(), reviewed);
    assert.deepEqual(
      unreviewed.map(show),
      [],
      'broad grants not on the reviewed list of docs/install.md: name the objects (resourceNames), or add a row with the reason',
    );
    assert.deepEqual(stale, [], 'rows of the reviewed list no grant needs any more: remove them');
  });

  test('other values (gateway off, other names) add no unreviewed broad grant', async () => {
    const sets: Record<string, string>[] = [
      { 'gateway.enabled': 'false' },
      { 'gateway.name': 'gw2', 'gateway.credentialNamespace.name': 'creds', 'addon.name': 'other' },
    ];
    for (const set of sets) {
      const { unreviewed } = compareWithReviewed(await grantsOf(set), reviewed);
      assert.deepEqual(unreviewed.map(show), [], JSON.stringify(set));
    }
  });

  test('every reviewed row says why', () => {
    assert.ok(reviewed.length > 0);
    for (const row of reviewed) {
      assert.ok(row.reason.length >= 40, `docs/install.md:${row.line}: a reason of a sentence at least`);
      assert.ok(['manager', 'gateway'].includes(row.subject), `docs/install.md:${row.line}: who`);
    }
  });
});

test('broad grants: what the check flags and what it lets through', () => {
  const flagged = (rule: Rule) => broadGrants('s', 'hub-wide', [rule]).map((g) => `${g.resource} ${g.verb}`);
  assert.deepEqual(flagged({ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }), ['secrets get']);
  assert.deepEqual(
    flagged({ apiGroups: [''], resources: ['secrets'], resourceNames: ['tls'], verbs: ['get'] }),
    [],
  );
  assert.deepEqual(flagged({ apiGroups: [''], resources: ['configmaps'], verbs: ['*'] }), ['configmaps *']);
  assert.deepEqual(flagged({ apiGroups: ['*'], resources: ['pods'], resourceNames: ['x'], verbs: ['get'] }), [
    'pods.* get',
  ]);
  assert.deepEqual(
    flagged({
      apiGroups: ['rbac.authorization.k8s.io'],
      resources: ['clusterroles'],
      verbs: ['get', 'bind'],
    }),
    ['clusterroles.rbac.authorization.k8s.io bind'],
  );
  assert.deepEqual(
    flagged({
      apiGroups: ['cluster.open-cluster-management.io'],
      resources: ['managedclusters'],
      verbs: ['get', 'list', 'patch'],
    }),
    ['managedclusters.cluster.open-cluster-management.io patch'],
  );
  assert.deepEqual(flagged({ apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] }), [
    'users impersonate',
    'groups impersonate',
  ]);
  assert.deepEqual(
    flagged({
      apiGroups: ['addon.open-cluster-management.io'],
      resources: ['managedclusteraddons/status'],
      verbs: ['patch'],
    }),
    ['managedclusteraddons/status.addon.open-cluster-management.io patch'],
  );
  assert.ok(sensitive('coordination.k8s.io', 'leases', 'get'));
  assert.ok(sensitive('apiregistration.k8s.io', 'apiservices', 'create'));
  assert.ok(!sensitive('work.open-cluster-management.io', 'manifestworks', 'list'));
  assert.ok(sensitive('work.open-cluster-management.io', 'manifestworks', 'delete'));
  assert.deepEqual(flagged({ nonResourceURLs: ['*'], verbs: ['get'] }), ['nonResourceURLs * get']);
});

test('the reviewed list: rows parsed, stale rows and missing rows found', () => {
  const markdown = [
    '## Permissions: the broad grants and why',
    '',
    '| who | where | resource | verbs | why |',
    '| --- | --- | --- | --- | --- |',
    '| manager | hub-wide | `leases.coordination.k8s.io` | `create`, `list` | heartbeat Leases in namespaces not known in advance |',
    '',
    '## Next',
    '| gateway | hub-wide | `secrets` | get | not in the section |',
  ].join('\n');
  const rows = parseReviewed(markdown);
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0]?.verbs, ['create', 'list']);
  const { unreviewed, stale } = compareWithReviewed(
    [
      { subject: 'manager', scope: 'hub-wide', resource: 'leases.coordination.k8s.io', verb: 'create' },
      { subject: 'manager', scope: 'hub-wide', resource: 'secrets', verb: 'get' },
    ],
    rows,
  );
  assert.deepEqual(unreviewed, [{ subject: 'manager', scope: 'hub-wide', resource: 'secrets', verb: 'get' }]);
  assert.deepEqual(stale, ['manager | hub-wide | leases.coordination.k8s.io | list']);
  assert.throws(() => parseReviewed('# nothing here'), /no "## Permissions: the broad grants and why"/);
});
