// Temporary A/B (not committed): HttpGuard.check on this branch vs /work/base (pre-round), same run.
import http from 'node:http';
import net from 'node:net';
import { bench } from './harness.js';
import { KeyedLimiter } from '../src/limit/keyed-limiter.js';
import { AdaptiveShedder } from '../src/limit/adaptive-shedder.js';
import { SreBreaker } from '../src/breaker/sre-breaker.js';
import { HttpGuard } from '../src/http/index.js';

const base = '/work/base/dist/';
const B = {
  HttpGuard: (await import(base + 'http/index.js')).HttpGuard,
  KeyedLimiter: (await import(base + 'limit/keyed-limiter.js')).KeyedLimiter,
  AdaptiveShedder: (await import(base + 'limit/adaptive-shedder.js')).AdaptiveShedder,
  SreBreaker: (await import(base + 'breaker/sre-breaker.js')).SreBreaker,
};
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
const dual = (x: { admit(): unknown }) => ({ allow: () => x.admit(), admit: () => x.admit() });
const load = () => ({ utilization: 0, delayP99Ms: 0 });

await bench('http A/B: limiter by IP', {
  baseline: 'base: limiter by IP',
  subjects: {
    'base: limiter by IP': () => {
      const g = new B.HttpGuard({ limiter: new KeyedLimiter(big) });
      const rq = reqs(); const r = res(); let i = 0;
      return { op: () => g.check(rq[i++ & 1023]!, r) };
    },
    'new: limiter by IP': () => {
      const g = new HttpGuard({ limiter: new KeyedLimiter(big) });
      const rq = reqs(); const r = res(); let i = 0;
      return { op: () => g.check(rq[i++ & 1023]!, r) };
    },
    'base: shedder + limiter + breaker': () => {
      const g = new B.HttpGuard({ limiter: new KeyedLimiter(big), shedder: dual(new AdaptiveShedder({ load })), breaker: dual(new SreBreaker()) as never });
      const rq = reqs(); const r = res(); let i = 0;
      return { op: () => { g.check(rq[i++ & 1023]!, r); r.emit('close'); r.removeAllListeners('close'); } };
    },
    'new: shedder + limiter + breaker': () => {
      const g = new HttpGuard({ limiter: new KeyedLimiter(big), shedder: dual(new AdaptiveShedder({ load })) as never, breaker: dual(new SreBreaker()) as never });
      const rq = reqs(); const r = res(); let i = 0;
      return { op: () => { g.check(rq[i++ & 1023]!, r); r.emit('close'); r.removeAllListeners('close'); } };
    },
  },
});
