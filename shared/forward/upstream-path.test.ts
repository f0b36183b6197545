import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { basePathOf } from '../transport/connect-direct.ts';
import { isStreamingRequest, joinUpstreamPath } from './upstream-path.ts';

describe('joinUpstreamPath and basePathOf', () => {
  it('joins onto a sub-path without double slashes', () => {
    const base = basePathOf('/prefix/');
    assert.equal(base, '/prefix');
    assert.equal(joinUpstreamPath(base, '/api/v1?x=1'), '/prefix/api/v1?x=1');
    assert.equal(joinUpstreamPath(base, ''), '/prefix');
    assert.equal(joinUpstreamPath(base, '?x=1'), '/prefix?x=1');
  });

  it('joins onto the root', () => {
    assert.equal(basePathOf('/'), '');
    assert.equal(joinUpstreamPath('', '/healthz'), '/healthz');
    assert.equal(joinUpstreamPath('', ''), '/');
    assert.equal(joinUpstreamPath('', '?x'), '/?x');
  });
});

describe('isStreamingRequest', () => {
  it('recognizes watches and followed logs', () => {
    assert.ok(isStreamingRequest('/api/v1/pods?watch=true'));
    assert.ok(isStreamingRequest('/api/v1/pods?resourceVersion=1&watch=1&allowWatchBookmarks=true'));
    assert.ok(isStreamingRequest('/api/v1/namespaces/d/pods/p/log?container=c&follow=true'));
    assert.ok(isStreamingRequest('/api/v1/watch/namespaces/d/pods'));
  });

  it('does not flag ordinary requests', () => {
    assert.ok(!isStreamingRequest('/api/v1/pods'));
    assert.ok(!isStreamingRequest('/api/v1/pods?watch=false'));
    assert.ok(!isStreamingRequest('/api/v1/pods?allowWatchBookmarks=true'));
    assert.ok(!isStreamingRequest('/api/v1/namespaces/d/pods/p/log?follow=false'));
    assert.ok(!isStreamingRequest('/api/v1/namespaces/d/configmaps/watcher'));
  });
});
