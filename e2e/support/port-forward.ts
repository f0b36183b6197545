/**
 * `kubectl port-forward` to a pod's port 8080 and one round trip through it: the workload pod
 * (support/workload.ts) greets and echoes, so the reply holds its greeting and the `ping` sent.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { binaryPath } from '../../hack/localenv/binaries.ts';
import { freePort } from '../../hack/localenv/ports.ts';
import { waitFor } from '../../hack/localenv/wait.ts';

/** The text read back until it echoed `ping`; `websockets` picks kubectl's transport (else SPDY). */
export async function portForwardPing(kubeconfig: string, pod: string, websockets: boolean): Promise<string> {
  const localPort = await freePort();
  const child = spawn(
    binaryPath('kubectl'),
    [`--kubeconfig=${kubeconfig}`, 'port-forward', `pod/${pod}`, `${localPort}:8080`],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, KUBECTL_PORT_FORWARD_WEBSOCKETS: websockets ? 'true' : 'false' },
    },
  );
  let output = '';
  const collect = (chunk: string) => {
    output += chunk;
  };
  child.stdout.setEncoding('utf8').on('data', collect);
  child.stderr.setEncoding('utf8').on('data', collect);
  try {
    await waitFor('port-forward to listen', () => output.includes('Forwarding from'), { timeoutMs: 30_000 });
    return await new Promise<string>((resolve, reject) => {
      const socket = net.connect(localPort, '127.0.0.1');
      let data = '';
      // A forward that breaks closes the local connection without the echo, or leaves it silent.
      const fail = (why: string) => {
        socket.destroy();
        reject(new Error(`port-forward to ${pod}:8080 ${why}; read "${data}"; kubectl said: ${output}`));
      };
      const timer = setTimeout(() => fail('gave no echo within 30 s'), 30_000);
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        data += chunk;
        if (data.includes('ping')) {
          clearTimeout(timer);
          socket.end();
          resolve(data);
        }
      });
      socket.on('error', (err) => fail(`failed: ${err.message}`));
      socket.on('close', () => fail('closed before the echo'));
      socket.write('ping\n');
    });
  } finally {
    child.kill('SIGINT');
  }
}
