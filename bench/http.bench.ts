/** In-process cost of HttpGuard.check against the limiter alone and rate-limiter-flexible. */
import http from 'node:http';
import net from 'node:net';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { bench } from './harness.js';
import { KeyedLimiter } from '../src/limit/keyed-limiter.js';
import { AdaptiveShedder } from '../src/limit/adaptive-shedder.js';
import { SreBreaker } from '../src/breaker/sre-breaker.js';
import { HttpGuard } from '../src/http/index.js';
import { shedderSeam } from '../test/http-seams.js';

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

await bench('http: HttpGuard.check per request, in process (1 024 client IPs, all admitted)', {
  baseline: 'KeyedLimiter.decide(ip) alone',
  subjects: {
    'KeyedLimiter.decide(ip) alone': () => {
      const l = new KeyedLimiter(big);
      const rq = reqs();
      let i = 0;
      return { op: () => l.decide(rq[i++ & 1023]!.socket.remoteAddress!) };
    },
    'guard.check: limiter by IP (+3 RateLimit headers)': () => {
      const g = new HttpGuard({ limiter: new KeyedLimiter(big) });
      const rq = reqs();
      const r = res();
      let i = 0;
      return { op: () => g.check(rq[i++ & 1023]!, r) };
    },
    'guard.check: shedder + limiter + breaker, tokens completed': () => {
      const shedder = new AdaptiveShedder({ load: () => ({ utilization: 0, delayP99Ms: 0 }) });
      const g = new HttpGuard({ limiter: new KeyedLimiter(big), shedder: shedderSeam(shedder), breaker: new SreBreaker() });
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
    'rate-limiter-flexible consume(ip) + 3 headers': () => {
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
