/**
 * The handlers send a BulwarkMetrics scrape as the parts it was rendered in, views of the families'
 * buffers, which later scrapes write again: on real servers (node:http, Express, Fastify) on loopback
 * ports, a client that does not read and scrapes made while its response is still being sent must each
 * get exactly the exposition of their own scrape (`metrics()` taken at the same state); GET and HEAD
 * carry the exposition's length (the sum of the parts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import express from 'express';
import fastify from 'fastify';
import { Registry } from 'prom-client';
import { BulwarkMetrics, expressMetrics, fastifyMetrics, metricsHandler } from '../src/metrics/index.js';
import { BreakerGroup } from '../src/breaker/index.js';
import { ManualClock } from '../src/core/index.js';
import { waitFor } from './support/servers.js';

/** BREAKERS makes an exposition (~11 MB) larger than a loopback connection holds unread (~4 MB here). */
const BREAKERS = 20_000;

async function task(): Promise<number> {
  return 1;
}

/** body answers the body of the one HTTP/1.1 response read from `socket` (its content-length bytes). */
function body(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    let head: { end: number; length: number } | undefined;
    socket.on('error', reject);
    socket.on('end', () => reject(new Error('the connection ended before the body')));
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      const all = (): Buffer => Buffer.concat(chunks);
      if (head === undefined) {
        const b = all();
        const end = b.indexOf('\r\n\r\n');
        if (end === -1) return;
        const length = /^content-length: (\d+)$/im.exec(b.subarray(0, end).toString('latin1'));
        if (length === null) return reject(new Error(`no content-length in ${b.subarray(0, end).toString('latin1')}`));
        head = { end: end + 4, length: Number(length[1]) };
      }
      if (got >= head.end + head.length) {
        socket.destroy();
        resolve(all().subarray(head.end, head.end + head.length));
      }
    });
  });
}

/** Served is a server answering `/metrics` on a loopback port, and the responses it was asked for, in order. */
interface Served {
  port: number;
  responses: ServerResponse[];
  close(): Promise<void>;
}

/** SERVERS: the handler on each framework, each response noted before the handler takes it. */
const SERVERS: Array<[string, (m: BulwarkMetrics) => Promise<Served>]> = [
  [
    'node:http',
    async (m) => {
      const responses: ServerResponse[] = [];
      const handler = metricsHandler(m);
      const server = createServer((req, res) => {
        responses.push(res);
        handler(req, res);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return { port: (server.address() as AddressInfo).port, responses, close: () => new Promise((r) => server.close(() => r())) };
    },
  ],
  [
    'Express',
    async (m) => {
      const responses: ServerResponse[] = [];
      const handler = expressMetrics(m);
      const app = express();
      app.get('/metrics', (req, res, next) => {
        responses.push(res);
        handler(req, res, next);
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((r) => server.once('listening', r));
      return { port: (server.address() as AddressInfo).port, responses, close: () => new Promise((r) => server.close(() => r())) };
    },
  ],
  [
    'Fastify',
    async (m) => {
      const responses: ServerResponse[] = [];
      const f = fastify();
      f.addHook('onRequest', (_req, reply, done) => {
        responses.push(reply.raw);
        done();
      });
      await f.register(fastifyMetrics(m));
      await f.listen({ port: 0, host: '127.0.0.1' });
      return { port: (f.server.address() as AddressInfo).port, responses, close: () => f.close() };
    },
  ],
];

describe('the metrics handlers', () => {
  for (const [framework, serve] of SERVERS) {
    it(`send a client that does not read, and the scrapes made meanwhile, each the bytes of its own scrape (${framework})`, async () => {
      const clock = new ManualClock();
      const group = new BreakerGroup({ clock, maxBreakers: BREAKERS });
      const names = Array.from({ length: BREAKERS }, (_, i) => `svc-${i}`);
      const calls = async (): Promise<void> => {
        for (const n of names) await group.execute(n, task);
      };
      await calls();
      const m = new BulwarkMetrics({ registry: new Registry() });
      m.track(group, { name: 'peers' });
      const { port, responses, close } = await serve(m);
      const slow = connect(port, '127.0.0.1');
      try {
        // The scrape the slow client gets, and the same state's exposition.
        const first = await m.metrics();
        assert.equal(await m.metrics(), first, 'nothing but the calls changes the exposition');
        slow.write('GET /metrics HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
        slow.pause(); // it reads no further than its own buffer
        await waitFor('the slow scrape to be rendered and its sending begun', () => responses[0]?.headersSent === true);
        // Meanwhile every breaker takes a call before each of two rounds of two scrapes at once.
        const url = `http://127.0.0.1:${port}/metrics`;
        for (let round = 0; round < 2; round++) {
          await calls();
          const expected = await m.metrics();
          assert.notEqual(expected, first);
          const got = await Promise.all([fetch(url).then((r) => r.text()), fetch(url).then((r) => r.text())]);
          assert.ok(got[0] === expected && got[1] === expected, `round ${round}: both scrapes answer the exposition of their state`);
        }
        assert.equal(responses[0]!.writableFinished, false, 'the slow response was still being sent all along');
        const read = body(slow);
        slow.resume();
        const slowText = (await read).toString('utf8');
        assert.equal(slowText.length, first.length);
        assert.ok(slowText === first, 'the slow client gets the exposition of its own scrape');
      } finally {
        slow.destroy();
        await close();
        await m.close();
      }
    });

    it(`answer GET with the exposition's length and bytes, and HEAD with its length and no body (${framework})`, async () => {
      const group = new BreakerGroup({ clock: new ManualClock() });
      for (let i = 0; i < 100; i++) await group.execute(`svc-${i}`, task);
      const m = new BulwarkMetrics({ registry: new Registry() });
      m.track(group, { name: 'peers' });
      const { port, close } = await serve(m);
      try {
        const expected = await m.metricsBuffer();
        const url = `http://127.0.0.1:${port}/metrics`;
        const get = await fetch(url);
        assert.equal(get.headers.get('content-length'), String(expected.length));
        assert.ok(Buffer.from(await get.arrayBuffer()).equals(expected), 'GET answers the bytes of metricsBuffer()');
        const head = await fetch(url, { method: 'HEAD' });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get('content-length'), String(expected.length));
        assert.match(head.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
        assert.equal((await head.arrayBuffer()).byteLength, 0);
      } finally {
        await close();
        await m.close();
      }
    });
  }
});
