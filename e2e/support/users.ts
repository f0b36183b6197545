/**
 * Hub identities for e2e tests: client certificates signed by the hub CA
 * (what a user gets from an admin), and kubeconfigs whose server is a
 * cluster's proxy URL on the gateway (how KubeVela-style clients use it).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { writeKubeconfig } from '../../hack/localenv/kubeconfig.ts';
import { loadCertificateAuthority } from '../../shared/pki.ts';
import { environmentState } from './environment.ts';

export const proxyPrefix = '/apis/cluster.core.oam.dev/v1alpha1/clustergateways';

function hubFile(name: string): string {
  return readFileSync(path.join(environmentState().stateDir, 'hub', name), 'utf8');
}

/** A kubeconfig for hub user `name` (client certificate, CN=name, O=groups). */
export async function hubUserKubeconfig(
  name: string,
  groups: string[] = [],
  server?: string,
): Promise<string> {
  const env = environmentState();
  const ca = await loadCertificateAuthority({ cert: hubFile('ca.crt'), key: hubFile('ca.key') });
  const client = await ca.issue({ commonName: name, organizations: groups, usage: 'client' });
  return writeKubeconfig(path.join(env.stateDir, `user-${name}${server ? '-proxy' : ''}.kubeconfig`), {
    name: 'hub',
    server: server ?? env.hub.server,
    caCert: ca.cert,
    client,
  });
}

/** A client certificate for hub user `name` (CN=name, O=groups), to call the hub's API directly. */
export async function hubUserCertificate(
  name: string,
  groups: string[] = [],
): Promise<{ cert: string; key: string }> {
  const ca = await loadCertificateAuthority({ cert: hubFile('ca.crt'), key: hubFile('ca.key') });
  const client = await ca.issue({ commonName: name, organizations: groups, usage: 'client' });
  return { cert: client.cert, key: client.key };
}

/** The admin kubeconfig, but every request goes to `cluster` through the aggregator and gateway. */
export async function proxyKubeconfig(
  cluster: string,
  user = 'admin',
  groups = ['system:masters'],
): Promise<string> {
  const env = environmentState();
  return hubUserKubeconfig(user, groups, `${env.hub.server}${proxyPrefix}/${cluster}/proxy`);
}

/** The front-proxy client certificate, to call the gateway directly as the aggregator does. */
export function frontProxyClient(): { cert: string; key: string; ca: string } {
  return {
    cert: hubFile('front-proxy-client.crt'),
    key: hubFile('front-proxy-client.key'),
    ca: hubFile('ca.crt'),
  };
}
