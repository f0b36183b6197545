/**
 * PING keepalive for one HTTP/2 session of the tunnel, used on both sides. TCP alone notices a dead
 * peer only when a write times out (minutes) and not at all through the kube-aggregator, which
 * keeps its own two connections open; an HTTP/2 PING travels the whole path and is answered by
 * the peer's HTTP/2 stack itself, so a missing answer means the peer (or the path) is gone.
 */
import type { Http2Session } from 'node:http2';

export interface KeepaliveOptions {
  intervalMs: number;
  timeoutMs: number;
  /** Round trip of each answered ping, in milliseconds. */
  onRoundTrip?: (ms: number) => void;
  /** No answer within timeoutMs: the session is destroyed right after this is called. */
  onTimeout?: () => void;
}

/** Starts pinging; returns a function that stops. Stops by itself when the session closes. */
export function keepAlive(session: Http2Session, options: KeepaliveOptions): () => void {
  let interval: NodeJS.Timeout | undefined;
  let deadline: NodeJS.Timeout | undefined;
  let stopped = false;
  const stop = () => {
    stopped = true;
    clearTimeout(interval);
    clearTimeout(deadline);
  };
  const schedule = () => {
    if (stopped) return;
    interval = setTimeout(ping, options.intervalMs);
  };
  const ping = () => {
    if (stopped || session.destroyed || session.closed) return stop();
    deadline = setTimeout(() => {
      if (stopped) return;
      stop();
      options.onTimeout?.();
      session.destroy(new Error(`no answer to a ping within ${options.timeoutMs} ms: peer gone`));
    }, options.timeoutMs);
    let sent: boolean;
    try {
      sent = session.ping((err, duration) => {
        clearTimeout(deadline);
        // An error here means the session closed while the ping was out: 'close' stops us.
        if (err || stopped) return;
        options.onRoundTrip?.(duration);
        schedule();
      });
    } catch {
      // Thrown when the session is being torn down.
      return stop();
    }
    if (!sent) {
      // Too many outstanding pings: the previous ones are unanswered and their deadlines run.
      clearTimeout(deadline);
      schedule();
    }
  };
  session.once('close', stop);
  schedule();
  return stop;
}
