import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { duplexPair } from 'node:stream';
import { test } from 'node:test';
import {
  decodeFrame,
  decodeHeaderBlock,
  encodeDataFrame,
  encodeFrame,
  encodeHeaderBlock,
  FLAG_FIN,
  type Frame,
  FrameParser,
  HeaderCompressor,
  HeaderDecompressor,
  RstStatus,
  SPDY3_DICTIONARY,
  SpdyConnection,
  type SpdyStream,
} from './spdy.ts';

/** Everything a readable yields until it ends or is torn down. */
function collect(stream: SpdyStream | undefined): Promise<Buffer> {
  if (!stream) return Promise.resolve(Buffer.alloc(0));
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise((resolve) => {
    const done = () => resolve(Buffer.concat(chunks));
    if (stream.readableEnded || stream.destroyed) done();
    stream.once('end', done);
    stream.once('close', done);
  });
}

/**
 * Frames written by moby/spdystream v0.5.1's spdy.Framer (the Go client that
 * kubectl and kube-apiserver use): SYN_STREAM 1 {streamType: error},
 * SYN_STREAM 3 {streamType: stdout}, SYN_STREAM 5 with FIN {streamType: data,
 * port: 8080, requestID: 0, x-multi: [a, b]}, DATA 1 "hello", DATA 1 FIN,
 * PING 1, RST_STREAM 3 CANCEL, SYN_REPLY 2 {}, GOAWAY 5 OK. Header blocks
 * share one zlib stream at BestCompression, as on a real connection.
 */
const GO_FRAMES = Buffer.from(
  '80030001000000290000000100000000000078f9e3c6a7c26260606004a7b392a2d4c45c6851c29a0a0a6800000000ffff80' +
    '0300010000001900000003000000000000c22ac5565c92925f5a02000000ffff800300010100003d00000005000000000000' +
    '02e50a0c395009940829cc8bc0f9c6c2c0c280818181b30812f999a04cc1081261afd0cd2dcd29c90417c20c4900000000ff' +
    'ff000000010000000568656c6c6f000000010100000080030006000000040000000180030003000000080000000300000005' +
    '800300020000000e000000026260606000000000ffff80030007000000080000000500000000',
  'hex',
);

function adler32(data: Buffer): number {
  let a = 1;
  let b = 0;
  for (const byte of data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

async function decodeAll(bytes: Buffer, inflater = new HeaderDecompressor()): Promise<Frame[]> {
  const frames: Frame[] = [];
  for (const raw of new FrameParser().push(bytes)) frames.push(await decodeFrame(raw, inflater));
  inflater.close();
  return frames;
}

test('the SPDY/3 dictionary is the one the zlib header names', () => {
  assert.equal(SPDY3_DICTIONARY.length, 1423);
  // Go's zlib writer puts this id after the 0x78 0xf9 header; see GO_FRAMES bytes 18..21.
  assert.equal(adler32(SPDY3_DICTIONARY), 0xe3c6a7c2);
  assert.equal(GO_FRAMES.readUInt32BE(20), 0xe3c6a7c2);
  assert.equal(SPDY3_DICTIONARY.subarray(0, 11).toString('latin1'), '\0\0\0\x07options');
});

test('decodes frames written by the Go spdystream framer', async () => {
  const frames = await decodeAll(GO_FRAMES);
  assert.deepEqual(
    frames.map((f) => f.type),
    ['syn_stream', 'syn_stream', 'syn_stream', 'data', 'data', 'ping', 'rst_stream', 'syn_reply', 'goaway'],
  );
  const [error, stdout, data, hello, fin, ping, rst, reply, goaway] = frames;
  assert.deepEqual(error, {
    type: 'syn_stream',
    streamId: 1,
    associatedToStreamId: 0,
    priority: 0,
    slot: 0,
    flags: 0,
    headers: { streamtype: ['error'] },
  });
  assert.deepEqual(stdout?.type === 'syn_stream' && stdout.headers, { streamtype: ['stdout'] });
  assert.ok(data?.type === 'syn_stream');
  assert.equal(data.flags, FLAG_FIN);
  // Go canonicalizes names (requestID → Requestid) and spdystream lowercases them on the wire.
  assert.deepEqual(data.headers, {
    streamtype: ['data'],
    port: ['8080'],
    requestid: ['0'],
    'x-multi': ['a', 'b'],
  });
  assert.deepEqual(hello, { type: 'data', streamId: 1, flags: 0, data: Buffer.from('hello') });
  assert.deepEqual(fin, { type: 'data', streamId: 1, flags: FLAG_FIN, data: Buffer.alloc(0) });
  assert.deepEqual(ping, { type: 'ping', id: 1 });
  assert.deepEqual(rst, { type: 'rst_stream', streamId: 3, status: RstStatus.Cancel });
  assert.deepEqual(reply, { type: 'syn_reply', streamId: 2, flags: 0, headers: {} });
  assert.deepEqual(goaway, { type: 'goaway', lastGoodStreamId: 5, status: 0 });
});

test('the frame parser reassembles frames split at every byte', async () => {
  const parser = new FrameParser();
  const raws = [];
  for (const byte of GO_FRAMES) raws.push(...parser.push(Buffer.from([byte])));
  assert.equal(parser.buffered, 0);
  const inflater = new HeaderDecompressor();
  const frames = [];
  for (const raw of raws) frames.push(await decodeFrame(raw, inflater));
  inflater.close();
  assert.deepEqual(frames, await decodeAll(GO_FRAMES));
});

test('header blocks: lowercase names, several values joined by NUL', () => {
  const block = encodeHeaderBlock({ StreamType: 'data', Port: 8080, 'X-Multi': ['a', 'b'] });
  assert.equal(block.readUInt32BE(0), 3);
  assert.ok(block.includes(Buffer.from('a\0b')));
  assert.deepEqual(decodeHeaderBlock(block), { streamtype: ['data'], port: ['8080'], 'x-multi': ['a', 'b'] });
  assert.throws(() => decodeHeaderBlock(block.subarray(0, block.length - 1)), /truncated/);
});

test('one compression context carries many header blocks, large ones included', async () => {
  const deflater = new HeaderCompressor();
  const inflater = new HeaderDecompressor();
  const blocks = [];
  for (let i = 0; i < 40; i++) {
    // Random values do not compress: they exercise zlib output larger than one chunk.
    const value = i % 4 === 3 ? randomBytes(60_000).toString('base64') : `value-${i}`;
    blocks.push({ streamtype: [`type-${i % 5}`], payload: [value] });
  }
  // Started together: the pipes must keep order on their own.
  const compressed = await Promise.all(blocks.map((b) => deflater.compress(b)));
  // Each block ends with the sync-flush marker, so it can be inflated on its own.
  for (const c of compressed) assert.deepEqual([...c.subarray(-4)], [0, 0, 0xff, 0xff]);
  const decoded = await Promise.all(compressed.map((c) => inflater.decompress(c)));
  assert.deepEqual(decoded, blocks);
  deflater.close();
  inflater.close();
});

test('every frame type survives an encode/decode round trip', async () => {
  const frames: Frame[] = [
    {
      type: 'syn_stream',
      streamId: 7,
      associatedToStreamId: 3,
      priority: 5,
      slot: 0,
      flags: FLAG_FIN,
      headers: { streamtype: ['stdin'] },
    },
    {
      type: 'syn_reply',
      streamId: 7,
      flags: 0,
      headers: { 'x-stream-protocol-version': ['v4.channel.k8s.io'] },
    },
    { type: 'headers', streamId: 7, flags: FLAG_FIN, headers: { trailer: ['x'] } },
    { type: 'data', streamId: 7, flags: FLAG_FIN, data: Buffer.from('payload') },
    { type: 'rst_stream', streamId: 7, status: RstStatus.RefusedStream },
    { type: 'settings', flags: 1, entries: [{ id: 7, flags: 1, value: 65536 }] },
    { type: 'ping', id: 0xfffffffe },
    { type: 'goaway', lastGoodStreamId: 9, status: 2 },
    { type: 'window_update', streamId: 7, delta: 1000 },
    { type: 'unknown', frameType: 0x42, version: 3, flags: 0, payload: Buffer.from([1, 2, 3]) },
  ];
  const deflater = new HeaderCompressor();
  const bytes = [];
  for (const frame of frames) bytes.push(await encodeFrame(frame, deflater));
  deflater.close();
  assert.deepEqual(await decodeAll(Buffer.concat(bytes)), frames);
  // The DATA header: stream id, then FIN in the flags byte and a 24-bit length.
  assert.deepEqual([...encodeDataFrame(1, Buffer.from('hi'), true).subarray(0, 8)], [0, 0, 0, 1, 1, 0, 0, 2]);
});

/** A client and a server connection joined by an in-memory duplex pair. */
function connectionPair() {
  const [a, b] = duplexPair();
  const client = new SpdyConnection(a, { role: 'client', closeTimeoutMs: 200 });
  const server = new SpdyConnection(b, { role: 'server', closeTimeoutMs: 200 });
  return { client, server };
}

test('streams: reply, data both ways, FIN half-closes each direction', async () => {
  const { client, server } = connectionPair();
  server.on('stream', (stream) => {
    stream.reply();
    // Echo, upper-cased, then FIN when the client's FIN arrives.
    stream.on('data', (chunk: Buffer) => stream.write(chunk.toString().toUpperCase()));
    stream.on('end', () => stream.end('!'));
  });
  const stream = await client.createStream({ streamType: 'stdin' });
  assert.equal(stream.id, 1);
  const echoed = collect(stream);
  stream.write('hello ');
  stream.end('world');
  assert.equal((await echoed).toString(), 'HELLO WORLD!');
  const second = await client.createStream({ streamType: 'stdout' });
  assert.equal(second.id, 3, 'client stream ids are odd and increasing');
  await client.close();
  await server.done;
  assert.ok(client.closed && server.closed);
});

test('streams carry the SYN_STREAM headers and large payloads in order', async () => {
  const { client, server } = connectionPair();
  const seen = new Promise<SpdyStream>((resolve) => server.once('stream', resolve));
  const payload = randomBytes(1_000_000);
  const stream = createAndSend(client, payload);
  const remote = await seen;
  assert.equal(remote.header('streamtype'), 'data');
  assert.equal(remote.header('Port'), '8080');
  remote.reply();
  assert.ok((await collect(remote)).equals(payload));
  await stream;
  await client.close();
});

async function createAndSend(client: SpdyConnection, payload: Buffer): Promise<void> {
  const stream = await client.createStream({ streamType: 'data', port: 8080, requestID: 0 });
  stream.end(payload);
  await once(stream, 'finish');
}

test('reset: the peer sees RST_STREAM, the stream closes, later writes are dropped', async () => {
  const { client, server } = connectionPair();
  const remote = new Promise<SpdyStream>((resolve) =>
    server.once('stream', (s) => {
      s.reply();
      resolve(s);
    }),
  );
  const stream = await client.createStream({ streamType: 'data' });
  const serverStream = await remote;
  const status = once(serverStream, 'reset');
  stream.reset(RstStatus.Cancel);
  assert.deepEqual(await status, [RstStatus.Cancel]);
  assert.ok(serverStream.wasReset);
  await once(serverStream, 'close');
  serverStream.write('into the void');
  assert.equal(server.streams.size, 0);
  await client.close();
});

test('a refused stream fails createStream', async () => {
  const { client, server } = connectionPair();
  server.on('stream', (s) => s.reset(RstStatus.RefusedStream));
  await assert.rejects(client.createStream({ streamType: 'nope' }), /reset \(3\)/);
  await client.close();
});

test('pings are answered by the other side, in either direction', async () => {
  const { client, server } = connectionPair();
  assert.ok((await client.ping()) >= 0);
  assert.ok((await server.ping()) >= 0);
  await client.close();
});

test('close resets unfinished streams, sends GOAWAY and ends both connections', async () => {
  const { client, server } = connectionPair();
  const serverStreams: SpdyStream[] = [];
  server.on('stream', (s) => {
    s.reply();
    serverStreams.push(s);
  });
  const goaway = once(client, 'goaway');
  const finished = await client.createStream({ streamType: 'stdout' });
  const open = await client.createStream({ streamType: 'stdin' });
  const reset = once(open, 'reset');
  await new Promise<void>((resolve) => serverStreams[0]!.end('bye', resolve));
  const closing = server.close();
  assert.deepEqual(await goaway, [{ lastGoodStreamId: 3, status: 0 }]);
  assert.deepEqual(await reset, [RstStatus.Cancel]);
  assert.equal((await collect(finished)).toString(), 'bye');
  await closing;
  await client.done;
});

test('a stream id of the wrong parity is refused with PROTOCOL_ERROR', async () => {
  const [a, b] = duplexPair();
  const server = new SpdyConnection(b, { role: 'server' });
  server.on('stream', () => assert.fail('must not surface'));
  const deflater = new HeaderCompressor();
  a.write(
    await encodeFrame(
      {
        type: 'syn_stream',
        streamId: 2,
        associatedToStreamId: 0,
        priority: 0,
        slot: 0,
        flags: 0,
        headers: {},
      },
      deflater,
    ),
  );
  const [chunk] = (await once(a, 'data')) as [Buffer];
  assert.deepEqual(await decodeAll(chunk), [
    { type: 'rst_stream', streamId: 2, status: RstStatus.ProtocolError },
  ]);
  deflater.close();
  server.destroy();
});

test('a corrupt header block is a protocol error that ends the connection', async () => {
  const [a, b] = duplexPair();
  const server = new SpdyConnection(b, { role: 'server' });
  const errors: Error[] = [];
  server.on('error', (err) => errors.push(err));
  const bogus = Buffer.concat([Buffer.from([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]), Buffer.from('not zlib at all')]);
  const frame = Buffer.alloc(8);
  frame.writeUInt32BE(0x80030001, 0);
  frame.writeUInt32BE(bogus.length, 4);
  a.resume();
  a.write(Buffer.concat([frame, bogus]));
  await server.done;
  assert.equal(errors.length, 1);
});
