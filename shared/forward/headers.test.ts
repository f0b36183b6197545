import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { downstreamHeaders, upstreamHeaders } from './headers.ts';
import { headerValues } from './test-kit.ts';

const host = '10.0.0.1:6443';

describe('upstreamHeaders', () => {
  it('keeps end-to-end headers in order, repeated ones as separate lines', () => {
    const out = upstreamHeaders(
      [
        ':authority',
        'hub',
        'Accept',
        'application/json',
        'User-Agent',
        'kubectl/v1.31',
        'accept',
        'application/yaml',
        'Content-Length',
        '2',
      ],
      { host, framing: ['Content-Length', '2'] },
    );
    assert.deepEqual(out, [
      'Host',
      host,
      'Accept',
      'application/json',
      'User-Agent',
      'kubectl/v1.31',
      'accept',
      'application/yaml',
      'Content-Length',
      '2',
    ]);
  });

  it("drops the caller's credentials and identity claims", () => {
    const out = upstreamHeaders(
      [
        'Authorization',
        'Bearer hub-token',
        'Impersonate-User',
        'admin',
        'Impersonate-Group',
        'system:masters',
        'impersonate-extra-scopes',
        'x',
        'X-Remote-User',
        'admin',
        'x-remote-group',
        'system:masters',
        'X-Remote-Extra-Foo',
        'bar',
        'Proxy-Authorization',
        'Basic x',
        'Host',
        'hub.example.com',
        'Expect',
        '100-continue',
        'Accept',
        '*/*',
      ],
      { host },
    );
    assert.deepEqual(out, ['Host', host, 'Accept', '*/*']);
  });

  it('drops hop-by-hop headers, including those named in Connection', () => {
    const out = upstreamHeaders(
      [
        'Connection',
        'keep-alive, X-Hop',
        'Keep-Alive',
        'timeout=5',
        'X-Hop',
        'secret',
        'TE',
        'trailers',
        'Trailer',
        'X-T',
        'Upgrade',
        'websocket',
        'Proxy-Connection',
        'keep-alive',
        'X-Kept',
        'yes',
      ],
      { host },
    );
    assert.deepEqual(out, ['Host', host, 'X-Kept', 'yes']);
  });

  it('keeps Upgrade and asks for Connection: Upgrade on upgrade requests', () => {
    const out = upstreamHeaders(
      [
        'Connection',
        'Upgrade',
        'Upgrade',
        'SPDY/3.1',
        'X-Stream-Protocol-Version',
        'v4.channel.k8s.io',
        'X-Stream-Protocol-Version',
        'v3.channel.k8s.io',
      ],
      { host, upgrade: true },
    );
    assert.deepEqual(out, [
      'Host',
      host,
      'Upgrade',
      'SPDY/3.1',
      'X-Stream-Protocol-Version',
      'v4.channel.k8s.io',
      'X-Stream-Protocol-Version',
      'v3.channel.k8s.io',
      'Connection',
      'Upgrade',
    ]);
  });

  it("never copies the caller's framing headers and declares the given framing instead", () => {
    const raw = ['Connection', 'Content-Length', 'Content-Length', '12', 'Transfer-Encoding', 'chunked'];
    const none = upstreamHeaders(raw, { host });
    assert.deepEqual(headerValues(none, 'content-length'), []);
    assert.deepEqual(headerValues(none, 'transfer-encoding'), []);
    const framed = upstreamHeaders(raw, { host, framing: ['Content-Length', '12'] });
    assert.deepEqual(headerValues(framed, 'content-length'), ['12']);
    assert.deepEqual(headerValues(framed, 'transfer-encoding'), []);
  });

  it('appends the caller to X-Forwarded-For', () => {
    const out = upstreamHeaders(['X-Forwarded-For', '1.1.1.1', 'X-Forwarded-For', '2.2.2.2'], {
      host,
      forwardedFor: '10.1.1.1',
    });
    assert.deepEqual(headerValues(out, 'x-forwarded-for'), ['1.1.1.1, 2.2.2.2, 10.1.1.1']);
  });

  it('sets the cluster credential', () => {
    const out = upstreamHeaders(['Authorization', 'Bearer hub'], { host, authorization: 'Bearer cluster' });
    assert.deepEqual(headerValues(out, 'authorization'), ['Bearer cluster']);
  });

  it('impersonates the caller, one line per group and extra value', () => {
    const out = upstreamHeaders(['Impersonate-User', 'forged'], {
      host,
      identity: {
        name: 'alice@example.com',
        uid: 'u-1',
        groups: ['dev', 'system:authenticated'],
        extra: { 'example.com/team': ['a', 'b'], scopes: ['view'] },
      },
    });
    assert.deepEqual(out.slice(2), [
      'Impersonate-User',
      'alice@example.com',
      'Impersonate-Uid',
      'u-1',
      'Impersonate-Group',
      'dev',
      'Impersonate-Group',
      'system:authenticated',
      'Impersonate-Extra-example.com%2Fteam',
      'a',
      'Impersonate-Extra-example.com%2Fteam',
      'b',
      'Impersonate-Extra-scopes',
      'view',
    ]);
  });

  it('sends non-latin1 identity values as UTF-8 bytes', () => {
    const out = upstreamHeaders([], { host, identity: { name: 'Zoë 用户', groups: [], extra: {} } });
    const value = headerValues(out, 'impersonate-user')[0]!;
    assert.equal(Buffer.from(value, 'latin1').toString('utf8'), 'Zoë 用户');
  });

  it('sends latin1-range identity values as UTF-8 bytes too (not one byte per character)', () => {
    const out = upstreamHeaders([], {
      host,
      identity: { name: 'h-jösé', groups: ['g-ñ'], extra: { rôle: ['chef·de'] } },
    });
    const bytes = (name: string) => Buffer.from(headerValues(out, name)[0]!, 'latin1');
    assert.deepEqual(bytes('impersonate-user'), Buffer.from('h-jösé', 'utf8'));
    assert.deepEqual(bytes('impersonate-group'), Buffer.from('g-ñ', 'utf8'));
    assert.deepEqual(bytes('impersonate-extra-r%c3%b4le'), Buffer.from('chef·de', 'utf8'));
  });
});

describe('downstreamHeaders', () => {
  it('keeps repeated Set-Cookie and Warning, drops hop-by-hop', () => {
    const out = downstreamHeaders([
      'Content-Type',
      'application/json',
      'Set-Cookie',
      'a=1',
      'Set-Cookie',
      'b=2',
      'Warning',
      '299 - "deprecated"',
      'Warning',
      '299 - "other"',
      'Connection',
      'keep-alive, X-Internal',
      'X-Internal',
      'x',
      'Keep-Alive',
      'timeout=5',
      'Transfer-Encoding',
      'chunked',
      'Audit-Id',
      'abc',
    ]);
    assert.deepEqual(out, [
      'Content-Type',
      'application/json',
      'Set-Cookie',
      'a=1',
      'Set-Cookie',
      'b=2',
      'Warning',
      '299 - "deprecated"',
      'Warning',
      '299 - "other"',
      'Audit-Id',
      'abc',
    ]);
  });
});
