/**
 * In-process cost of HttpGuard.check against the limiter alone and rate-limiter-flexible, for a
 * synchronous limiter (`decide`) and an asynchronous one (`takeDecision`, here a promise already resolved:
 * the cost of the async path itself, no Redis). Target: with a synchronous limiter, the guard (key, decision,
 * three RateLimit headers) stays faster than rate-limiter-flexible's consume() plus the same headers.
 */
import http from 'node:http';
import net from 'node:net';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { bench, fasterBy } from './harness.js';
import { KeyedLimiter } from '../src/limit/keyed-limiter.js';
import { AdaptiveShedder } from '../src/limit/adaptive-shedder.js';
import { SreBreaker } from '../src/breaker/sre-breaker.js';
import { HttpGuard } from '../src/http/index.js';

const ips = Array.from({ length: 1024 }, (_, i) => `127.0.${i >> 8}.${i & 255}`);
function reqs(): http.IncomingMessage[] {
  return ips.map((ip) => {
    const sock = new net.Socket();
    Object.defineProperty(sock, 'remoteAddress', { value: ip });
    return new http.IncomingMessage(sock);
  });
}
const res = () => new http.ServerResponse(new http.IncomingMessage(new net.Socket()));
const big = { rate: 1e9, burst: 1e9 };
const RLF = 'rate-limiter-flexible consume(ip) + 3 headers';
const SYNC = 'guard.check: limiter by IP (+3 RateLimit headers)';

await bench('http: HttpGuard.check per request, in process (1 024 client IPs, all admitted)', {
  baseline: 'KeyedLimiter.decide(ip) alone',
  targets: [fasterBy('guard.check with a decide() limiter faster than rate-limiter-flexible + headers', SYNC, RLF, 1)],
  subjects: {
    'KeyedLimiter.decide(ip) alone': () => {
      const l = new KeyedLimiter(big);
      const rq = reqs();
      let i = 0;
      return { op: () => l.decide(rq[i++ & 1023]!.socket.remoteAddress!) };
    },
    [SYNC]: () => {
      const g = new HttpGuard({ limiter: new KeyedLimiter(big) });
      const rq = reqs();
      const r = res();
      let i = 0;
      return { op: () => g.check(rq[i++ & 1023]!, r) };
    },
    'guard.check: takeDecision limiter by IP (async, resolved at once)': () => {
      const l = new KeyedLimiter(big);
      const g = new HttpGuard({ limiter: { takeDecision: (key: string) => Promise.resolve(l.decide(key)) } });
      const rq = reqs();
      const r = res();
      let i = 0;
      return { async: true, op: () => g.check(rq[i++ & 1023]!, r) };
    },
    'guard.check: shedder + limiter + breaker, tokens completed': () => {
      const shedder = new AdaptiveShedder({ load: () => ({ utilization: 0, delayP99Ms: 0 }) });
      const g = new HttpGuard({ limiter: new KeyedLimiter(big), shedder, breaker: new SreBreaker() });
      const rq = reqs();
      const r = res();
      let i = 0;
      return {
        op: () => {
          g.check(rq[i++ & 1023]!, r);
          r.emit('close');
          r.removeAllListeners('close');
        },
      };
    },
    [RLF]: () => {
      const l = new RateLimiterMemory({ points: 1e9, duration: 1 });
      const rq = reqs();
      const r = res();
      let i = 0;
      return {
        async: true,
        op: () =>
          l.consume(rq[i++ & 1023]!.socket.remoteAddress!).then((x) => {
            r.setHeader('ratelimit-limit', 1e9);
            r.setHeader('ratelimit-remaining', x.remainingPoints);
            r.setHeader('ratelimit-reset', Math.ceil(x.msBeforeNext / 1000));
          }),
      };
    },
  },
});
