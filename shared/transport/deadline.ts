/**
 * Deadlines for opening a connection: without them a black-holed address would hang for the
 * kernel's SYN retry time (minutes), and a tunnel or proxy that never answers for ever.
 */
import type { Duplex } from 'node:stream';

/** Opens one raw byte stream to the upstream (agent tunnel, CONNECT proxy). */
export type Dial = () => Promise<Duplex>;

/**
 * Destroys the socket with a timeout error unless `readyEvent` comes first. `reportedMs` is the
 * deadline the error names when this wait is the rest of a longer one.
 */
export function deadline(socket: Duplex, readyEvent: string, waitMs: number, reportedMs = waitMs): void {
  const timer = setTimeout(() => socket.destroy(timeoutError(reportedMs)), waitMs);
  const clear = () => clearTimeout(timer);
  socket.once(readyEvent, clear);
  socket.once('close', clear);
}

/** Runs a dial with a deadline; a stream that arrives after it is closed unused. */
export function dialWithin(dial: Dial, timeoutMs: number): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(timeoutError(timeoutMs));
    }, timeoutMs);
    dial().then(
      (stream) => {
        if (late) {
          stream.destroy();
          return;
        }
        clearTimeout(timer);
        resolve(stream);
      },
      (err: Error) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

function timeoutError(timeoutMs: number): Error {
  return Object.assign(new Error(`timed out after ${timeoutMs} ms opening a connection`), {
    code: 'ETIMEDOUT',
  });
}
