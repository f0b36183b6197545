/**
 * A workload pod on a cluster's real node (hack/localenv/node.ts), run by its kubelet from the
 * project's image: it writes one numbered line a second to stdout ("log line N") (for `logs -f`), and on port 8080
 * greets each connection with "hello from the pod" and echoes what it reads (for `port-forward`). The
 * image's Debian base has `sh`, `echo` and `cat` (for `exec`).
 */
import { type Pod, podReady } from '../../hack/localenv/pods.ts';
import { waitFor } from '../../hack/localenv/wait.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { environmentState } from './environment.ts';

export interface Workload {
  pod: { namespace: string; name: string; container: string };
  /** The node the kubelet runs it on. */
  nodeName: string;
  stop(): Promise<void>;
}

/** The program the container runs (`node -e`): no file of the repository is needed in the pod. */
const program = `
let n = 0;
setInterval(() => console.log('log line ' + ++n), 1000);
// The kubelet's TCP probe resets its connections: a reset ends that socket, not the program.
require('node:net').createServer((s) => { s.on('error', () => {}); s.write('hello from the pod\\n'); s.pipe(s); }).listen(8080);
process.on('SIGTERM', () => process.exit(0));
`;

export async function startWorkload(
  spoke: KubeClient,
  options: { namespace?: string; name?: string; image?: string } = {},
): Promise<Workload> {
  // The e2e environment's image unless told (a benchmark's environment has its own).
  const image = options.image ?? environmentState().image;
  if (!image) throw new Error('startWorkload: the environment has no nodes (start it with nodes: true)');
  const pod = {
    namespace: options.namespace ?? 'default',
    name: options.name ?? 'workload',
    container: 'main',
  };
  const podPath = `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`;
  await spoke.delete(`${podPath}?gracePeriodSeconds=0`);
  await waitFor(`an earlier ${pod.name} pod to be gone`, async () => !(await spoke.getOptional(podPath)), {
    timeoutMs: 60_000,
  });
  await spoke.create(`/api/v1/namespaces/${pod.namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: pod.name, namespace: pod.namespace, labels: { app: pod.name } },
    spec: {
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      containers: [
        {
          name: pod.container,
          image,
          imagePullPolicy: 'Never',
          command: ['node', '-e', program],
          ports: [{ containerPort: 8080, name: 'http' }],
          readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
          securityContext: {
            runAsNonRoot: true,
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
    },
  });
  const ready = await waitFor(
    `pod ${pod.namespace}/${pod.name} Ready on its node`,
    async () => {
      const p = await spoke.getOptional<Pod>(podPath);
      return p && podReady(p) ? p : undefined;
    },
    { timeoutMs: 60_000 },
  );
  return {
    pod,
    nodeName: ready.spec?.nodeName ?? '',
    stop: async () => {
      await spoke.delete(`${podPath}?gracePeriodSeconds=0`);
    },
  };
}
