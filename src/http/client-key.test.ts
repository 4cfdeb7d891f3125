import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { boundKey, clientAddress, MAX_KEY_LENGTH, socketAddress } from './client-key.js';

function req(remoteAddress: string | undefined, xff?: string): IncomingMessage {
  return { socket: { remoteAddress }, headers: xff === undefined ? {} : { 'x-forwarded-for': xff } } as unknown as IncomingMessage;
}

describe('clientAddress', () => {
  it('is the socket peer when no proxy is trusted, whatever X-Forwarded-For says', () => {
    assert.equal(clientAddress(req('10.0.0.9', '1.2.3.4'), 0), '10.0.0.9');
  });

  it('writes an IPv4-mapped IPv6 peer as IPv4', () => {
    assert.equal(socketAddress(req('::ffff:127.0.0.1')), '127.0.0.1');
    assert.equal(socketAddress(req('::1')), '::1');
    assert.equal(socketAddress(req(undefined)), 'unknown');
  });

  const table: Array<[string, number, string]> = [
    // [X-Forwarded-For, hops, expected client]
    ['203.0.113.7', 1, '203.0.113.7'],
    ['6.6.6.6, 203.0.113.7', 1, '203.0.113.7'], // the client forged 6.6.6.6; our proxy appended the real peer
    ['6.6.6.6,203.0.113.7 , 10.0.0.2', 2, '203.0.113.7'],
    ['203.0.113.7', 3, '203.0.113.7'], // fewer entries than hops: the leftmost
    ['203.0.113.7:41234', 1, '203.0.113.7'],
    ['[2001:db8::1]:41234', 1, '2001:db8::1'],
    ['2001:db8::1', 1, '2001:db8::1'],
    ['::ffff:203.0.113.7', 1, '203.0.113.7'],
    ['not-an-ip', 1, '10.0.0.9'], // garbage from the trusted proxy: the socket peer
    ['1.2.3.4, ', 1, '10.0.0.9'],
    ['', 1, '10.0.0.9'],
  ];
  for (const [xff, hops, want] of table) {
    it(`with ${hops} trusted hop(s), X-Forwarded-For ${JSON.stringify(xff)} names ${want}`, () => {
      assert.equal(clientAddress(req('10.0.0.9', xff), hops), want);
    });
  }

  it('answers an IP address or the socket peer for any header (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), fc.integer({ min: 1, max: 5 }), (xff, hops) => {
        const a = clientAddress(req('10.0.0.9', xff), hops);
        assert.ok(a === '10.0.0.9' || /^[0-9a-fA-F:.]+$/.test(a), a);
      }),
    );
  });
});

describe('boundKey', () => {
  it('keeps keys up to MAX_KEY_LENGTH and hashes longer ones to a short stable key', () => {
    const short = 'k'.repeat(MAX_KEY_LENGTH);
    assert.equal(boundKey(short), short);
    const long = 'k'.repeat(MAX_KEY_LENGTH + 1);
    const h = boundKey(long);
    assert.match(h, /^sha256:[A-Za-z0-9_-]{43}$/);
    assert.equal(boundKey(long), h);
    assert.notEqual(boundKey(long + 'x'), h);
  });
});
