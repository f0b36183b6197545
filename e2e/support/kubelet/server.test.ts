import assert from 'node:assert/strict';
import { once } from 'node:events';
import https from 'node:https';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { type CertificateAuthority, createCertificateAuthority, type KeyPair } from '../../../shared/pki.ts';
import { type StandInKubelet, startStandInKubelet } from './server.ts';
import { collect, dialSpdy, execViaSpdy, portForwardViaSpdy, UpgradeRefusedError } from './spdy-client.ts';

let ca: CertificateAuthority;
let serving: KeyPair;
let kubelet: StandInKubelet;
let echoServer: net.Server;
let refusedPort: number;

before(async () => {
  ca = await createCertificateAuthority('stand-in-test-ca');
  serving = await ca.issue({
    commonName: 'stand-in-kubelet',
    ipAddresses: ['127.0.0.1'],
    dnsNames: ['localhost'],
    usage: 'server',
  });
  // The "container port" that port-forward reaches: a TCP echo server on loopback.
  echoServer = net.createServer((socket) => socket.pipe(socket));
  echoServer.listen(0, '127.0.0.1');
  await once(echoServer, 'listening');
  // A port nothing listens on, for the connection-refused path.
  const probe = net.createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  refusedPort = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  kubelet = await startStandInKubelet({
    tls: serving,
    portMap: { 8080: (echoServer.address() as net.AddressInfo).port, 9090: refusedPort },
    logIntervalMs: 50,
    commands: {
      whoami: async (ctx) => {
        ctx.stdout.write(`${ctx.namespace}/${ctx.pod}/${ctx.container}\n`);
        return 0;
      },
    },
  });
});

after(async () => {
  await kubelet.close();
  echoServer.close();
});

const target = () => ({
  server: kubelet.url,
  ca: ca.cert,
  namespace: 'ns1',
  pod: 'pod-1',
  container: 'main',
});

function get(path: string, signal?: AbortSignal): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(new URL(path, kubelet.url), { ca: ca.cert, agent: false, signal }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

test('healthz answers ok; unknown paths 404; streaming paths need an upgrade', async () => {
  assert.deepEqual(await get('/healthz'), { status: 200, body: 'ok' });
  assert.equal((await get('/pods')).status, 404);
  assert.equal((await get('/exec/ns1/pod-1/main?command=echo&output=1')).status, 400);
});

test('exec echo: stdout, then a v4 Success status on the error stream', async () => {
  const finished = once(kubelet.events, 'execFinished');
  const result = await execViaSpdy({ ...target(), command: ['echo', 'a', 'b'] });
  assert.equal(result.protocol, 'v5.channel.k8s.io', 'the first protocol the client offers wins');
  assert.equal(result.stdout, 'a b\n');
  assert.equal(result.stderr, '');
  // json.Marshal(metav1.Status{Status: Success}), as remotecommand ServeExec writes it.
  assert.equal(result.errorStream, '{"metadata":{},"status":"Success"}');
  assert.equal(result.exitCode, 0);
  const [record] = await finished;
  assert.deepEqual(record, {
    namespace: 'ns1',
    pod: 'pod-1',
    container: 'main',
    args: ['echo', 'a', 'b'],
    protocol: 'v5.channel.k8s.io',
    exitCode: 0,
  });
});

test('exec cat copies stdin to stdout until the client closes stdin', async () => {
  const input = `${'line of stdin\n'.repeat(5000)}last`;
  const result = await execViaSpdy({ ...target(), command: ['cat'], stdin: input });
  assert.equal(result.stdout, input);
  assert.equal(result.exitCode, 0);
});

test('exec hostname prints the pod name; custom commands see the target', async () => {
  assert.equal((await execViaSpdy({ ...target(), command: ['hostname'] })).stdout, 'pod-1\n');
  assert.equal((await execViaSpdy({ ...target(), command: ['whoami'] })).stdout, 'ns1/pod-1/main\n');
  const viaShell = await execViaSpdy({ ...target(), command: ['sh', '-c', 'whoami; echo done'] });
  assert.equal(viaShell.stdout, 'ns1/pod-1/main\ndone\n');
});

test('a non-zero exit is a NonZeroExitCode status with the ExitCode cause', async () => {
  const result = await execViaSpdy({ ...target(), command: ['sh', '-c', 'echo partial; exit 3'] });
  assert.equal(result.stdout, 'partial\n');
  assert.equal(result.exitCode, 3);
  const status = JSON.parse(result.errorStream);
  assert.equal(status.status, 'Failure');
  assert.equal(status.reason, 'NonZeroExitCode');
  assert.deepEqual(status.details, { causes: [{ reason: 'ExitCode', message: '3' }] });
  assert.match(status.message, /^command terminated with non-zero exit code: /);
});

test('an unknown command prints to stderr and exits 127', async () => {
  const result = await execViaSpdy({ ...target(), command: ['frobnicate', '--now'] });
  assert.equal(result.stdout, '');
  assert.equal(result.stderr, 'frobnicate: command not found\n');
  assert.equal(result.exitCode, 127);
});

test('older protocols: v3/v2 send only a failure message on the error stream', async () => {
  const ok = await execViaSpdy({ ...target(), command: ['true'], protocols: ['v3.channel.k8s.io'] });
  assert.deepEqual([ok.protocol, ok.errorStream], ['v3.channel.k8s.io', '']);
  const failed = await execViaSpdy({ ...target(), command: ['false'], protocols: ['v2.channel.k8s.io'] });
  assert.equal(failed.protocol, 'v2.channel.k8s.io');
  assert.match(failed.errorStream, /^command terminated with non-zero exit code: .*exit code 1$/);
  const v4 = await execViaSpdy({
    ...target(),
    command: ['echo'],
    protocols: ['v1.channel.k8s.io', 'v4.channel.k8s.io'],
  });
  assert.equal(v4.protocol, 'v4.channel.k8s.io');
});

test('a TTY session merges stderr into stdout and needs the resize stream', async () => {
  const result = await execViaSpdy({ ...target(), command: ['sh', '-c', 'echo out; nope'], tty: true });
  assert.equal(result.stdout, 'out\nnope: command not found\n');
  assert.equal(result.exitCode, 127);
});

test('protocol negotiation fails like the kubelet: 403 with the accepted versions, 400 without the header', async () => {
  const url = `${kubelet.url}/exec/ns1/pod-1/main?command=echo&output=1`;
  const refused = await dialSpdy({ url, protocols: ['channel.k8s.io'], ca: ca.cert }).catch(
    (e: unknown) => e,
  );
  assert.ok(refused instanceof UpgradeRefusedError);
  assert.equal(refused.statusCode, 403);
  assert.match(refused.body, /unable to negotiate protocol/);
  assert.deepEqual(
    refused.headers['x-accepted-stream-protocol-versions'],
    'v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io',
  );
  const none = await dialSpdy({ url, protocols: [], ca: ca.cert }).catch((e: unknown) => e);
  assert.ok(none instanceof UpgradeRefusedError && none.statusCode === 400);
  const noStreams = await dialSpdy({
    url: `${kubelet.url}/exec/ns1/pod-1/main?command=echo`,
    protocols: ['v4.channel.k8s.io'],
    ca: ca.cert,
  }).catch((e: unknown) => e);
  assert.ok(noStreams instanceof UpgradeRefusedError && /at least 1 of stdin/.test(noStreams.body));
});

test('port-forward: a mapped port reaches the local TCP server, both ways', async () => {
  const session = await portForwardViaSpdy(target());
  const closed = once(kubelet.events, 'portForwardClosed');
  const { data, errorText } = await session.open(8080);
  const received = collect(data);
  data.write('ping ');
  data.end('pong');
  // The echo server answers, sees our FIN, closes; the stand-in then FINs data and error.
  assert.equal((await received).toString(), 'ping pong');
  assert.equal(await errorText, '');
  const [record] = await closed;
  assert.equal(record.port, 8080);
  assert.equal(record.requestId, '0');
  assert.equal(record.target, (echoServer.address() as net.AddressInfo).port);
  // A second forwarded connection on the same SPDY connection, as kubectl does per local connection.
  const second = await session.open(8080);
  const again = collect(second.data);
  second.data.end('second');
  assert.equal((await again).toString(), 'second');
  await session.close();
});

test('port-forward: an unmapped port echoes', async () => {
  const session = await portForwardViaSpdy(target());
  const { data, errorText } = await session.open(5432);
  const received = collect(data);
  data.end(Buffer.alloc(200_000, 7));
  assert.ok((await received).equals(Buffer.alloc(200_000, 7)));
  assert.equal(await errorText, '');
  await session.close();
});

test('port-forward: a refused target reports on the error stream and asks to close the connection', async () => {
  const session = await portForwardViaSpdy(target());
  const { data, errorText } = await session.open(9090);
  data.resume();
  const error = JSON.parse(await errorText);
  assert.equal(error.closeConnection, true);
  assert.match(error.message, /^error forwarding port 9090 to pod pod-1, uid : connect ECONNREFUSED/);
  await session.close();
});

test('port-forward: streams without a valid port or type are reset', async () => {
  const session = await portForwardViaSpdy(target());
  await assert.rejects(
    session.connection.createStream({ streamType: 'data', port: '0', requestID: '9' }),
    /reset/,
  );
  await assert.rejects(
    session.connection.createStream({ streamType: 'stdin', port: '80', requestID: '9' }),
    /reset/,
  );
  await session.close();
});

test('logs without follow: the existing lines, tailLines, limitBytes, timestamps', async () => {
  const path = '/containerLogs/ns1/pod-1/main';
  assert.equal((await get(path)).body, 'log line 1\nlog line 2\nlog line 3\n');
  assert.equal((await get(`${path}?tailLines=2`)).body, 'log line 2\nlog line 3\n');
  assert.equal((await get(`${path}?tailLines=0`)).body, '');
  assert.equal((await get(`${path}?limitBytes=15`)).body, 'log line 1\nlog ');
  assert.match(
    (await get(`${path}?timestamps=true&tailLines=1`)).body,
    /^\d{4}-\d\d-\d\dT[\d:.]+Z log line 3\n$/,
  );
});

test('logs follow: a new line per interval until the client hangs up', async () => {
  const closed = once(kubelet.events, 'logsClosed');
  const abort = new AbortController();
  const lines: string[] = await new Promise((resolve, reject) => {
    const req = https.get(
      new URL('/containerLogs/ns1/pod-1/main?follow=true&tailLines=0', kubelet.url),
      { ca: ca.cert, agent: false, signal: abort.signal },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          const got = text.split('\n').filter(Boolean);
          if (got.length >= 2) resolve(got);
        });
      },
    );
    req.on('error', (err) => {
      if (!abort.signal.aborted) reject(err);
    });
  });
  assert.deepEqual(lines.slice(0, 2), ['log line 4', 'log line 5']);
  assert.equal(kubelet.active.logStreams, 1);
  abort.abort();
  const [record] = await closed;
  assert.equal(record.follow, true);
  assert.equal(record.clientClosed, true);
  assert.ok(record.linesWritten >= 2);
  assert.equal(kubelet.active.logStreams, 0);
});

test('with clientCa set, a client certificate is required and recorded', async () => {
  const client = await ca.issue({ commonName: 'kube-apiserver-kubelet-client', usage: 'client' });
  const strict = await startStandInKubelet({ tls: { ...serving, clientCa: ca.cert } });
  try {
    const seen = once(strict.events, 'request');
    const withCert = await execViaSpdy({
      server: strict.url,
      ca: ca.cert,
      ...client,
      namespace: 'ns1',
      pod: 'pod-1',
      container: 'main',
      command: ['echo', 'mtls'],
    });
    assert.equal(withCert.stdout, 'mtls\n');
    const [request] = await seen;
    assert.equal(request.clientCommonName, 'kube-apiserver-kubelet-client');
    await assert.rejects(
      execViaSpdy({
        server: strict.url,
        ca: ca.cert,
        namespace: 'n',
        pod: 'p',
        container: 'c',
        command: ['true'],
      }),
    );
  } finally {
    await strict.close();
  }
});

test('close() ends open log streams and SPDY connections', async () => {
  const local = await startStandInKubelet({ tls: serving, logIntervalMs: 20 });
  const { connection } = await dialSpdy({
    url: `${local.url}/portForward/ns1/pod-1`,
    protocols: ['portforward.k8s.io'],
    ca: ca.cert,
  });
  const follow = new Promise<void>((resolve) => {
    https
      .get(
        new URL('/containerLogs/ns1/pod-1/main?follow=true', local.url),
        { ca: ca.cert, agent: false },
        (res) => {
          res.resume();
          res.on('close', () => resolve());
        },
      )
      .on('error', () => resolve());
  });
  while (local.active.logStreams === 0 || local.active.spdyConnections === 0)
    await new Promise((r) => setTimeout(r, 10));
  await local.close();
  await follow;
  await connection.done;
  assert.deepEqual({ ...local.active }, { logStreams: 0, spdyConnections: 0 });
});
