/**
 * GET /healthz on a connection of its own, written and read by hand.
 *
 * A probe of a cluster without traffic opens a connection, sends one request and closes it. Made
 * through http.request, that one request cost 860 µs of CPU on top of the connection itself (a
 * ClientRequest, the Agent's socket bookkeeping, a parser, an IncomingMessage, timers): 2,138 µs
 * per probe against 1,278 µs for a bare resumed TLS connection; written by hand, 1,675 µs
 * (`npm run bench:probe`, docs/benchmarks-log.md). At 1,000 clusters the prober makes 25 of these a
 * second, for one word ("ok").
 * The answer needs its status line and the start of its body, nothing more, so that is all this
 * reads: HTTP/1.1 with `Connection: close`, the body by Content-Length, chunks or the end of the
 * stream, at most `maxBody` bytes of it kept, and the connection destroyed once that is known.
 */
import type { Duplex } from 'node:stream';

export interface HealthzRequest {
  /** The request target: the endpoint's base path + /healthz. */
  path: string;
  host: string;
  userAgent: string;
  authorization?: string;
  /** More header lines, as [name, value, name, value, ...] (a no-credential probe's identity). */
  extraHeaders?: readonly string[];
  timeoutMs: number;
}

export interface HealthzAnswer {
  status: number;
  /** The body's first bytes (at most maxBody), as text. */
  body: string;
}

/** Answers whose head grows past this are refused: a /healthz head is a few hundred bytes. */
const MAX_HEAD = 16 * 1024;
/** What the verdict quotes of an unhealthy answer, at most. */
const maxBody = 512;
const HEAD_END = Buffer.from('\r\n\r\n');
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})/;
const NOT_A_HEADER_VALUE = /[\r\n\0]/;

/** Writes the request on `socket` and resolves with the answer; the socket is destroyed when done. */
export function getHealthz(socket: Duplex, request: HealthzRequest): Promise<HealthzAnswer> {
  return new Promise((resolve, reject) => {
    let head: { status: number; length?: number; chunked: boolean } | undefined;
    let buffered: Buffer = Buffer.alloc(0);
    let settled = false;
    const finish = (answer?: HealthzAnswer, err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (answer) resolve(answer);
      else reject(err);
    };
    const timer = setTimeout(
      () => finish(undefined, new Error(`no answer within ${request.timeoutMs / 1000}s`)),
      request.timeoutMs,
    );
    const answer = (body: Buffer) => {
      const text = head?.chunked ? dechunk(body) : body;
      return { status: head?.status ?? 0, body: text.subarray(0, maxBody).toString('utf8') };
    };

    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      while (!head) {
        const end = buffered.indexOf(HEAD_END);
        if (end < 0) {
          if (buffered.length > MAX_HEAD) finish(undefined, new Error('the answer has a head over 16 KiB'));
          return;
        }
        const parsed = parseHead(buffered.subarray(0, end).toString('latin1'));
        if (typeof parsed === 'string') return finish(undefined, new Error(parsed));
        buffered = buffered.subarray(end + HEAD_END.length);
        // An interim answer (1xx) is followed by the real one.
        if (parsed.status >= 200) head = parsed;
      }
      if (head.length !== undefined && buffered.length >= head.length)
        return finish(answer(buffered.subarray(0, head.length)));
      if (head.chunked && buffered.includes('\r\n0\r\n\r\n')) return finish(answer(buffered));
      // Enough to give a verdict: the rest of a long body changes nothing.
      if (buffered.length >= maxBody + 64) finish(answer(buffered));
    });
    socket.on('end', () => {
      if (head && head.length === undefined) finish(answer(buffered));
      else finish(undefined, new Error('the connection closed before the answer was complete'));
    });
    socket.on('error', (err) => finish(undefined, err));
    socket.on('close', () => finish(undefined, new Error('the connection closed before the answer')));

    const lines = [
      `GET ${request.path} HTTP/1.1`,
      `Host: ${request.host}`,
      `User-Agent: ${request.userAgent}`,
      ...(request.authorization ? [`Authorization: ${request.authorization}`] : []),
      ...pairs(request.extraHeaders ?? []).map(([name, value]) => `${name}: ${value}`),
      'Connection: close',
    ];
    // What http.request refuses (ERR_INVALID_CHAR): a line break would write a header of its own.
    if (lines.some((line) => NOT_A_HEADER_VALUE.test(line))) {
      return finish(undefined, new Error('the request line or a header has a line break or NUL in it'));
    }
    socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

function parseHead(text: string): { status: number; length?: number; chunked: boolean } | string {
  const status = STATUS_LINE.exec(text);
  if (!status) return `not an HTTP/1.1 answer: ${JSON.stringify(text.slice(0, 40))}`;
  let length: number | undefined;
  let chunked = false;
  for (const line of text.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-length') length = Number(value);
    else if (name === 'transfer-encoding') chunked = value.toLowerCase().includes('chunked');
  }
  if (chunked) length = undefined; // RFC 9112 §6.3: Transfer-Encoding wins over Content-Length
  if (length !== undefined && !(Number.isSafeInteger(length) && length >= 0))
    return 'the answer has an invalid Content-Length';
  return { status: Number(status[1]), ...(length === undefined ? {} : { length }), chunked };
}

/** The data of a chunked body (what of it has arrived; chunk extensions and trailers dropped). */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = Number.parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size <= 0) break;
    parts.push(body.subarray(lineEnd + 2, Math.min(body.length, lineEnd + 2 + size)));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

function pairs(raw: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) out.push([raw[i]!, raw[i + 1]!]);
  return out;
}
