/**
 * Makes an Agent open its connections with an async dialer (agent tunnel or CONNECT proxy) instead
 * of TCP: shared by connect-egress.ts and connect-tunnel.ts.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { type Dial, deadline, dialWithin } from './deadline.ts';
import { type ContextGetter, contextOf } from './tls-context.ts';

/**
 * Makes the agent open its connections with an async dialer (agent tunnel or
 * CONNECT proxy) and, for https (a TLS context given), run TLS over the dialled
 * stream. Node's Agent accepts the `(err, socket)` callback form for exactly this.
 */
export function dialWith(
  agent: http.Agent,
  dial: Dial,
  context: ContextGetter | undefined,
  timeoutMs: number,
): void {
  agent.createConnection = (options, callback) => {
    dialWithin(dial, timeoutMs).then(
      (stream) => {
        if (!context) {
          callback?.(null, stream);
          return;
        }
        const socket = tls.connect({
          ...(options as tls.ConnectionOptions),
          secureContext: contextOf(options, context),
          socket: stream,
        });
        deadline(socket, 'secureConnect', timeoutMs);
        callback?.(null, socket);
      },
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  };
}
