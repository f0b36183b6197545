import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gatewayAvailability } from './availability.ts';

test('missing, unavailable (with the Deployment condition), available with one replica', () => {
  assert.deepEqual(gatewayAvailability(undefined, 'gw'), {
    available: false,
    reason: 'GatewayDeploymentMissing',
    message: 'the gateway Deployment gw does not exist yet',
  });
  const down = gatewayAvailability(
    {
      spec: { replicas: 2 },
      status: { conditions: [{ type: 'Available', status: 'False', message: 'ImagePullBackOff' }] },
    },
    'gw',
  );
  assert.equal(down.available, false);
  assert.match(down.message, /^0\/2 gateway replicas available \(ImagePullBackOff\)/);
  assert.deepEqual(gatewayAvailability({ spec: { replicas: 2 }, status: { availableReplicas: 1 } }, 'gw'), {
    available: true,
    message: '1/2 gateway replicas available',
  });
});
