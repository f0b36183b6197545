/**
 * A minimal SPDY/3.1 implementation: the subset that Kubernetes streaming
 * (exec, attach, port-forward) uses between kube-apiserver or kubectl and the
 * kubelet. The Go side is k8s.io/streaming/pkg/httpstream/spdy on top of
 * github.com/moby/spdystream (v0.5.1), and this file mirrors what that code
 * does rather than the whole SPDY/3.1 draft:
 *
 * - Frames: SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY,
 *   HEADERS, WINDOW_UPDATE and DATA (spdy/read.go, spdy/write.go).
 * - Header blocks are compressed with one zlib stream per direction and
 *   connection, primed with the SPDY/3 dictionary, each block ended by a sync
 *   flush (spdy/types.go newFramer: zlib.NewWriterLevelDict + Flush; the
 *   reader keeps one zlib.NewReaderDict for the connection's lifetime).
 * - No flow control: spdystream never sends WINDOW_UPDATE and ignores the ones
 *   it receives (connection.go frameHandler has no case for them), so a sender
 *   that honoured the 64 KiB initial window would stall against it. We neither
 *   enforce nor announce windows; TCP backpressure is the only flow control.
 * - PING: each side numbers its own pings (client odd, server even) and echoes
 *   pings of the other parity (connection.go handlePingFrame). kube-apiserver's
 *   stream translator pings every 5 s.
 * - A stream is replied to with an empty SYN_REPLY as soon as the server
 *   accepts it (httpstream/spdy/connection.go newSpdyStream); spdystream drops
 *   DATA that arrives on a stream before its reply, so a reply always goes out
 *   before the first DATA frame on that stream.
 */
import { EventEmitter } from 'node:events';
import { Duplex } from 'node:stream';
import zlib from 'node:zlib';

export const SPDY_VERSION = 3;

/** Control frame types (spdy/types.go ControlFrameType). */
export const ControlType = {
  SynStream: 1,
  SynReply: 2,
  RstStream: 3,
  Settings: 4,
  Ping: 6,
  GoAway: 7,
  Headers: 8,
  WindowUpdate: 9,
} as const;

/** RST_STREAM status codes (spdy/types.go RstStreamStatus). */
export const RstStatus = {
  ProtocolError: 1,
  InvalidStream: 2,
  RefusedStream: 3,
  UnsupportedVersion: 4,
  Cancel: 5,
  InternalError: 6,
  FlowControlError: 7,
  StreamInUse: 8,
  StreamAlreadyClosed: 9,
  InvalidCredentials: 10,
  FrameTooLarge: 11,
} as const;

export const GoAwayStatus = { Ok: 0, ProtocolError: 1, InternalError: 2 } as const;

/** FIN on DATA, SYN_STREAM, SYN_REPLY and HEADERS. */
export const FLAG_FIN = 0x01;
/** SYN_STREAM: the sender will not receive on this stream. */
export const FLAG_UNIDIRECTIONAL = 0x02;

/** The largest payload the 24-bit length field can describe (spdy.MaxDataLength). */
export const MAX_FRAME_PAYLOAD = 0xffffff;
/** DATA payloads we send are cut to this size so one large write cannot hog the connection. */
const DATA_CHUNK = 64 * 1024;
/** spdystream's defaults for header blocks (spdy/types.go defaultMaxHeader*). */
const MAX_HEADER_COUNT = 1000;
const MAX_HEADER_FIELD = 1 << 20;

/**
 * The SPDY/3 header compression dictionary, byte for byte as in
 * moby/spdystream spdy/dictionary.go (1423 bytes, Adler-32 0xe3c6a7c2, the
 * dictionary id that both sides put in the zlib header).
 */
export const SPDY3_DICTIONARY: Buffer = Buffer.from(
  'AAAAB29wdGlvbnMAAAAEaGVhZAAAAARwb3N0AAAAA3B1dAAAAAZkZWxldGUAAAAFdHJhY2UAAAAGYWNjZXB0AAAADmFjY2VwdC1j' +
    'aGFyc2V0AAAAD2FjY2VwdC1lbmNvZGluZwAAAA9hY2NlcHQtbGFuZ3VhZ2UAAAANYWNjZXB0LXJhbmdlcwAAAANhZ2UAAAAFYWxs' +
    'b3cAAAANYXV0aG9yaXphdGlvbgAAAA1jYWNoZS1jb250cm9sAAAACmNvbm5lY3Rpb24AAAAMY29udGVudC1iYXNlAAAAEGNvbnRl' +
    'bnQtZW5jb2RpbmcAAAAQY29udGVudC1sYW5ndWFnZQAAAA5jb250ZW50LWxlbmd0aAAAABBjb250ZW50LWxvY2F0aW9uAAAAC2Nv' +
    'bnRlbnQtbWQ1AAAADWNvbnRlbnQtcmFuZ2UAAAAMY29udGVudC10eXBlAAAABGRhdGUAAAAEZXRhZwAAAAZleHBlY3QAAAAHZXhw' +
    'aXJlcwAAAARmcm9tAAAABGhvc3QAAAAIaWYtbWF0Y2gAAAARaWYtbW9kaWZpZWQtc2luY2UAAAANaWYtbm9uZS1tYXRjaAAAAAhp' +
    'Zi1yYW5nZQAAABNpZi11bm1vZGlmaWVkLXNpbmNlAAAADWxhc3QtbW9kaWZpZWQAAAAIbG9jYXRpb24AAAAMbWF4LWZvcndhcmRz' +
    'AAAABnByYWdtYQAAABJwcm94eS1hdXRoZW50aWNhdGUAAAATcHJveHktYXV0aG9yaXphdGlvbgAAAAVyYW5nZQAAAAdyZWZlcmVy' +
    'AAAAC3JldHJ5LWFmdGVyAAAABnNlcnZlcgAAAAJ0ZQAAAAd0cmFpbGVyAAAAEXRyYW5zZmVyLWVuY29kaW5nAAAAB3VwZ3JhZGUA' +
    'AAAKdXNlci1hZ2VudAAAAAR2YXJ5AAAAA3ZpYQAAAAd3YXJuaW5nAAAAEHd3dy1hdXRoZW50aWNhdGUAAAAGbWV0aG9kAAAAA2dl' +
    'dAAAAAZzdGF0dXMAAAAGMjAwIE9LAAAAB3ZlcnNpb24AAAAISFRUUC8xLjEAAAADdXJsAAAABnB1YmxpYwAAAApzZXQtY29va2ll' +
    'AAAACmtlZXAtYWxpdmUAAAAGb3JpZ2luMTAwMTAxMjAxMjAyMjA1MjA2MzAwMzAyMzAzMzA0MzA1MzA2MzA3NDAyNDA1NDA2NDA3' +
    'NDA4NDA5NDEwNDExNDEyNDEzNDE0NDE1NDE2NDE3NTAyNTA0NTA1MjAzIE5vbi1BdXRob3JpdGF0aXZlIEluZm9ybWF0aW9uMjA0' +
    'IE5vIENvbnRlbnQzMDEgTW92ZWQgUGVybWFuZW50bHk0MDAgQmFkIFJlcXVlc3Q0MDEgVW5hdXRob3JpemVkNDAzIEZvcmJpZGRl' +
    'bjQwNCBOb3QgRm91bmQ1MDAgSW50ZXJuYWwgU2VydmVyIEVycm9yNTAxIE5vdCBJbXBsZW1lbnRlZDUwMyBTZXJ2aWNlIFVuYXZh' +
    'aWxhYmxlSmFuIEZlYiBNYXIgQXByIE1heSBKdW4gSnVsIEF1ZyBTZXB0IE9jdCBOb3YgRGVjIDAwOjAwOjAwIE1vbiwgVHVlLCBX' +
    'ZWQsIFRodSwgRnJpLCBTYXQsIFN1biwgR01UY2h1bmtlZCx0ZXh0L2h0bWwsaW1hZ2UvcG5nLGltYWdlL2pwZyxpbWFnZS9naWYs' +
    'YXBwbGljYXRpb24veG1sLGFwcGxpY2F0aW9uL3hodG1sK3htbCx0ZXh0L3BsYWluLHRleHQvamF2YXNjcmlwdCxwdWJsaWNwcml2' +
    'YXRlbWF4LWFnZT1nemlwLGRlZmxhdGUsc2RjaGNoYXJzZXQ9dXRmLThjaGFyc2V0PWlzby04ODU5LTEsdXRmLSwqLGVucT0wLg==',
  'base64',
);

// ---------------------------------------------------------------------------
// Header blocks

/** Header names are lowercase on the wire; a name may carry several values. */
export type HeaderMap = Record<string, string[]>;
export type HeaderInput = Record<string, string | number | readonly string[]>;

/** The uncompressed name/value block: count, then (length, name, length, values joined by NUL). */
export function encodeHeaderBlock(headers: HeaderInput): Buffer {
  const entries = Object.entries(headers).map(([name, value]) => {
    const values = Array.isArray(value) ? value : [String(value)];
    return [Buffer.from(name.toLowerCase()), Buffer.from(values.join('\0'))] as const;
  });
  const parts: Buffer[] = [u32(entries.length)];
  for (const [name, value] of entries) parts.push(u32(name.length), name, u32(value.length), value);
  return Buffer.concat(parts);
}

export function decodeHeaderBlock(block: Buffer): HeaderMap {
  let offset = 0;
  const need = (n: number) => {
    if (offset + n > block.length) throw new SpdyProtocolError('truncated header block');
  };
  need(4);
  const count = block.readUInt32BE(0);
  offset = 4;
  if (count > MAX_HEADER_COUNT) throw new SpdyProtocolError(`too many headers: ${count}`);
  const headers: HeaderMap = {};
  for (let i = 0; i < count; i++) {
    const fields: string[] = [];
    for (let f = 0; f < 2; f++) {
      need(4);
      const length = block.readUInt32BE(offset);
      offset += 4;
      if (length > MAX_HEADER_FIELD) throw new SpdyProtocolError(`header field too large: ${length}`);
      need(length);
      fields.push(block.toString('utf8', offset, offset + length));
      offset += length;
    }
    // spdystream lowercases names it receives (and flags uppercase ones); so do we.
    const name = fields[0]!.toLowerCase();
    headers[name] = [...(headers[name] ?? []), ...fields[1]!.split('\0')];
  }
  return headers;
}

/** First value of a header, looked up case-insensitively. */
export function headerValue(headers: HeaderMap, name: string): string | undefined {
  return headers[name.toLowerCase()]?.[0];
}

/**
 * Pushes buffers through a long-lived zlib stream and collects what a sync
 * flush yields. Calls are serialized: the zlib context is shared by every
 * header block of the connection, in order. node:zlib has no synchronous API
 * for a stateful stream (the *Sync helpers close their engine after one call),
 * hence the stream plus flush callback; the flush's write callback runs after
 * its output has been pushed, which a test checks with large random blocks.
 */
class ZlibPipe {
  readonly #z: zlib.Deflate | zlib.Inflate;
  #queue: Promise<unknown> = Promise.resolve();
  #failed: Error | undefined;

  constructor(z: zlib.Deflate | zlib.Inflate) {
    this.#z = z;
    // Keep a listener so a corrupt block fails the pending call instead of crashing the process.
    z.on('error', (err) => {
      this.#failed ??= err;
    });
  }

  run(input: Buffer): Promise<Buffer> {
    const result = this.#queue.then(() => this.#flushThrough(input));
    this.#queue = result.catch(() => undefined);
    return result;
  }

  close(): void {
    this.#z.close();
  }

  #flushThrough(input: Buffer): Promise<Buffer> {
    if (this.#failed) return Promise.reject(this.#failed);
    const z = this.#z;
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const onData = (chunk: Buffer) => chunks.push(chunk);
      const onError = (err: Error) => {
        cleanup();
        reject(err);
      };
      const cleanup = () => {
        z.off('data', onData);
        z.off('error', onError);
      };
      z.on('data', onData);
      z.once('error', onError);
      z.write(input);
      z.flush(zlib.constants.Z_SYNC_FLUSH, () => {
        cleanup();
        if (this.#failed) reject(this.#failed);
        else resolve(Buffer.concat(chunks));
      });
    });
  }
}

/** Compresses outgoing header blocks: one instance per connection and direction. */
export class HeaderCompressor {
  readonly #pipe = new ZlibPipe(zlib.createDeflate({ dictionary: SPDY3_DICTIONARY }));
  compress(headers: HeaderInput): Promise<Buffer> {
    return this.#pipe.run(encodeHeaderBlock(headers));
  }
  close(): void {
    this.#pipe.close();
  }
}

/** Inflates incoming header blocks: one instance per connection and direction. */
export class HeaderDecompressor {
  readonly #pipe = new ZlibPipe(zlib.createInflate({ dictionary: SPDY3_DICTIONARY }));
  async decompress(block: Buffer): Promise<HeaderMap> {
    return decodeHeaderBlock(await this.#pipe.run(block));
  }
  close(): void {
    this.#pipe.close();
  }
}

// ---------------------------------------------------------------------------
// Frames

export interface SettingsEntry {
  id: number;
  flags: number;
  value: number;
}

export type Frame =
  | { type: 'data'; streamId: number; flags: number; data: Buffer }
  | {
      type: 'syn_stream';
      streamId: number;
      associatedToStreamId: number;
      priority: number;
      slot: number;
      flags: number;
      headers: HeaderMap;
    }
  | { type: 'syn_reply'; streamId: number; flags: number; headers: HeaderMap }
  | { type: 'rst_stream'; streamId: number; status: number }
  | { type: 'settings'; flags: number; entries: SettingsEntry[] }
  | { type: 'ping'; id: number }
  | { type: 'goaway'; lastGoodStreamId: number; status: number }
  | { type: 'headers'; streamId: number; flags: number; headers: HeaderMap }
  | { type: 'window_update'; streamId: number; delta: number }
  | { type: 'unknown'; frameType: number; version: number; flags: number; payload: Buffer };

/** A frame split off the byte stream, header blocks still compressed. */
export type RawFrame =
  | { control: true; version: number; frameType: number; flags: number; payload: Buffer }
  | { control: false; streamId: number; flags: number; payload: Buffer };

export class SpdyProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpdyProtocolError';
  }
}

/** Splits a byte stream into frames: 8-byte header (24-bit length at offset 5), then payload. */
export class FrameParser {
  #chunks: Buffer[] = [];
  #length = 0;

  push(chunk: Buffer): RawFrame[] {
    if (chunk.length > 0) {
      this.#chunks.push(chunk);
      this.#length += chunk.length;
    }
    const frames: RawFrame[] = [];
    while (this.#length >= 8) {
      const header = this.#peek(8);
      const length = header.readUIntBE(5, 3);
      if (this.#length < 8 + length) break;
      const frame = this.#take(8 + length);
      const first = frame.readUInt32BE(0);
      const flags = frame[4]!;
      const payload = frame.subarray(8);
      if (first & 0x80000000) {
        frames.push({
          control: true,
          version: (first >>> 16) & 0x7fff,
          frameType: first & 0xffff,
          flags,
          payload,
        });
      } else {
        const streamId = first & 0x7fffffff;
        if (streamId === 0) throw new SpdyProtocolError('DATA frame on stream 0');
        frames.push({ control: false, streamId, flags, payload });
      }
    }
    return frames;
  }

  /** Bytes received but not yet part of a complete frame. */
  get buffered(): number {
    return this.#length;
  }

  #peek(n: number): Buffer {
    const first = this.#chunks[0]!;
    if (first.length >= n) return first.subarray(0, n);
    return Buffer.concat(this.#chunks).subarray(0, n);
  }

  #take(n: number): Buffer {
    let out: Buffer;
    const first = this.#chunks[0]!;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
    } else {
      const all = Buffer.concat(this.#chunks);
      out = all.subarray(0, n);
      this.#chunks = all.length > n ? [all.subarray(n)] : [];
    }
    this.#length -= n;
    return out;
  }
}

/** Turns a raw frame into a typed one, inflating header blocks with the connection's decompressor. */
export async function decodeFrame(raw: RawFrame, inflater: HeaderDecompressor): Promise<Frame> {
  if (!raw.control) return { type: 'data', streamId: raw.streamId, flags: raw.flags, data: raw.payload };
  const { payload, flags } = raw;
  const need = (n: number) => {
    if (payload.length < n) throw new SpdyProtocolError(`control frame ${raw.frameType} too short`);
  };
  switch (raw.frameType) {
    case ControlType.SynStream: {
      need(10);
      const streamId = payload.readUInt32BE(0) & 0x7fffffff;
      if (streamId === 0) throw new SpdyProtocolError('SYN_STREAM on stream 0');
      return {
        type: 'syn_stream',
        streamId,
        associatedToStreamId: payload.readUInt32BE(4) & 0x7fffffff,
        priority: payload[8]! >> 5,
        slot: payload[9]!,
        flags,
        headers: await inflater.decompress(payload.subarray(10)),
      };
    }
    case ControlType.SynReply:
    case ControlType.Headers: {
      need(4);
      const streamId = payload.readUInt32BE(0) & 0x7fffffff;
      if (streamId === 0) throw new SpdyProtocolError('header frame on stream 0');
      const headers = await inflater.decompress(payload.subarray(4));
      return {
        type: raw.frameType === ControlType.SynReply ? 'syn_reply' : 'headers',
        streamId,
        flags,
        headers,
      };
    }
    case ControlType.RstStream:
      need(8);
      return {
        type: 'rst_stream',
        streamId: payload.readUInt32BE(0) & 0x7fffffff,
        status: payload.readUInt32BE(4),
      };
    case ControlType.Settings: {
      need(4);
      const count = payload.readUInt32BE(0);
      if (count > (payload.length - 4) / 8) throw new SpdyProtocolError('SETTINGS count exceeds frame');
      const entries: SettingsEntry[] = [];
      for (let i = 0; i < count; i++) {
        const idWord = payload.readUInt32BE(4 + i * 8);
        entries.push({ flags: idWord >>> 24, id: idWord & 0xffffff, value: payload.readUInt32BE(8 + i * 8) });
      }
      return { type: 'settings', flags, entries };
    }
    case ControlType.Ping:
      need(4);
      return { type: 'ping', id: payload.readUInt32BE(0) };
    case ControlType.GoAway:
      need(4);
      return {
        type: 'goaway',
        lastGoodStreamId: payload.readUInt32BE(0) & 0x7fffffff,
        // SPDY/2 GOAWAY had no status; default to OK if it is missing.
        status: payload.length >= 8 ? payload.readUInt32BE(4) : GoAwayStatus.Ok,
      };
    case ControlType.WindowUpdate:
      need(8);
      return {
        type: 'window_update',
        streamId: payload.readUInt32BE(0) & 0x7fffffff,
        delta: payload.readUInt32BE(4) & 0x7fffffff,
      };
    default:
      return { type: 'unknown', frameType: raw.frameType, version: raw.version, flags, payload };
  }
}

export function encodeControlFrame(frameType: number, flags: number, payload: Buffer): Buffer {
  if (payload.length > MAX_FRAME_PAYLOAD) throw new SpdyProtocolError('control frame too large');
  const header = Buffer.alloc(8);
  header.writeUInt16BE(0x8000 | SPDY_VERSION, 0);
  header.writeUInt16BE(frameType, 2);
  // `<< 24` can make the word negative in JS; `>>> 0` makes it unsigned again.
  header.writeUInt32BE((((flags & 0xff) << 24) | payload.length) >>> 0, 4);
  return Buffer.concat([header, payload]);
}

export function encodeDataFrame(streamId: number, data: Buffer, fin: boolean): Buffer {
  if (data.length > MAX_FRAME_PAYLOAD) throw new SpdyProtocolError('DATA frame too large');
  const header = Buffer.alloc(8);
  header.writeUInt32BE(streamId & 0x7fffffff, 0);
  header.writeUInt32BE((((fin ? FLAG_FIN : 0) << 24) | data.length) >>> 0, 4);
  return Buffer.concat([header, data]);
}

/** Encodes any frame; header-bearing frames go through the connection's compressor. */
export async function encodeFrame(frame: Frame, deflater: HeaderCompressor): Promise<Buffer> {
  switch (frame.type) {
    case 'data':
      return encodeDataFrame(frame.streamId, frame.data, (frame.flags & FLAG_FIN) !== 0);
    case 'syn_stream': {
      const fixed = Buffer.alloc(10);
      fixed.writeUInt32BE(frame.streamId & 0x7fffffff, 0);
      fixed.writeUInt32BE(frame.associatedToStreamId & 0x7fffffff, 4);
      fixed[8] = (frame.priority & 0x7) << 5;
      fixed[9] = frame.slot & 0xff;
      const block = await deflater.compress(frame.headers);
      return encodeControlFrame(ControlType.SynStream, frame.flags, Buffer.concat([fixed, block]));
    }
    case 'syn_reply':
    case 'headers': {
      const block = await deflater.compress(frame.headers);
      const type = frame.type === 'syn_reply' ? ControlType.SynReply : ControlType.Headers;
      return encodeControlFrame(type, frame.flags, Buffer.concat([u32(frame.streamId & 0x7fffffff), block]));
    }
    case 'rst_stream':
      return encodeControlFrame(
        ControlType.RstStream,
        0,
        Buffer.concat([u32(frame.streamId), u32(frame.status)]),
      );
    case 'settings': {
      const parts = [u32(frame.entries.length)];
      for (const e of frame.entries)
        parts.push(u32(((e.flags & 0xff) << 24) | (e.id & 0xffffff)), u32(e.value));
      return encodeControlFrame(ControlType.Settings, frame.flags, Buffer.concat(parts));
    }
    case 'ping':
      return encodeControlFrame(ControlType.Ping, 0, u32(frame.id));
    case 'goaway':
      return encodeControlFrame(
        ControlType.GoAway,
        0,
        Buffer.concat([u32(frame.lastGoodStreamId), u32(frame.status)]),
      );
    case 'window_update':
      return encodeControlFrame(
        ControlType.WindowUpdate,
        0,
        Buffer.concat([u32(frame.streamId), u32(frame.delta & 0x7fffffff)]),
      );
    case 'unknown':
      return encodeControlFrame(frame.frameType, frame.flags, frame.payload);
  }
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value >>> 0, 0);
  return b;
}

// ---------------------------------------------------------------------------
// Connection and streams

export interface SpdyConnectionEvents {
  /** A stream the peer opened (SYN_STREAM). Reply with `stream.reply()` or refuse with `stream.reset()`. */
  stream: [SpdyStream];
  /** The peer sent GOAWAY: it opens no more streams. */
  goaway: [{ lastGoodStreamId: number; status: number }];
  /** Every decoded frame, for tests and debugging. */
  frame: [Frame];
  /** The transport is gone; every stream has been torn down. */
  close: [];
  /** A protocol or transport error, emitted only if someone listens; `close` follows. */
  error: [Error];
}

export interface SpdyConnectionOptions {
  /** Decides stream id and ping id parity: the client uses odd ids, the server even ones. */
  role: 'client' | 'server';
  /** How long `close()` waits for the peer to close the transport before destroying it. */
  closeTimeoutMs?: number;
}

/** What a stream needs from its connection; kept narrow so streams cannot reach the socket. */
interface StreamHost {
  sendFrame(frame: Frame): Promise<void>;
  streamBlocked(stream: SpdyStream, blocked: boolean): void;
  forget(stream: SpdyStream): void;
  readonly closed: boolean;
}

/**
 * One SPDY session over a duplex transport (a TLS socket after the HTTP 101).
 * Frames are read and handled strictly in order, because header blocks share
 * one zlib context; frames are written in order through one queue for the same
 * reason on the way out.
 */
export class SpdyConnection extends EventEmitter<SpdyConnectionEvents> {
  readonly role: 'client' | 'server';
  readonly #socket: Duplex;
  readonly #parser = new FrameParser();
  readonly #inflater = new HeaderDecompressor();
  readonly #deflater = new HeaderCompressor();
  readonly #streams = new Map<number, SpdyStream>();
  readonly #pendingReplies = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
  readonly #pings = new Map<number, () => void>();
  readonly #blocked = new Set<SpdyStream>();
  readonly #closeTimeoutMs: number;
  readonly #host: StreamHost;
  #nextStreamId: number;
  #nextPingId: number;
  #lastRemoteStreamId = 0;
  #inbound: Promise<void> = Promise.resolve();
  #outbound: Promise<void> = Promise.resolve();
  #sentGoAway = false;
  #receivedGoAway = false;
  #closed = false;
  readonly #closedPromise: Promise<void>;
  #resolveClosed!: () => void;

  constructor(socket: Duplex, options: SpdyConnectionOptions, head?: Buffer) {
    super();
    this.role = options.role;
    this.#socket = socket;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 2000;
    this.#nextStreamId = this.role === 'client' ? 1 : 2;
    this.#nextPingId = this.role === 'client' ? 1 : 2;
    this.#closedPromise = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
    const connection = this;
    this.#host = {
      sendFrame: (frame) => this.#send(frame),
      streamBlocked: (stream, blocked) => this.#setBlocked(stream, blocked),
      forget: (stream) => this.#forget(stream),
      get closed() {
        return connection.#closed;
      },
    };
    if ('setNoDelay' in socket && typeof socket.setNoDelay === 'function') socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.#onBytes(chunk));
    // Frames that arrived before the transport ended may still be inflating
    // their headers: tear down only after they have been handled.
    socket.on('end', () => this.#teardownAfterInbound());
    socket.on('close', () => this.#teardownAfterInbound());
    socket.on('error', (err) => this.#teardownAfterInbound(err));
    if (head && head.length > 0) this.#onBytes(head);
  }

  /** Streams currently open, by id. */
  get streams(): ReadonlyMap<number, SpdyStream> {
    return this.#streams;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves once the transport is closed. */
  get done(): Promise<void> {
    return this.#closedPromise;
  }

  /** Opens a stream and resolves once the peer's SYN_REPLY arrives (like httpstream CreateStream). */
  async createStream(
    headers: HeaderInput,
    options: { fin?: boolean; timeoutMs?: number } = {},
  ): Promise<SpdyStream> {
    if (this.#closed || this.#sentGoAway || this.#receivedGoAway)
      throw new Error('SPDY connection is closing');
    const id = this.#nextStreamId;
    this.#nextStreamId += 2;
    const stream = new SpdyStream(this.#host, id, lowerHeaders(headers), { local: true });
    this.#streams.set(id, stream);
    const replied = new Promise<void>((resolve, reject) => this.#pendingReplies.set(id, { resolve, reject }));
    // Observed below; this keeps a teardown during the send from counting as an unhandled rejection.
    replied.catch(() => undefined);
    if (options.fin) stream.markLocalFinished();
    await this.#send({
      type: 'syn_stream',
      streamId: id,
      associatedToStreamId: 0,
      priority: 0,
      slot: 0,
      flags: options.fin ? FLAG_FIN : 0,
      headers: stream.headers,
    });
    const timeoutMs = options.timeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        replied,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no SYN_REPLY for stream ${id} within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
    } catch (err) {
      stream.destroy();
      throw err;
    } finally {
      clearTimeout(timer);
      this.#pendingReplies.delete(id);
    }
    return stream;
  }

  /** Round trip time of a PING, in milliseconds. */
  ping(timeoutMs = 10_000): Promise<number> {
    if (this.#closed) return Promise.reject(new Error('SPDY connection is closed'));
    const id = this.#nextPingId;
    this.#nextPingId = this.#nextPingId > 0x7ffffffd ? this.#nextPingId - 0x7ffffffe : this.#nextPingId + 2;
    const start = performance.now();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pings.delete(id);
        reject(new Error(`PING ${id} timed out`));
      }, timeoutMs);
      this.#pings.set(id, () => {
        clearTimeout(timer);
        resolve(performance.now() - start);
      });
      this.#send({ type: 'ping', id }).catch(reject);
    });
  }

  /** Sends GOAWAY; streams already open carry on. */
  async goAway(status: number = GoAwayStatus.Ok): Promise<void> {
    if (this.#sentGoAway || this.#closed) return;
    this.#sentGoAway = true;
    await this.#send({ type: 'goaway', lastGoodStreamId: this.#lastRemoteStreamId, status });
  }

  /**
   * Ends the session the way the kubelet does (httpstream/spdy connection.Close):
   * resets every stream this side has not finished, sends GOAWAY, then closes
   * the transport once the queued frames are written.
   */
  async close(): Promise<void> {
    if (this.#closed) return this.#closedPromise;
    for (const stream of [...this.#streams.values()]) {
      if (!stream.localFinished) stream.reset(RstStatus.Cancel);
    }
    await this.goAway(GoAwayStatus.Ok).catch(() => undefined);
    await this.#outbound;
    if (!this.#closed) {
      this.#socket.end();
      // The peer normally closes its side on GOAWAY; do not wait forever if it does not.
      setTimeout(() => this.#socket.destroy(), this.#closeTimeoutMs).unref();
    }
    return this.#closedPromise;
  }

  /** Drops the transport at once. */
  destroy(err?: Error): void {
    this.#socket.destroy();
    this.#teardown(err);
  }

  /** Queues a frame behind everything queued before it; resolves once the transport took it. */
  #send(frame: Frame): Promise<void> {
    const next = this.#outbound.then(async () => {
      if (this.#closed) return;
      const bytes = await encodeFrame(frame, this.#deflater);
      if (this.#closed) return;
      if (!this.#socket.write(bytes)) await drained(this.#socket);
    });
    this.#outbound = next.catch(() => undefined);
    return next;
  }

  #onBytes(chunk: Buffer): void {
    if (this.#closed) return;
    let frames: RawFrame[];
    try {
      frames = this.#parser.push(chunk);
    } catch (err) {
      this.#protocolError(err as Error);
      return;
    }
    for (const raw of frames) {
      this.#inbound = this.#inbound.then(async () => {
        if (this.#closed) return;
        try {
          const frame = await decodeFrame(raw, this.#inflater);
          this.emit('frame', frame);
          this.#handle(frame);
        } catch (err) {
          this.#protocolError(err as Error);
        }
      });
    }
  }

  #handle(frame: Frame): void {
    switch (frame.type) {
      case 'syn_stream':
        this.#onSynStream(frame);
        return;
      case 'syn_reply': {
        const stream = this.#streams.get(frame.streamId);
        this.#pendingReplies.get(frame.streamId)?.resolve();
        if (stream && frame.flags & FLAG_FIN) stream.handleFin();
        return;
      }
      case 'data': {
        const stream = this.#streams.get(frame.streamId);
        // spdystream drops DATA for streams it no longer knows; so do we.
        if (!stream) return;
        if (frame.data.length > 0) stream.handleData(frame.data);
        if (frame.flags & FLAG_FIN) stream.handleFin();
        return;
      }
      case 'headers': {
        const stream = this.#streams.get(frame.streamId);
        if (!stream) return;
        stream.emit('headers', frame.headers);
        if (frame.flags & FLAG_FIN) stream.handleFin();
        return;
      }
      case 'rst_stream': {
        this.#pendingReplies
          .get(frame.streamId)
          ?.reject(new Error(`stream ${frame.streamId} reset (${frame.status})`));
        this.#streams.get(frame.streamId)?.handleReset(frame.status);
        return;
      }
      case 'ping': {
        const ours = (frame.id & 1) === (this.#nextPingId & 1);
        if (!ours) {
          this.#send({ type: 'ping', id: frame.id }).catch(() => undefined);
          return;
        }
        const waiter = this.#pings.get(frame.id);
        this.#pings.delete(frame.id);
        waiter?.();
        return;
      }
      case 'goaway':
        this.#receivedGoAway = true;
        this.emit('goaway', { lastGoodStreamId: frame.lastGoodStreamId, status: frame.status });
        return;
      // SETTINGS, WINDOW_UPDATE and unknown control frames: spdystream does nothing with them.
      default:
        return;
    }
  }

  #onSynStream(frame: Extract<Frame, { type: 'syn_stream' }>): void {
    const peerParity = this.role === 'server' ? 1 : 0;
    if ((frame.streamId & 1) !== peerParity || frame.streamId <= this.#lastRemoteStreamId) {
      // spdystream validateStreamId: out-of-order or wrong-parity ids are a protocol error for that stream.
      this.#send({ type: 'rst_stream', streamId: frame.streamId, status: RstStatus.ProtocolError }).catch(
        () => undefined,
      );
      return;
    }
    this.#lastRemoteStreamId = frame.streamId;
    // After we sent GOAWAY, spdystream silently ignores new streams.
    if (this.#sentGoAway) return;
    const stream = new SpdyStream(this.#host, frame.streamId, frame.headers, { local: false });
    this.#streams.set(frame.streamId, stream);
    if (frame.flags & FLAG_UNIDIRECTIONAL) stream.markLocalFinished();
    if (frame.flags & FLAG_FIN) stream.handleFin();
    if (this.listenerCount('stream') === 0) {
      stream.reset(RstStatus.RefusedStream);
      return;
    }
    this.emit('stream', stream);
  }

  #setBlocked(stream: SpdyStream, blocked: boolean): void {
    // No flow control in the protocol (see the file header): when a reader falls
    // behind, stop reading the transport, as spdystream's blocking channel send does.
    if (blocked) this.#blocked.add(stream);
    else this.#blocked.delete(stream);
    if (this.#closed) return;
    if (this.#blocked.size > 0) this.#socket.pause();
    else this.#socket.resume();
  }

  #forget(stream: SpdyStream): void {
    if (this.#streams.get(stream.id) === stream) this.#streams.delete(stream.id);
    if (this.#blocked.delete(stream) && this.#blocked.size === 0 && !this.#closed) this.#socket.resume();
  }

  #protocolError(err: Error): void {
    if (this.#closed) return;
    this.#reportError(err);
    this.#send({
      type: 'goaway',
      lastGoodStreamId: this.#lastRemoteStreamId,
      status: GoAwayStatus.ProtocolError,
    })
      .catch(() => undefined)
      .finally(() => {
        this.#socket.destroy();
        this.#teardown();
      });
  }

  #teardownAfterInbound(err?: Error): void {
    this.#inbound = this.#inbound.then(() => this.#teardown(err));
  }

  /** 'error' without a listener would throw; a dropped peer is routine here, not a crash. */
  #reportError(err: Error): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  #teardown(err?: Error): void {
    if (this.#closed) return;
    this.#closed = true;
    if (err && !(err instanceof SpdyProtocolError)) this.#reportError(err);
    for (const waiter of this.#pendingReplies.values()) waiter.reject(new Error('SPDY connection closed'));
    this.#pendingReplies.clear();
    this.#pings.clear();
    for (const stream of [...this.#streams.values()]) stream.handleConnectionClosed();
    this.#streams.clear();
    this.#blocked.clear();
    this.#inflater.close();
    this.#deflater.close();
    if (!this.#socket.destroyed) this.#socket.destroy();
    this.#resolveClosed();
    this.emit('close');
  }
}

/**
 * One SPDY stream as a Node duplex: writing sends DATA, `end()` sends an empty
 * DATA frame with FIN (spdystream Stream.Close), reading yields the peer's
 * DATA until its FIN. A reset from either side, or the connection going away,
 * destroys the stream without an error so that callers only need 'close'.
 * Extra events: 'headers' (HeaderMap, from a HEADERS frame) and 'reset'
 * (status, from the peer's RST_STREAM).
 */
export class SpdyStream extends Duplex {
  readonly id: number;
  /** The SYN_STREAM headers: the peer's for streams it opened, ours otherwise. */
  readonly headers: HeaderMap;
  readonly #host: StreamHost;
  readonly #local: boolean;
  #replied: boolean;
  #localFin = false;
  #remoteFin = false;
  #reset = false;
  #blocked = false;

  constructor(host: StreamHost, id: number, headers: HeaderMap, options: { local: boolean }) {
    // Large enough that a handler which never reads a small stream (say, exec
    // stdin for `echo`) does not stall the whole connection.
    super({ allowHalfOpen: true, readableHighWaterMark: 1 << 20, writableHighWaterMark: 256 * 1024 });
    this.#host = host;
    this.id = id;
    this.headers = headers;
    this.#local = options.local;
    // Our own streams count as replied once created: writes wait for the reply in createStream.
    this.#replied = options.local;
    // A peer that hangs up mid-write is routine for a test server; without a
    // listener a late 'error' would take the whole process down. Callers may add their own.
    this.on('error', () => undefined);
  }

  /** First value of a SYN_STREAM header, case-insensitive (e.g. `streamtype`, `port`, `requestid`). */
  header(name: string): string | undefined {
    return headerValue(this.headers, name);
  }

  get localFinished(): boolean {
    return this.#localFin || this.#reset;
  }

  /** The peer sent FIN or RST_STREAM, or the connection closed. */
  get remoteFinished(): boolean {
    return this.#remoteFin;
  }

  get wasReset(): boolean {
    return this.#reset;
  }

  /** Accepts a stream the peer opened (SYN_REPLY). Idempotent. */
  reply(headers: HeaderInput = {}, options: { fin?: boolean } = {}): Promise<void> {
    if (this.#replied || this.#local) return Promise.resolve();
    this.#replied = true;
    if (options.fin) this.#localFin = true;
    return this.#host.sendFrame({
      type: 'syn_reply',
      streamId: this.id,
      flags: options.fin ? FLAG_FIN : 0,
      headers: lowerHeaders(headers),
    });
  }

  /** Sends RST_STREAM (unless this side already finished) and destroys the stream. */
  reset(status: number = RstStatus.Cancel): void {
    if (!this.#reset && !this.#localFin && !this.#host.closed) {
      this.#host.sendFrame({ type: 'rst_stream', streamId: this.id, status }).catch(() => undefined);
    }
    this.#reset = true;
    this.#endReadable();
    this.destroy();
  }

  override _read(): void {
    if (this.#blocked) {
      this.#blocked = false;
      this.#host.streamBlocked(this, false);
    }
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#reset || this.#localFin || this.#host.closed) {
      // Like writing to a socket the peer has reset: the bytes go nowhere. Not an
      // error event, so a handler racing a client that hung up does not crash the process.
      callback();
      return;
    }
    this.#sendData(chunk).then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#reset || this.#localFin || this.#host.closed) {
      this.#localFin = true;
      callback();
      return;
    }
    this.#localFin = true;
    this.#ensureReplied()
      .then(() =>
        this.#host.sendFrame({ type: 'data', streamId: this.id, flags: FLAG_FIN, data: Buffer.alloc(0) }),
      )
      .then(() => {
        if (this.#remoteFin) this.#host.forget(this);
        callback();
      }, callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.#reset && !this.#localFin && !this.#host.closed) {
      this.#reset = true;
      this.#host
        .sendFrame({ type: 'rst_stream', streamId: this.id, status: RstStatus.Cancel })
        .catch(() => undefined);
    }
    this.#host.forget(this);
    callback(error);
  }

  /** @internal DATA from the peer. */
  handleData(data: Buffer): void {
    if (this.#remoteFin || this.destroyed) return;
    if (!this.push(data) && !this.#blocked) {
      this.#blocked = true;
      this.#host.streamBlocked(this, true);
    }
  }

  /** @internal The peer's FIN. */
  handleFin(): void {
    this.#endReadable();
    // Both directions done: the id is free, as in spdystream remoteStreamFinish.
    if (this.#localFin) this.#host.forget(this);
  }

  /** @internal RST_STREAM from the peer. */
  handleReset(status: number): void {
    this.#reset = true;
    this.emit('reset', status);
    this.#endReadable();
    this.destroy();
  }

  /**
   * @internal The transport went away: what was received can still be read
   * to its end; writes go nowhere. The stream closes once both sides are done.
   */
  handleConnectionClosed(): void {
    this.#endReadable();
    if (!this.writableEnded) this.end();
    if (this.readableLength === 0 && !this.readableFlowing) this.resume();
  }

  /** @internal SYN_STREAM carried FLAG_UNIDIRECTIONAL, or we opened it with FIN. */
  markLocalFinished(): void {
    this.#localFin = true;
  }

  #endReadable(): void {
    if (this.#remoteFin) return;
    this.#remoteFin = true;
    if (!this.destroyed) this.push(null);
  }

  async #sendData(chunk: Buffer): Promise<void> {
    await this.#ensureReplied();
    for (let offset = 0; offset < chunk.length; offset += DATA_CHUNK) {
      const data = chunk.subarray(offset, Math.min(offset + DATA_CHUNK, chunk.length));
      await this.#host.sendFrame({ type: 'data', streamId: this.id, flags: 0, data });
    }
  }

  #ensureReplied(): Promise<void> {
    return this.#replied ? Promise.resolve() : this.reply();
  }
}

function lowerHeaders(headers: HeaderInput): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, value] of Object.entries(headers)) {
    const key = name.toLowerCase();
    out[key] = [...(out[key] ?? []), ...(Array.isArray(value) ? value : [String(value)])];
  }
  return out;
}

function drained(socket: Duplex): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}
