import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import type { KeyPair } from '../../shared/pki.ts';

const b64 = (pem: string) => Buffer.from(pem).toString('base64');

/** A kubeconfig with everything embedded, so it can be copied anywhere. */
export function renderKubeconfig(options: {
  name: string;
  server: string;
  caCert: string;
  client?: KeyPair;
  token?: string;
  namespace?: string;
}): string {
  const user: Record<string, string> = {};
  if (options.client) {
    user['client-certificate-data'] = b64(options.client.cert);
    user['client-key-data'] = b64(options.client.key);
  }
  if (options.token) user.token = options.token;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: options.name,
        cluster: { server: options.server, 'certificate-authority-data': b64(options.caCert) },
      },
    ],
    users: [{ name: options.name, user }],
    contexts: [
      {
        name: options.name,
        context: {
          cluster: options.name,
          user: options.name,
          ...(options.namespace ? { namespace: options.namespace } : {}),
        },
      },
    ],
    'current-context': options.name,
  });
}

export function writeKubeconfig(file: string, options: Parameters<typeof renderKubeconfig>[0]): string {
  writeFileSync(file, renderKubeconfig(options), { mode: 0o600 });
  return file;
}
