/**
 * RedisRescue runs a Redis limiter's decisions and switches them to an in-process limiter while Redis
 * is down or slow (go-zero `tokenlimit`'s rescue, made strict):
 *
 * - a decision that errors, answers an unexpected shape, or gets no answer within `timeoutMs`
 *   switches its part of the key space to rescue: that call and every call still waiting on the same
 *   Redis are answered from the in-process limiter at once. A single Redis is one part. On a Cluster
 *   the part is every slot that the failed call's master owns in the client's slot map: while one
 *   master fails over, the keys of the others stay on Redis;
 * - in rescue, no call for those keys touches Redis: decisions are synchronous local answers;
 * - a probe runs every `probeIntervalMs` (one at a time, timer unref'd; a tick that finds the last
 *   probe still waiting sends the next one as soon as it answers, so that a Redis further away than
 *   one interval is not probed only every other tick): a PING to Redis, or on a
 *   Cluster a PING to each master that owns rescued slots in the client's slot map now (while the map
 *   still names a dead master, there is nothing to ask: the probe fails and asks the client to refresh
 *   its map). A part comes back after RECOVER_PROBES successful probes in a row of the same master —
 *   hysteresis, so that a node that answers once in the middle of a failover does not pull decisions
 *   back only for them to time out again; an outage that starts soon after a return doubles that
 *   count for the next return (see RELAPSE_MS). At the start, before Redis was ever reached, the first
 *   PONG is enough: there was no outage to flap back into — and that first connect is not a return,
 *   so an outage soon after it is not a relapse;
 * - a connection that leaves STUCK_PROBES probes in a row without any answer is replaced: its socket is
 *   destroyed and the client connects again (a single Redis through its retryStrategy; a Cluster drops
 *   the node and asks for a new slot map). Across a partition, packets are dropped, not refused: the
 *   socket sees no error, and once the partition heals TCP resends only at its next retransmission,
 *   which backs off exponentially (200 ms, 400 ms, … on loopback: 1.9 s after a 5 s partition,
 *   measured) — a fresh connection is answered at once. test/limit-partition.test.ts;
 * - `mode` is 'rescue' while any part is: one process warning per outage, one `modeChange` event per
 *   switch (out, and back once every part is back), counters in `stats()`;
 * - each time parts come back, `onBack` is called: the limiter then charges what its rescue admitted
 *   for their keys to Redis (see RedisLimiterBase.chargeBack), in the background.
 *
 * Deadlines cost one timer per limiter, not one per call: pending calls sit in a FIFO (all have the
 * same timeout, so the oldest is due first), a list linked through the calls themselves, and a single
 * timer is armed for the oldest one's deadline. Every timer is set through the injected clock.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Clock, TimerHandle } from '../core/clock.js';
import { GRACE_MS, LATE_MS } from '../core/deadline-timer.js';
import { limitModeChannel } from '../core/diagnostics.js';
import { Emitter, type Disposer } from '../core/events.js';
import { InvalidResponseError, TimeoutError } from '../core/errors.js';
import { isCluster, keySlot, masterNamed, nodesOf, ownerOf, SLOTS } from './redis-cluster.js';
import { describe, FnCall, isNoScript, preview, type Pending } from './redis-call.js';
import type { LimiterMode, ModeChange, RedisClient } from './types.js';

/**
 * RECOVER_PROBES is how many successful probes in a row bring a part back from rescue: one more probe
 * interval in rescue after the first PONG, against flapping while a Cluster fails over (go-zero's
 * rescue comes back at the first PONG).
 */
const RECOVER_PROBES = 2;
/**
 * An outage that starts within RELAPSE_MS (or 10 probe intervals, if longer) of the last return from
 * an outage (not of the first connect) is a relapse: the next return then needs twice as many probes
 * in a row, up to 2^MAX_RELAPSES × RECOVER_PROBES (a Redis that answers PING but not scripts in time —
 * overloaded — is left alone longer each time).
 */
const RELAPSE_MS = 1_000;
const MAX_RELAPSES = 5;
/**
 * STUCK_PROBES is how many probes in a row may go unanswered (no reply and no error within
 * max(timeoutMs, probeIntervalMs)) before the connection is replaced: a few, so that one slow PING
 * does not cost a reconnect, while a connection in retransmission backoff is not waited out.
 */
const STUCK_PROBES = 3;
// The deadline timer forgives the process's own stalls as core DeadlineTimer does (LATE_MS, GRACE_MS:
// the calls a late timer finds overdue fail one timer turn later, after an I/O poll), but over the
// queue of calls waiting on Redis, with one timer for all of them: without that the process would
// blame Redis, and switch to rescue, for its own stall.

/** RedisRescue is the Redis ↔ rescue switch one Redis limiter uses (internal). */
export class RedisRescue {
  mode: LimiterMode = 'redis';
  redisDecisions = 0;
  rescueDecisions = 0;
  failures = 0;
  outages = 0;
  cause: unknown = undefined;
  rescueSince: number | undefined = undefined;
  readonly changes = new Emitter<ModeChange>();
  /** Called (synchronously) each time parts come back from rescue: decisions for their keys are on Redis again. */
  onBack: (() => void) | undefined = undefined;
  /** The client when it is a Cluster: slots and masters come from its slot map. */
  private readonly cluster: Cluster | undefined;
  /** 1 for each part in rescue: each slot of a Cluster, or the one part of a single Redis. */
  private readonly down: Uint8Array;
  private downCount = 0;
  /** Successful probes in a row, per master (`host:port`; '' for a single Redis). */
  private readonly streaks = new Map<string, number>();
  /** Probes in a row that got no answer at all, per master (see STUCK_PROBES). */
  private readonly silent = new Map<string, number>();
  /** The oldest call waiting on Redis, and the newest (undefined: none). */
  private first: Pending | undefined = undefined;
  private last: Pending | undefined = undefined;
  private timer: TimerHandle | undefined;
  /** When a timer turn last found calls past their deadline: those still waiting fail at the next turn (GRACE_MS). */
  private overdueAt: number | undefined = undefined;
  private probe: TimerHandle | undefined;
  private probing = false;
  /** A probe tick came while a probe was in flight: the next one goes as soon as that one answers. */
  private probeDue = false;
  private probeSeq = 0;
  private corked = false;
  /** A warning was emitted for the current outage (or Redis was reached since the start). */
  private warned = false;
  /** Redis was reached since the start: from then on, parts come back after RECOVER_PROBES probes. */
  private reached = false;
  /** Outages in a row that started soon after a return (see RELAPSE_MS), and when decisions last returned. */
  private relapses = 0;
  private backAt = -Infinity;
  /** In rescue since the start, not since an outage: the limiter has not been on Redis yet. */
  private connecting = false;
  private closed = false;

  constructor(
    private readonly owner: string,
    private readonly redis: RedisClient,
    private readonly timeoutMs: number,
    private readonly probeIntervalMs: number,
    private readonly clock: Clock,
    private readonly lua: readonly string[],
  ) {
    this.cluster = isCluster(redis) ? redis : undefined;
    this.down = new Uint8Array(this.cluster === undefined ? 1 : SLOTS);
    // A (re)connect is the earliest sign Redis is back: load the script, so that the next decision
    // does not pay a NOSCRIPT round trip, and probe at once rather than at the next tick.
    redis.on('ready', this.onReady);
    if (redis.status === 'ready') {
      this.reached = true;
      this.onReady();
    } else {
      // Not connected yet: decide in process until Redis answers, rather than make the first callers
      // wait for a connection. This is a start, not an outage: no warning unless the probe fails.
      this.mode = 'rescue';
      this.connecting = true;
      this.down.fill(1);
      this.downCount = this.down.length;
      this.cause = new Error('not connected to Redis yet');
      this.rescueSince = clock.now();
      this.startProbe();
    }
  }

  /** idle is true while no call waits on Redis (a lone caller may then be sent at once). */
  get idle(): boolean {
    return this.first === undefined;
  }

  /** rescues tells whether decisions for the Redis key `key` are made in process now. */
  rescues(key: string): boolean {
    return this.downCount > 0 && (this.cluster === undefined || this.down[keySlot(key)] === 1);
  }

  /** rescuedParts is how many parts are in rescue: slots of a Cluster, or 0 / 1 for a single Redis. */
  get rescuedParts(): number {
    return this.downCount;
  }

  private readonly onReady = (): void => {
    // A Cluster runs a script on the master of its key's slot: load it on every master (a master that
    // comes later, after a failover, answers NOSCRIPT once and gets it by EVAL; see redis-scripts.ts).
    for (const node of nodesOf(this.redis)) for (const lua of this.lua) node.script('LOAD', lua).catch(() => {});
    if (this.downCount > 0) this.ping();
  };

  /**
   * run asks Redis (`send`) about the Redis key `key`, turns the reply into an answer (`parse`:
   * undefined for a bad shape), and answers from the rescue limiter (`local`) while the key's part is
   * in rescue or when Redis fails. `count` is how many decisions the call carries, for the stats.
   * `resend` (EVAL) is tried once when `send` (EVALSHA) answers NOSCRIPT.
   */
  run<R>(
    key: string,
    send: () => Promise<unknown>,
    parse: (reply: unknown) => R | undefined,
    local: () => R,
    count = 1,
    resend?: () => Promise<unknown>,
  ): Promise<R> {
    if (this.downCount > 0 && this.rescues(key)) {
      this.rescueDecisions += count;
      return Promise.resolve(local());
    }
    return new Promise<R>((resolve) => {
      this.startWith(
        key,
        send,
        (reply) => {
          const value = parse(reply);
          if (value === undefined) return -1;
          resolve(value);
          return count;
        },
        () => resolve(local()),
        count,
        resend,
      );
    });
  }

  /**
   * startWith is `run` without a promise of its own: `answer` answers the callers from a reply and says
   * how many decisions it made on Redis (-1 for a bad shape), `local` answers them in process (at once
   * while `key`'s part is in rescue, or when Redis fails). `key` names the node the call goes to: the
   * master of its slot on a Cluster.
   */
  startWith(
    key: string,
    send: () => Promise<unknown>,
    answer: (reply: unknown) => number,
    local: () => void,
    count = 1,
    resend?: () => Promise<unknown>,
  ): void {
    this.start(key, new FnCall(send, answer, local, resend), count);
  }

  /**
   * start runs `call` (carrying `count` decisions) on the node of the Redis key `key`, as startWith does:
   * the call is its own node in the FIFO of pending calls.
   */
  start(key: string, call: Pending, count = 1): void {
    const cluster = this.cluster;
    const slot = cluster === undefined ? 0 : keySlot(key);
    if (this.downCount > 0 && this.down[slot] === 1) {
      this.rescueDecisions += count;
      call.local();
      return;
    }
    call.deadline = this.clock.now() + this.timeoutMs;
    call.slot = slot;
    if (cluster !== undefined) call.node = ownerOf(cluster, slot);
    call.count = count;
    const last = this.last;
    if (last === undefined) {
      this.first = call;
    } else {
      this.batch();
      last.next = call;
    }
    this.last = call;
    if (this.timer === undefined) this.arm(call.deadline);
    let sent: Promise<unknown>;
    try {
      sent = call.send();
    } catch (err) {
      this.fail(call, err);
      return;
    }
    sent.then(
      (reply) => this.onReply(call, reply),
      (err: unknown) => this.onError(call, err),
    );
  }

  private onReply(entry: Pending, reply: unknown): void {
    if (entry.done) return; // answered from rescue already
    const n = entry.answer(reply);
    if (n < 0) {
      this.fail(entry, new InvalidResponseError(`${this.owner}: unexpected reply from the limit script: ${preview(reply)}`));
      return;
    }
    entry.done = true;
    this.redisDecisions += n;
    if (entry === this.first) this.compact();
  }

  private onError(entry: Pending, err: unknown): void {
    if (entry.resend !== undefined && isNoScript(err) && !entry.done) {
      let again: Promise<unknown>;
      try {
        again = entry.resend();
      } catch (e) {
        this.fail(entry, e);
        return;
      }
      again.then(
        (reply) => this.onReply(entry, reply),
        (e: unknown) => this.fail(entry, e),
      );
      return;
    }
    this.fail(entry, err);
  }

  /**
   * batch makes the decisions sent in this tick, while others are in flight, share one socket write:
   * the connection's socket is corked now and uncorked on the next tick (one writev for all of them,
   * as ioredis's auto-pipelining would do, without its cost for a lone caller, who is never delayed).
   */
  private batch(): void {
    if (this.corked) return;
    const client = this.redis as { stream?: { cork?: () => void; uncork?: () => void }; options?: { enableAutoPipelining?: boolean } };
    const stream = client.stream;
    if (stream === undefined || typeof stream.cork !== 'function' || client.options?.enableAutoPipelining === true) return;
    this.corked = true;
    stream.cork();
    process.nextTick(() => {
      this.corked = false;
      stream.uncork!();
    });
  }

  /** onModeChange subscribes to switches between Redis and rescue. */
  onModeChange(listener: (event: ModeChange) => void): Disposer {
    return this.changes.on(listener);
  }

  /** close stops the probe and the deadline timer; pending calls are answered from rescue. */
  close(): void {
    this.closed = true;
    this.redis.off('ready', this.onReady);
    this.clock.clearTimeout(this.probe);
    this.clock.clearTimeout(this.timer);
    this.probe = this.timer = undefined;
    this.rescueWaiting(undefined);
  }

  /** fail answers a failed call in process, and sends its part to rescue unless it is there already. */
  private fail(entry: Pending, err: unknown): void {
    this.failures++;
    if (entry.done || this.closed) return;
    if (this.down[entry.slot] !== 1) this.markDown(entry, err);
    if (!entry.done) {
      this.rescueDecisions += entry.count;
      entry.rescue();
    }
    this.compact();
  }

  /** markDown sends the failed call's part to rescue (on a Cluster, every slot of its master) and answers the calls waiting on it. */
  private markDown(entry: Pending, err: unknown): void {
    const first = this.downCount === 0;
    const down = this.down;
    if (this.cluster === undefined) {
      down[0] = 1;
      this.downCount = 1;
    } else {
      const map = this.cluster.slots;
      const node = entry.node;
      for (let i = 0; i < SLOTS; i++) {
        if (down[i] === 0 && (i === entry.slot || (node !== '' && map[i]?.[0] === node))) {
          down[i] = 1;
          this.downCount++;
        }
      }
    }
    this.streaks.delete(entry.node);
    this.connecting = false; // a call failed: an outage, though some parts may not have been reached yet
    this.cause = err;
    this.rescueWaiting(entry.node);
    if (!first) return;
    const now = this.clock.now();
    this.relapses = now - this.backAt < Math.max(RELAPSE_MS, 10 * this.probeIntervalMs) ? Math.min(this.relapses + 1, MAX_RELAPSES) : 0;
    this.mode = 'rescue';
    this.outages++;
    this.rescueSince = now;
    process.emitWarning(`bulwark: ${this.owner}: Redis failed (${describe(err)}); deciding in process until it answers again`, {
      code: 'BULWARK_LIMIT_RESCUE',
    });
    if (limitModeChannel.hasSubscribers) limitModeChannel.publish({ limiter: this.owner, mode: 'rescue', cause: err });
    this.warned = true;
    this.changes.emit({ mode: 'rescue', cause: err });
    this.startProbe();
  }

  private startProbe(): void {
    if (this.closed || this.probe !== undefined) return;
    this.probe = this.clock.setInterval(() => this.ping(), this.probeIntervalMs);
    this.probe.unref();
  }

  /** targets answers the masters to probe: the one Redis, or each master that owns rescued slots now (undefined: not connected to it). */
  private targets(): Map<string, Redis | undefined> {
    const out = new Map<string, Redis | undefined>();
    const cluster = this.cluster;
    if (cluster === undefined) {
      out.set('', this.redis as Redis);
      return out;
    }
    const map = cluster.slots;
    for (let i = 0; i < SLOTS; i++) {
      if (this.down[i] === 1) {
        const owner = map[i]?.[0] ?? '';
        if (!out.has(owner)) out.set(owner, owner === '' ? undefined : masterNamed(cluster, owner));
      }
    }
    return out;
  }

  private ping(): void {
    if (this.downCount === 0 || this.closed) return;
    if (this.probing) {
      this.probeDue = true;
      return;
    }
    this.probing = true;
    this.probeDue = false;
    const seq = ++this.probeSeq;
    const targets = this.targets();
    /** Which targets answered (a reply or an error), in the order of `targets`. */
    const answered: boolean[] = [];
    // A PING to a node that went away may wait in a client's offline queue: give up on it after
    // max(timeoutMs, probeIntervalMs), so that the next probe can ask again (a Cluster's new masters).
    const giveUp = this.clock.setTimeout(
      () => {
        if (this.probeSeq !== seq) return;
        this.probing = false;
        this.probeDue = false; // unanswered: the next tick asks again (STUCK_PROBES counts these ticks)
        this.streaks.clear();
        let i = 0;
        for (const [owner, node] of targets) if (answered[i++] !== true && node !== undefined) this.unanswered(owner, node);
      },
      Math.max(this.timeoutMs, this.probeIntervalMs),
    );
    giveUp.unref();
    let refresh = false;
    let firstError: unknown;
    const asks: Promise<boolean>[] = [];
    for (const [owner, node] of targets) {
      const at = asks.length;
      if (node === undefined) {
        refresh = true;
        answered[at] = true;
        asks.push(Promise.resolve(false));
        continue;
      }
      let pong: Promise<unknown>;
      try {
        pong = node.ping();
      } catch (err) {
        pong = Promise.reject(err);
      }
      asks.push(
        pong.then(
          (r) => {
            answered[at] = true;
            this.silent.delete(owner);
            return r === 'PONG';
          },
          (err: unknown) => {
            answered[at] = true;
            this.silent.delete(owner);
            firstError ??= err;
            return false;
          },
        ),
      );
    }
    // The slot map still names a master the client has no connection to (a dead one): ask for the new map.
    if (refresh && this.cluster !== undefined) this.cluster.refreshSlotsCache(() => {});
    void Promise.all(asks).then((ok) => {
      this.clock.clearTimeout(giveUp);
      if (this.probeSeq !== seq || !this.probing) return;
      this.probing = false;
      if (this.closed) return;
      const need = this.reached ? RECOVER_PROBES << this.relapses : 1;
      const back: string[] = [];
      let i = 0;
      for (const owner of targets.keys()) {
        if (ok[i++] === true) {
          const streak = (this.streaks.get(owner) ?? 0) + 1;
          this.streaks.set(owner, streak);
          if (streak >= need) back.push(owner);
        } else {
          this.streaks.delete(owner);
        }
      }
      if (back.length > 0) this.recover(back);
      if (this.downCount > 0 && firstError !== undefined && !this.warned) {
        // Redis was never reached since the start: say so once.
        this.warned = true;
        this.cause = firstError;
        process.emitWarning(`bulwark: ${this.owner}: cannot reach Redis (${describe(firstError)}); deciding in process until it answers`, {
          code: 'BULWARK_LIMIT_RESCUE',
        });
      }
      if (this.probeDue) this.ping(); // a tick passed while this probe waited: ask again now, not a tick later
    });
  }

  /**
   * unanswered counts a probe of `owner` that got no answer; at STUCK_PROBES in a row it replaces the
   * connection: destroying the socket makes a single Redis connect again through its retryStrategy
   * (only when it has one: without, the client would stay closed) and makes a Cluster drop the node
   * (its nodes do not reconnect) and ask for a new slot map, where a failed-over master is gone.
   */
  private unanswered(owner: string, node: Redis): void {
    const n = (this.silent.get(owner) ?? 0) + 1;
    if (n < STUCK_PROBES) {
      this.silent.set(owner, n);
      return;
    }
    this.silent.delete(owner);
    const cluster = this.cluster;
    if (cluster === undefined && typeof (node.options as { retryStrategy?: unknown } | undefined)?.retryStrategy !== 'function') return;
    const stream = (node as { stream?: { destroy?: () => void } }).stream;
    if (typeof stream?.destroy === 'function') stream.destroy();
    if (cluster !== undefined) cluster.refreshSlotsCache(() => {});
  }

  /** recover brings back the rescued parts that the masters `owners` own now; decisions return to Redis once no part is left in rescue. */
  private recover(owners: string[]): void {
    const down = this.down;
    if (this.cluster === undefined) {
      down[0] = 0;
      this.downCount = 0;
    } else {
      const map = this.cluster.slots;
      for (let i = 0; i < SLOTS; i++) {
        if (down[i] === 1 && owners.includes(map[i]?.[0] ?? '')) {
          down[i] = 0;
          this.downCount--;
        }
      }
    }
    for (const o of owners) this.streaks.delete(o);
    this.reached = true;
    if (this.onBack !== undefined) {
      try {
        this.onBack();
      } catch {
        // charging back is best effort: it never stops a return to Redis
      }
    }
    if (this.downCount > 0 || this.mode !== 'rescue') return;
    this.mode = 'redis';
    this.warned = true;
    this.rescueSince = undefined;
    if (!this.connecting) this.backAt = this.clock.now(); // the first connect is no return: an outage soon after it is no relapse
    this.connecting = false;
    this.clock.clearTimeout(this.probe);
    this.probe = undefined;
    this.probeDue = false;
    if (limitModeChannel.hasSubscribers) limitModeChannel.publish({ limiter: this.owner, mode: 'redis', cause: undefined });
    this.changes.emit({ mode: 'redis', cause: undefined });
  }

  /** rescueWaiting answers in process every waiting call of a part in rescue, or sent to `node` (all calls when undefined). */
  private rescueWaiting(node: string | undefined): void {
    for (let e = this.first; e !== undefined; e = e.next) {
      if (!e.done && (node === undefined || e.node === node || this.down[e.slot] === 1)) {
        this.rescueDecisions += e.count;
        e.rescue();
      }
    }
    this.compact();
  }

  /** compact drops the answered calls at the head of the FIFO. */
  private compact(): void {
    let e = this.first;
    while (e !== undefined && e.done) e = e.next;
    this.first = e;
    if (e === undefined) this.last = undefined;
  }

  private arm(deadline: number): void {
    this.timer = this.clock.setTimeout(() => this.expire(), Math.max(1, Math.ceil(deadline - this.clock.now())));
    this.timer.unref();
  }

  /**
   * The timer fired: each pending call past its deadline fails (oldest first) — or, when the timer ran
   * late (LATE_MS), at the next turn if it still waits then, so that replies read by the poll in between
   * count. The timer is armed again for the next one.
   */
  private expire(): void {
    this.timer = undefined;
    const overdueAt = this.overdueAt;
    this.overdueAt = undefined;
    for (;;) {
      this.compact();
      const oldest = this.first;
      if (oldest === undefined || this.closed) return;
      if (overdueAt === undefined || oldest.deadline > overdueAt) {
        const now = this.clock.now();
        if (now < oldest.deadline) {
          this.arm(oldest.deadline);
          return;
        }
        if (now - oldest.deadline >= LATE_MS) {
          this.overdueAt = now;
          this.timer = this.clock.setTimeout(() => this.expire(), GRACE_MS);
          this.timer.unref();
          return;
        }
      }
      const at = oldest.node === '' ? '' : ` (master ${oldest.node})`;
      this.fail(oldest, new TimeoutError(`${this.owner}: Redis${at} did not answer within ${this.timeoutMs} ms`));
    }
  }
}
