/**
 * RedisRescue runs a Redis limiter's decisions and switches them to an in-process limiter while Redis
 * is down or slow (go-zero `tokenlimit`'s rescue, made strict):
 *
 * - a decision that errors, answers an unexpected shape, or gets no answer within `timeoutMs`
 *   switches to rescue; that call and every call still waiting on Redis are answered from the
 *   in-process limiter at once;
 * - in rescue, no call touches Redis: decisions are synchronous local answers;
 * - a probe PINGs Redis every `probeIntervalMs` (one PING in flight at most, timer unref'd) and the
 *   first PONG switches back to Redis (with a Cluster client: a PING to every master);
 * - one process warning per outage, a `modeChange` event per switch, counters in `stats()`.
 *
 * Deadlines cost one timer per limiter, not one per call: pending calls sit in a FIFO and a single
 * timer is armed for the oldest one's deadline (Redis answers a connection's calls in order). Every
 * timer is set through the injected clock.
 */
import type { Redis } from 'ioredis';
import type { Clock, TimerHandle } from '../core/clock.js';
import { limitModeChannel } from '../core/diagnostics.js';
import { Emitter, type Disposer } from '../core/events.js';
import { InvalidResponseError, TimeoutError } from '../core/errors.js';
import type { LimiterMode, ModeChange, RedisClient } from './types.js';

/** A decision waiting on Redis. A class, not a closure per call: cheaper to make and to keep. */
class Pending {
  done = false;
  constructor(
    readonly deadline: number,
    readonly epoch: number,
    /** How many decisions this call carries (a batch carries several). */
    readonly count: number,
    /** Answers the call's callers from the in-process limiter. */
    readonly local: () => void,
  ) {}

  /** rescue answers the decision from the in-process limiter. */
  rescue(): void {
    this.done = true;
    this.local();
  }
}

/** isNoScript tells whether `err` is Redis's NOSCRIPT (the node does not have the script cached). */
function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

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
  /** Bumped at every switch: a late failure of a call sent before the switch does not count again. */
  private epoch = 0;
  private readonly queue: Pending[] = [];
  private head = 0;
  private timer: TimerHandle | undefined;
  private probe: TimerHandle | undefined;
  private probing = false;
  private probeSeq = 0;
  private corked = false;
  /** A warning was emitted for the current outage (or Redis was reached since the start). */
  private warned = false;
  private closed = false;

  constructor(
    private readonly owner: string,
    private readonly redis: RedisClient,
    private readonly timeoutMs: number,
    private readonly probeIntervalMs: number,
    private readonly clock: Clock,
    private readonly lua: readonly string[],
  ) {
    // A (re)connect is the earliest sign Redis is back: load the script, so that the next decision
    // does not pay a NOSCRIPT round trip, and probe at once rather than at the next tick.
    redis.on('ready', this.onReady);
    if (redis.status === 'ready') {
      this.onReady();
    } else {
      // Not connected yet: decide in process until Redis answers, rather than make the first callers
      // wait for a connection. This is a start, not an outage: no warning unless the probe fails.
      this.mode = 'rescue';
      this.cause = new Error('not connected to Redis yet');
      this.rescueSince = clock.now();
      this.startProbe();
    }
  }

  /** idle is true while no call waits on Redis (a lone caller may then be sent at once). */
  get idle(): boolean {
    return this.head === this.queue.length;
  }

  private readonly onReady = (): void => {
    // A Cluster runs a script on the master of its key's slot: load it on every master (a master that
    // comes later, after a failover, answers NOSCRIPT once and gets it by EVAL; see redis-scripts.ts).
    for (const node of nodesOf(this.redis)) for (const lua of this.lua) node.script('LOAD', lua).catch(() => {});
    if (this.mode === 'rescue') this.ping();
  };

  /**
   * run asks Redis (`send`), turns the reply into an answer (`parse`: undefined for a bad shape), and
   * answers from the rescue limiter (`local`) in rescue mode or when Redis fails. `count` is how many
   * decisions the call carries, for the stats. `resend` (EVAL) is tried once when `send` (EVALSHA)
   * answers NOSCRIPT.
   */
  run<R>(send: () => Promise<unknown>, parse: (reply: unknown) => R | undefined, local: () => R, count = 1, resend?: () => Promise<unknown>): Promise<R> {
    if (this.mode === 'rescue') {
      this.rescueDecisions += count;
      return Promise.resolve(local());
    }
    return new Promise<R>((resolve) => {
      this.start(
        send,
        (reply) => {
          const value = parse(reply);
          if (value === undefined) return false;
          resolve(value);
          return true;
        },
        () => resolve(local()),
        count,
        resend,
      );
    });
  }

  /**
   * start is `run` without a promise of its own: `answer` answers the callers from a reply (false for a
   * bad shape), `local` answers them in process (at once in rescue mode, or when Redis fails).
   */
  start(send: () => Promise<unknown>, answer: (reply: unknown) => boolean, local: () => void, count = 1, resend?: () => Promise<unknown>): void {
    if (this.mode === 'rescue') {
      this.rescueDecisions += count;
      local();
      return;
    }
    const entry = new Pending(this.clock.now() + this.timeoutMs, this.epoch, count, local);
    if (this.queue.length > this.head) this.batch();
    this.queue.push(entry);
    if (this.timer === undefined) this.arm(entry.deadline);
    const onReply = (reply: unknown): void => {
      if (entry.done) return; // answered from rescue already
      if (!answer(reply)) {
        this.fail(new InvalidResponseError(`${this.owner}: unexpected reply from the limit script: ${preview(reply)}`), entry.epoch);
        return;
      }
      entry.done = true;
      this.redisDecisions += count;
      this.compact();
    };
    const onError = (err: unknown): void => {
      if (resend !== undefined && isNoScript(err) && !entry.done) {
        let again: Promise<unknown>;
        try {
          again = resend();
        } catch (e) {
          this.fail(e, entry.epoch);
          return;
        }
        again.then(onReply, (e: unknown) => this.fail(e, entry.epoch));
        return;
      }
      this.fail(err, entry.epoch);
    };
    let sent: Promise<unknown>;
    try {
      sent = send();
    } catch (err) {
      this.fail(err, entry.epoch);
      return;
    }
    sent.then(onReply, onError);
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
    this.rescueAll();
  }

  private fail(err: unknown, epoch: number): void {
    this.failures++;
    if (epoch !== this.epoch || this.mode === 'rescue') return;
    this.mode = 'rescue';
    this.epoch++;
    this.outages++;
    this.cause = err;
    this.rescueSince = this.clock.now();
    process.emitWarning(
      `bulwark: ${this.owner}: Redis failed (${describe(err)}); deciding in process until it answers again`,
      { code: 'BULWARK_LIMIT_RESCUE' },
    );
    if (limitModeChannel.hasSubscribers) limitModeChannel.publish({ limiter: this.owner, mode: 'rescue', cause: err });
    this.rescueAll();
    this.warned = true;
    this.changes.emit({ mode: 'rescue', cause: err });
    this.startProbe();
  }

  private startProbe(): void {
    if (this.closed || this.probe !== undefined) return;
    this.probe = this.clock.setInterval(() => this.ping(), this.probeIntervalMs);
    this.probe.unref();
  }

  private ping(): void {
    if (this.probing || this.mode !== 'rescue') return;
    this.probing = true;
    const seq = ++this.probeSeq;
    // A PING to a node that went away may wait in a client's offline queue: give up on it after
    // max(timeoutMs, probeIntervalMs), so that the next probe can ask again (a Cluster's new masters).
    const giveUp = this.clock.setTimeout(() => {
      if (this.probeSeq === seq) this.probing = false;
    }, Math.max(this.timeoutMs, this.probeIntervalMs));
    giveUp.unref();
    const settled = (): boolean => {
      this.clock.clearTimeout(giveUp);
      if (this.probeSeq !== seq || !this.probing) return false;
      this.probing = false;
      return true;
    };
    let replies: Promise<unknown[]>;
    try {
      replies = Promise.all(nodesOf(this.redis).map((n) => n.ping()));
    } catch (err) {
      replies = Promise.reject(err);
    }
    replies.then(
      (r) => {
        if (settled() && r.length > 0 && r.every((x) => x === 'PONG')) this.recover();
      },
      (err: unknown) => {
        if (!settled()) return;
        if (!this.warned) {
          // Redis was never reached since the start: say so once.
          this.warned = true;
          this.cause = err;
          process.emitWarning(`bulwark: ${this.owner}: cannot reach Redis (${describe(err)}); deciding in process until it answers`, {
            code: 'BULWARK_LIMIT_RESCUE',
          });
        }
      },
    );
  }

  private recover(): void {
    if (this.mode !== 'rescue' || this.closed) return;
    this.mode = 'redis';
    this.warned = true;
    this.epoch++;
    this.rescueSince = undefined;
    this.clock.clearTimeout(this.probe);
    this.probe = undefined;
    if (limitModeChannel.hasSubscribers) limitModeChannel.publish({ limiter: this.owner, mode: 'redis', cause: undefined });
    this.changes.emit({ mode: 'redis', cause: undefined });
  }

  private rescueAll(): void {
    const q = this.queue;
    for (let i = this.head; i < q.length; i++) {
      if (!q[i]!.done) {
        this.rescueDecisions += q[i]!.count;
        q[i]!.rescue();
      }
    }
    q.length = 0;
    this.head = 0;
  }

  private compact(): void {
    const q = this.queue;
    while (this.head < q.length && q[this.head]!.done) this.head++;
    if (this.head === q.length) {
      q.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > q.length) {
      q.splice(0, this.head);
      this.head = 0;
    }
  }

  private arm(deadline: number): void {
    this.timer = this.clock.setTimeout(() => this.expire(), Math.max(1, Math.ceil(deadline - this.clock.now())));
    this.timer.unref();
  }

  /** The timer fired: fail over if the oldest pending call is past its deadline, else wait for it. */
  private expire(): void {
    this.timer = undefined;
    this.compact();
    const oldest = this.queue[this.head];
    if (oldest === undefined) return;
    if (this.clock.now() >= oldest.deadline) {
      this.fail(new TimeoutError(`${this.owner}: Redis did not answer within ${this.timeoutMs} ms`), oldest.epoch);
      return;
    }
    this.arm(oldest.deadline);
  }
}

/** nodesOf answers the connections to ask: the client itself, or every master of a Cluster. */
function nodesOf(redis: RedisClient): Redis[] {
  if ('nodes' in redis && typeof redis.nodes === 'function') {
    const masters = redis.nodes('master');
    return masters.length > 0 ? masters : [];
  }
  return [redis as Redis];
}

function preview(reply: unknown): string {
  try {
    return (JSON.stringify(reply) ?? String(reply)).slice(0, 120);
  } catch {
    return Object.prototype.toString.call(reply);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
