/**
 * Connections that follow a proxy decision (env-proxy.ts): straight to the target, or one HTTP
 * CONNECT per connection through the proxy (connect-egress.ts) with TLS to the target run inside it,
 * end to end: the proxy sees the target's host and port and ciphertext, never a credential of the
 * target. An https:// proxy is verified against the system trust store plus NODE_EXTRA_CA_CERTS
 * (where the agent's Deployment puts the AddOnDeploymentConfig's caBundle).
 */
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { connectThroughProxy, parseProxyUrl } from './connect-egress.ts';
import type { ProxyDecision } from './env-proxy.ts';

/** Opens a raw byte stream to host:port as the decision says; rejects with a message naming the proxy. */
export async function dialRoute(
  decision: ProxyDecision,
  host: string,
  port: number,
  options: { timeoutMs?: number } = {},
): Promise<Duplex> {
  if (decision.kind === 'invalid') throw new Error(decision.message);
  if (decision.kind === 'direct') {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port });
      const timer = options.timeoutMs
        ? setTimeout(
            () => socket.destroy(new Error(`connect to ${host}:${port} timed out`)),
            options.timeoutMs,
          )
        : undefined;
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', reject);
        resolve(socket);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }
  const proxy = parseProxyUrl(decision.url.href);
  if (typeof proxy === 'string') throw new Error(`${decision.source}: ${proxy}`);
  const dial = connectThroughProxy(proxy, host, port);
  if (!options.timeoutMs) return dial;
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  // A CONNECT answered after the deadline leaves a socket nobody uses.
  void dial.then(
    (socket) => late && socket.destroy(),
    () => {},
  );
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = true;
      reject(new Error(`egress proxy ${decision.url.host}: no answer to CONNECT ${host}:${port}`));
    }, options.timeoutMs);
  });
  try {
    return await Promise.race([dial, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An https.Agent whose connections go through an HTTP(S) proxy's CONNECT (pooling, keep-alive and
 * TLS options as any https.Agent); for a direct decision, use a plain https.Agent instead.
 */
export class ProxyTunnelAgent extends https.Agent {
  readonly #decision: ProxyDecision;

  constructor(decision: ProxyDecision, options: https.AgentOptions = {}) {
    super(options);
    this.#decision = decision;
  }

  override createConnection(
    options: Parameters<https.Agent['createConnection']>[0],
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    const o = options as https.RequestOptions & { host?: string; port?: number | string };
    const host = String(o.host ?? 'localhost').replace(/^\[|\]$/g, '');
    const port = Number(o.port) || 443;
    dialRoute(this.#decision, host, port).then(
      (raw) => {
        // TLS to the target inside the tunnel, with the request's own TLS options (CA, client
        // certificate, servername); Node's https.Agent keeps TLS sessions for resumption as usual.
        const socket = super.createConnection({ ...o, socket: raw } as never) as Duplex;
        callback?.(null, socket);
      },
      (err: Error) => callback?.(err, undefined as never),
    );
    return undefined;
  }
}

/** The agent for an https client of one server: a ProxyTunnelAgent when the decision is a proxy. */
export function httpsAgentFor(decision: ProxyDecision | undefined, options: https.AgentOptions): https.Agent {
  return decision && decision.kind !== 'direct'
    ? new ProxyTunnelAgent(decision, options)
    : new https.Agent(options);
}
