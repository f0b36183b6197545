import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nodeChartValues } from './chart.ts';
import { imageValues } from './images.ts';

test('an image reference splits into the chart values registry, repository and tag', () => {
  assert.deepEqual(imageValues('localhost/cluster-gateway-ts:dev-0e90ffd11ab41e8b'), {
    registry: 'localhost',
    repository: 'cluster-gateway-ts',
    tag: 'dev-0e90ffd11ab41e8b',
  });
  assert.deepEqual(imageValues('registry.example.com:5000/team/cluster-gateway-ts:1.2.3'), {
    registry: 'registry.example.com:5000',
    repository: 'team/cluster-gateway-ts',
    tag: '1.2.3',
  });
  assert.throws(() => imageValues('cluster-gateway-ts'), /not an image reference with registry and tag/);
});

test('on real nodes the chart gets the image built here, never pulled, and the overrides last', () => {
  const values = nodeChartValues({ image: 'localhost/cluster-gateway-ts:dev-x' }, ['image.tag=other']);
  const set = values.filter((_, i) => i % 2 === 1);
  assert.ok(values.every((v, i) => (i % 2 === 0 ? v === '--set' : true)));
  assert.deepEqual(set.slice(0, 4), [
    'image.registry=localhost',
    'image.repository=cluster-gateway-ts',
    'image.tag=dev-x',
    'image.pullPolicy=Never',
  ]);
  assert.equal(set.at(-1), 'image.tag=other');
  // Nothing of the workarounds for a hub that cannot reach pods: the chart's own Service and webhook.
  assert.ok(!set.some((v) => /hostPort|serviceExternalName|webhook\.url/.test(v)), set.join(' '));
});
