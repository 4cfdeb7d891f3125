import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { controlAccess, isLoopback, readAccess } from './access.js';

function req(local: string, headers: Record<string, string> = {}, method = 'POST'): IncomingMessage {
  return { socket: { localAddress: local }, headers: { host: 'dash.example:8080', ...headers }, method } as unknown as IncomingMessage;
}
const none = new URLSearchParams();
const TOKEN = 'secret-token-1';

describe('dashboard access', () => {
  it('knows loopback addresses', () => {
    for (const a of ['127.0.0.1', '127.3.2.1', '::1', '::ffff:127.0.0.1']) assert.ok(isLoopback(a), a);
    for (const a of ['10.0.0.1', '0.0.0.0', '::', '::ffff:10.0.0.1', '1127.0.0.1', undefined]) assert.ok(!isLoopback(a), String(a));
  });

  it('reads freely on loopback, and beyond it only with the token', () => {
    assert.equal(readAccess(req('127.0.0.1'), none, undefined), undefined);
    assert.equal(readAccess(req('10.0.0.5'), none, undefined)?.status, 403);
    assert.equal(readAccess(req('10.0.0.5'), none, TOKEN)?.status, 401);
    assert.equal(readAccess(req('10.0.0.5', { authorization: 'Bearer wrong' }), none, TOKEN)?.status, 401);
    assert.equal(readAccess(req('10.0.0.5', { authorization: `Bearer ${TOKEN}` }), none, TOKEN), undefined);
    assert.equal(readAccess(req('10.0.0.5'), new URLSearchParams({ token: TOKEN }), TOKEN), undefined);
  });

  it('refuses controls when off, from another origin or site, without JSON, or beyond loopback without the token', () => {
    const json = { 'content-type': 'application/json' };
    assert.match(controlAccess(req('127.0.0.1', json), none, undefined, false)!.message, /read-only/);
    assert.equal(controlAccess(req('127.0.0.1', json), none, undefined, true), undefined);
    assert.equal(
      controlAccess(req('127.0.0.1', { ...json, origin: 'http://dash.example:8080', 'sec-fetch-site': 'same-origin' }), none, undefined, true),
      undefined,
    );
    assert.match(controlAccess(req('127.0.0.1', { ...json, origin: 'http://evil.example' }), none, undefined, true)!.message, /another origin/);
    assert.match(controlAccess(req('127.0.0.1', { ...json, 'sec-fetch-site': 'cross-site' }), none, undefined, true)!.message, /another site/);
    assert.equal(controlAccess(req('127.0.0.1', { 'content-type': 'text/plain' }), none, undefined, true)!.status, 415);
    assert.equal(controlAccess(req('127.0.0.1', json, 'GET'), none, undefined, true)!.status, 405);
    assert.equal(controlAccess(req('10.0.0.5', json), none, TOKEN, true)!.status, 401);
    assert.equal(controlAccess(req('10.0.0.5', { ...json, authorization: `Bearer ${TOKEN}` }), none, TOKEN, true), undefined);
  });
});
