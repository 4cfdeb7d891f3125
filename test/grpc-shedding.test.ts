/**
 * Server overload: a grpc-js server in its own process whose handler is CPU-bound (10 ms of CPU per
 * call, in slices), driven open-loop at four times its capacity. The AdaptiveShedder in its
 * GrpcServerGuard answers RESOURCE_EXHAUSTED quickly, while the server keeps serving within its capacity.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { credentials, status, type ServiceError } from '@grpc/grpc-js';
import { GreeterClientCtor, sayHello } from './support/grpc-greeter.js';
import { spawnGreeter } from './support/grpc-children.js';
import { percentile, type CallRecord } from './support/grpc-load.js';

describe('GrpcServerGuard shedding', () => {
  it('sheds with RESOURCE_EXHAUSTED under a CPU-bound overload and keeps serving', async () => {
    const s = await spawnGreeter('none', '', 'shed', ['shed']);
    // (the child prints its shedder's stats every 500 ms: shown when an assertion fails)
    after(async () => {
      s.child.kill('SIGKILL');
      await s.exited;
    });
    const client = new GreeterClientCtor(s.address, credentials.createInsecure());
    after(() => client.close());
    const spinMs = 10;
    const capacity = 1000 / spinMs; // calls per second one event loop can serve
    const records: CallRecord[] = [];
    const calls: Promise<void>[] = [];
    // open loop: calls go out at `rate` whatever the answers, for `ms` (bounded: rate × ms calls)
    const drive = (rate: number, ms: number, phase: string) =>
      new Promise<void>((resolve) => {
        const t = performance.now();
        const total = Math.floor((rate * ms) / 1000);
        let sent = 0;
        const timer = setInterval(() => {
          const due = Math.min(total, Math.floor(((performance.now() - t) / 1000) * rate));
          for (; sent < due; sent++) {
            const at = performance.now();
            calls.push(
              sayHello(client, { name: phase, spinMs }, { deadline: Date.now() + 15_000 }).then(
                () => void records.push({ at, ms: performance.now() - at, server: phase }),
                (e: ServiceError) => void records.push({ at, ms: performance.now() - at, code: e.code, details: e.details, server: undefined }),
              ),
            );
          }
          if (sent >= total) {
            clearInterval(timer);
            resolve();
          }
        }, 10);
      });
    const t0 = performance.now();
    await drive(capacity / 2, 1_500, 'warm'); // the shedder learns the service's normal latency and throughput
    const overloadAt = performance.now();
    const durationMs = 3_000;
    const rate = 3 * capacity;
    await drive(rate, durationMs, 'overload');
    await Promise.all(calls);
    const elapsedS = (performance.now() - t0) / 1000;
    const ok = records.filter((r) => r.server !== undefined && r.at >= overloadAt);
    const shed = records.filter((r) => r.code === status.RESOURCE_EXHAUSTED);
    const other = records.filter((r) => r.server === undefined && r.code !== status.RESOURCE_EXHAUSTED);
    const okP50 = percentile(
      ok.map((r) => r.ms),
      50,
    );
    const shedP50 = percentile(
      shed.map((r) => r.ms),
      50,
    );
    console.log(
      `overload: ${records.length} calls at ${rate}/s; ${ok.length} served (p50 ${okP50.toFixed(0)} ms), ${shed.length} shed (p50 ${shedP50.toFixed(0)} ms), ${other.length} other, ${elapsedS.toFixed(1)} s`,
    );
    assert.equal(other.length, 0, `unexpected failures: ${JSON.stringify(other.slice(0, 3))} ${s.output().slice(-1500)}`);
    assert.ok(shed.length > 0, `some calls were shed: ${s.output().split('\n').slice(-3).join('\n')}`);
    assert.match(shed[0]!.details!, /^ERR_OVERLOADED/);
    assert.equal(other.length, 0, `unexpected failures: ${JSON.stringify(other.slice(0, 3))} ${s.output().slice(-2000)}`);
    // within its capacity: it kept completing calls (at least a third of what one loop can do, on a shared machine)
    assert.ok(ok.length >= ((capacity / 3) * durationMs) / 1000, `served ${ok.length}`);
    assert.ok(shedP50 < okP50, `refusals (p50 ${shedP50} ms) are quicker than served calls (p50 ${okP50} ms)`);
  });
});
