import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  describeDecision,
  fixedProxyRoute,
  type ProxyDecision,
  parseProxyValue,
  proxyEnvironment,
  proxyRouteFromEnvironment,
  redactProxyUrl,
} from './env-proxy.ts';

const proxyOf = (d: ProxyDecision) => (d.kind === 'proxy' ? d.url.href : d.kind);

describe('proxy environment (Go httpproxy.FromEnvironment)', () => {
  test('upper case wins over lower case; empty values count as unset', () => {
    assert.deepEqual(
      proxyEnvironment({
        HTTPS_PROXY: 'http://upper:1',
        https_proxy: 'http://lower:1',
        HTTP_PROXY: '',
        http_proxy: 'http://lower:2',
        no_proxy: 'a.example',
      }),
      { httpsProxy: 'http://upper:1', httpProxy: 'http://lower:2', noProxy: 'a.example' },
    );
    assert.deepEqual(proxyEnvironment({}), {});
    assert.equal(proxyEnvironment({ REQUEST_METHOD: 'GET' }).cgi, true);
  });

  test('a value without a scheme is http:// (Go parseProxy); https:// and socks5:// are kept', () => {
    assert.equal(parseProxyValue('cache.corp.example.com:1234')?.href, 'http://cache.corp.example.com:1234/');
    assert.equal(parseProxyValue('10.0.0.1:3128')?.href, 'http://10.0.0.1:3128/');
    assert.equal(parseProxyValue('https://cache.corp.example.com')?.href, 'https://cache.corp.example.com/');
    assert.equal(parseProxyValue('socks5://127.0.0.1:1080')?.protocol, 'socks5:');
    assert.equal(parseProxyValue('http://[fd00::1]:3128')?.hostname, '[fd00::1]');
  });
});

describe('which proxy for which target', () => {
  test('HTTPS_PROXY for https:// targets, HTTP_PROXY for http://; none set: direct', () => {
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://s:1', httpProxy: 'http://p:2' });
    assert.equal(proxyOf(route(new URL('https://hub.example:6443'))), 'http://s:1/');
    assert.equal(proxyOf(route(new URL('http://hub.example'))), 'http://p:2/');
    const onlyHttp = proxyRouteFromEnvironment({ httpProxy: 'http://p:2' });
    assert.deepEqual(onlyHttp(new URL('https://hub.example')), {
      kind: 'direct',
      reason: 'no HTTPS_PROXY set',
    });
    const decision = route(new URL('https://hub.example'));
    assert.ok(decision.kind === 'proxy');
    assert.equal(decision.source, 'HTTPS_PROXY');
  });

  test('localhost and loopback addresses are never proxied', () => {
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://s:1' });
    for (const target of [
      'https://localhost:6443',
      'https://127.0.0.1',
      'https://127.0.0.2',
      'https://[::1]:443',
    ]) {
      assert.equal(route(new URL(target)).kind, 'direct', target);
    }
    assert.equal(route(new URL('https://[::2]')).kind, 'proxy', '::2 is not a loopback address');
  });

  test('a CGI environment refuses HTTP_PROXY (httpoxy), not HTTPS_PROXY', () => {
    const route = proxyRouteFromEnvironment({ httpProxy: 'http://p:2', httpsProxy: 'http://s:1', cgi: true });
    const refused = route(new URL('http://hub.example'));
    assert.equal(refused.kind, 'invalid');
    assert.equal(route(new URL('https://hub.example')).kind, 'proxy');
  });

  // Go's TestUseProxy table (golang.org/x/net/http/httpproxy/proxy_test.go), with its NO_PROXY value.
  test("NO_PROXY: Go's table of hosts, domains, wildcards, IPs, ports and CIDRs", () => {
    const noProxy =
      'foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, [2001:db8::52:0:3]:80, 2002:db8:a::45/64';
    const route = proxyRouteFromEnvironment({ httpProxy: 'http://proxy:3128', noProxy });
    const table: [string, boolean][] = [
      ['localhost', false],
      ['127.0.0.1', false],
      ['127.0.0.2', false],
      ['[::1]', false],
      ['[::2]', true],
      ['192.168.1.1', false], // exact IPv4
      ['192.168.1.2', true], // its entry names port 81
      ['192.168.1.3', false], // IPv4:port
      ['192.168.1.4', true],
      ['10.0.0.2', false], // CIDR
      ['[2001:db8::52:0:1]', false], // exact IPv6
      ['[2001:db8::52:0:2]', true], // its entry names port 443
      ['[2001:db8::52:0:3]', false], // [IPv6]:port
      ['[2002:db8:a::123]', false], // IPv6 CIDR
      ['[fe80::424b:c8be:1643:a1b6]', true],
      ['barbaz.net', true], // .barbaz.net: subdomains only
      ['www.barbaz.net', false],
      ['foobar.com', false], // foobar.com: itself
      ['www.foobar.com', false], // and its subdomains
      ['foofoobar.com', true],
      ['baz.com', true],
      ['localhost.net', true],
      ['local.localhost', true],
      ['barbarbaz.net', true],
      ['wildcard.io', true], // *.wildcard.io: subdomains only
      ['nested.wildcard.io', false],
      ['awildcard.io', true],
    ];
    for (const [host, proxied] of table) {
      assert.equal(route(new URL(`http://${host}`)).kind, proxied ? 'proxy' : 'direct', host);
    }
  });

  test("NO_PROXY: a port is the URL's or the scheme's default; case and spaces do not matter", () => {
    const route = proxyRouteFromEnvironment({
      httpsProxy: 'http://proxy:3128',
      noProxy: ' Hub.Example:6443 ,10.96.0.1:443,,:8080',
    });
    assert.equal(route(new URL('https://hub.example:6443')).kind, 'direct');
    assert.equal(route(new URL('https://api.hub.example:6443')).kind, 'direct');
    assert.equal(route(new URL('https://hub.example')).kind, 'proxy', 'port 443 is not 6443');
    assert.equal(route(new URL('https://10.96.0.1')).kind, 'direct', 'https:// means port 443');
    assert.equal(route(new URL('https://10.96.0.1:6443')).kind, 'proxy');
    assert.equal(route(new URL('https://other:8080')).kind, 'proxy', '":8080" has no host: skipped');
  });

  test('NO_PROXY=* turns the proxy off; malformed entries are skipped', () => {
    assert.equal(
      proxyRouteFromEnvironment({ httpsProxy: 'http://p:1', noProxy: 'x, *' })(new URL('https://a')).kind,
      'direct',
    );
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://p:1', noProxy: '10.0.0.0/99,[],.' });
    assert.equal(route(new URL('https://10.0.0.1')).kind, 'proxy');
  });

  test("a kubeconfig's proxy-url applies to every target, NO_PROXY or not", () => {
    const route = fixedProxyRoute('http://user:secret@proxy:3128');
    const d = route(new URL('https://localhost'));
    assert.equal(proxyOf(d), 'http://user:secret@proxy:3128/');
    assert.equal(fixedProxyRoute('::').call(null, new URL('https://a')).kind, 'invalid');
  });
});

describe('logging a proxy', () => {
  test('userinfo is redacted', () => {
    assert.equal(redactProxyUrl('http://alice:s3cret@proxy:3128'), 'http://redacted@proxy:3128');
    assert.equal(redactProxyUrl('https://proxy.example'), 'https://proxy.example');
    assert.equal(
      redactProxyUrl('alice:s3cret@proxy:3128'),
      'http://redacted@proxy:3128',
      'no scheme: http://',
    );
    const route = proxyRouteFromEnvironment({ httpsProxy: 'http://alice:s3cret@proxy:3128', noProxy: 'a' });
    const line = describeDecision(route(new URL('https://hub:6443')));
    assert.equal(line, 'through http://redacted@proxy:3128 (HTTPS_PROXY)');
    assert.doesNotMatch(line, /s3cret|alice/);
    assert.equal(describeDecision(route(new URL('https://a'))), 'direct (in NO_PROXY)');
  });
});
