import assert from 'node:assert/strict';
import { test } from 'node:test';
import { accessRecord, logProxiedRequest } from './access-log.ts';

const alice = { name: 'alice', groups: ['dev'], extra: { token: ['not-logged'] } };

function capture() {
  const lines: Array<{ fields: Record<string, unknown>; message: string }> = [];
  return {
    lines,
    log: {
      info: (fields: object, message: string) =>
        lines.push({ fields: fields as Record<string, unknown>, message }),
    },
  };
}

test('one line with caller, identity on the cluster, rule, cluster, verb, path and code; no query', () => {
  const { lines, log } = capture();
  logProxiedRequest(log, {
    cluster: 'cluster-34567',
    method: 'GET',
    upstreamPath: '/api/v1/namespaces/ns1/configmaps?labelSelector=secret%3Dvalue',
    code: 200,
    durationMs: 12.345,
    access: accessRecord(alice, {
      identity: { name: 'user-34567', groups: ['mapped'], extra: {} },
      mode: 'static-mapping',
      rule: { name: 'mapping', origin: 'ClusterGatewayProxyConfiguration "cluster-gateway" generation 2' },
    }),
  });
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.message, 'proxied request');
  assert.deepEqual(lines[0]!.fields, {
    cluster: 'cluster-34567',
    verb: 'list',
    method: 'GET',
    path: '/api/v1/namespaces/ns1/configmaps',
    code: 200,
    durationMs: 12.3,
    user: 'alice',
    as: 'static-mapping',
    clusterUser: 'user-34567',
    clusterGroups: ['mapped'],
    rule: 'mapping',
    ruleOrigin: 'ClusterGatewayProxyConfiguration "cluster-gateway" generation 2',
  });
  assert.doesNotMatch(JSON.stringify(lines), /secret%3Dvalue|not-logged/);
});

test('the cluster credential and refusals are named, never shown', () => {
  assert.deepEqual(accessRecord(alice, { mode: 'privileged', rule: { name: 'super', origin: 'g' } }), {
    user: 'alice',
    as: 'privileged',
    rule: 'super',
    ruleOrigin: 'g',
  });
  assert.deepEqual(accessRecord(alice), { user: 'alice', as: 'refused' });
  const { lines, log } = capture();
  logProxiedRequest(log, {
    cluster: 'c',
    method: 'POST',
    upstreamPath: '',
    code: 403,
    access: accessRecord(alice),
  });
  assert.equal(lines[0]!.fields.path, '/');
  assert.equal(lines[0]!.fields.code, 403);
});
