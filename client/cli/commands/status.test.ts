import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ListFailure } from '../status/sources.ts';
import { statusNotes } from './status.ts';

const forbidden = (resource: string): ListFailure => ({
  resource,
  word: 'forbidden',
  missingPermission: `list ${resource} in all namespaces`,
  message: 'forbidden',
  connection: false,
});

test('one note per resource that could not be listed, naming the missing permission and every column it empties', () => {
  const leases = forbidden('leases.coordination.k8s.io');
  const notes = statusNotes(
    [
      ['addons', forbidden('managedclusteraddons.addon.open-cluster-management.io')],
      ['heartbeats', leases],
      ['tunnelLeases', leases],
    ],
    new Map(),
  );
  assert.deepEqual(notes, [
    'note: cannot list managedclusteraddons.addon.open-cluster-management.io (forbidden): missing permission list managedclusteraddons.addon.open-cluster-management.io in all namespaces; affects AVAILABLE and REASON',
    "note: cannot list leases.coordination.k8s.io (forbidden): missing permission list leases.coordination.k8s.io in all namespaces; affects HEARTBEAT; TUNNEL and REPLICA (taken from the ClusterGateways' status instead)",
  ]);
});

test('a failure that is not a permission says what happened; a refused /healthz names get clustergateways/proxy', () => {
  const notes = statusNotes(
    [
      [
        'gateways',
        {
          resource: 'clustergateways.cluster.core.oam.dev',
          word: 'unavailable',
          message: 'the server is currently unable to handle the request',
          connection: false,
        },
      ],
    ],
    new Map([
      ['c1', { ok: false, error: 'forbidden', code: 403 }],
      ['c2', { ok: true, milliseconds: 3 }],
    ]),
  );
  assert.deepEqual(notes, [
    'note: cannot list clustergateways.cluster.core.oam.dev (unavailable): the server is currently unable to handle the request; affects ENDPOINT, HEALTHY and HEALTHZ',
    'note: GET clustergateways/<cluster>/proxy/healthz forbidden for c1: missing permission get clustergateways/proxy (cluster.core.oam.dev); HEALTHZ shows forbidden',
  ]);
});
