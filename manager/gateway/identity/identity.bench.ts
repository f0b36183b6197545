/**
 * What the identity decision and its access-log line cost per proxied request, in-process
 * (`npm run bench:identity`): the rules of the seed's example, 200,000 requests after a warm-up,
 * with impersonation on and off, with and without the log line (pino to /dev/null).
 */
import pino from 'pino';
import { accessRecord, logProxiedRequest } from './access-log.ts';
import { ProxyConfigurationStore } from './configuration-store.ts';
import { ExternalIdentityExchanger } from './external-exchanger.ts';
import { ProxyIdentity } from './proxy-identity.ts';
import { validateSpec } from './validate.ts';

const file = validateSpec(
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
          target: { user: 'user-34567' },
          type: 'StaticMappingIdentityExchanger',
          priority: 100,
        },
        {
          name: 'pattern',
          source: { userPattern: '^team-.*', clusterPattern: 'prod-\\d+' },
          target: { user: 'x' },
          type: 'StaticMappingIdentityExchanger',
        },
      ],
    },
  },
  'file',
);
const store = new ProxyConfigurationStore({ file, globalObjectName: '', watchesObjects: false });
const identity = new ProxyIdentity({
  store,
  external: new ExternalIdentityExchanger({ maxEntries: 1 }),
  penetrateAll: false,
  authorizeProxySubpath: false,
});
const log = pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: true }));
const cluster = { name: 'cluster-34567', annotations: {} };
const user = { name: 'user-12345', groups: ['system:authenticated', 'dev'], extra: {} };
const on = new URLSearchParams('impersonate=true');
const off = new URLSearchParams();
async function run(label: string, query: URLSearchParams, withLog: boolean) {
  const n = 200_000;
  for (let i = 0; i < 20_000; i++) {
    const p = identity.plan(cluster);
    await identity.identityFor(user, cluster.name, p, query);
  }
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    const p = identity.plan(cluster);
    const e = await identity.identityFor(user, cluster.name, p, query);
    if (withLog)
      logProxiedRequest(log, {
        cluster: cluster.name,
        method: 'GET',
        upstreamPath: '/api/v1/namespaces/default/pods?limit=500',
        code: 200,
        durationMs: 1.2,
        access: accessRecord(user, e),
      });
  }
  console.log(label, (((performance.now() - t) * 1000) / n).toFixed(2), 'µs/request');
}
await run('decision only, no penetration      ', off, false);
await run('decision only, penetration + mapping', on, false);
await run('decision + access log line         ', on, true);
