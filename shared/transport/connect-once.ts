/**
 * One connection of a pool, outside its Agent's requests: a health probe of an idle cluster.
 */
import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { OneShotTlsOptions } from './one-shot-tls.ts';
import { oneShotConnection, serverNameOf } from './tls-context.ts';

/**
 * Opens a connection the way the pool's Agent opens its own (its createConnection, with the dial,
 * TLS context and deadline the pool set up), without a request of the Agent's: the caller writes
 * one request and reads its answer by hand (manager/gateway/health/healthz-once.ts says why that is
 * cheaper). The options are those the Agent would pass, its own merged over the request's, and carry
 * the Agent's key for them: https.Agent resumes the TLS session it cached under that key and caches
 * the new one, as for the connections it opens itself (a resumed handshake costs about 400 µs
 * less, docs/benchmarks-log.md). `tlsOptions` replace the pool's TLS context and verification, and
 * their session the Agent's (one-shot-tls.ts).
 */
export function connectOnce(
  agent: http.Agent,
  host: string,
  port: number,
  count: { open: number },
  tlsOptions?: OneShotTlsOptions,
): Promise<Duplex> {
  const agentOptions = (agent as http.Agent & { options: http.AgentOptions }).options;
  const options: net.NetConnectOpts & Record<string | symbol, unknown> = {
    host,
    port,
    ...serverNameOf(host),
    ...agentOptions,
    ...tlsOptions,
    [oneShotConnection]: true,
  };
  // With tlsOptions, the caller keeps the TLS session (one-shot-tls.ts): the Agent must not.
  if (!tlsOptions) options._agentKey = agent.getName(options as http.ClientRequestArgs);
  return new Promise((resolve, reject) => {
    const opened = (socket: Duplex) => {
      count.open++;
      socket.once('close', () => count.open--);
      resolve(socket);
    };
    // Returned at once for a direct connection (then the callback is net's 'connect' listener,
    // called without arguments); called back for a dialled one (dialWith).
    let returned: Duplex | undefined;
    returned =
      agent.createConnection(options, (err, socket) => {
        if (returned) return;
        if (err) reject(err);
        else opened(socket);
      }) ?? undefined;
    if (returned) opened(returned);
  });
}
