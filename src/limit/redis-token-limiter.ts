/**
 * RedisTokenLimiter is a token bucket per client key shared by every process that uses the same Redis
 * (and prefix): `rate` tokens per second per key, up to `burst`, decided by an atomic Lua script in
 * Redis (see redis-scripts.ts). Each client key is one Redis key, `prefix{key}` (hash-tagged for
 * Cluster), which expires a second after its bucket is full again: an idle key costs nothing.
 *
 * Single-token decisions (`take(key)`, `takeDecision(key)`) made on Redis in the same tick for the same
 * key are batched: they go to Redis as ONE script call for k tokens that admits as many as the bucket
 * holds, up to k, and the first m callers in call order are allowed, the rest refused — the answers k
 * calls in a row would get at that instant (GCRA: admitting m of k is taking m tokens). A caller that
 * finds no call in flight and no batch open is sent at once (a lone caller never waits for the tick);
 * callers behind a call in flight batch. A batch is sent at the end of the tick (process.nextTick), or
 * at once when it reaches 1 024 callers. The `take()` batches of one tick's keys go as one script call
 * too: on a single Redis, all of them; on a Cluster, one call per master, holding the keys whose slots
 * that master owns in the client's slot map. `take(key, n)` for n ≠ 1 is one script call of its own. If a
 * batch's call fails, times out or answers a bad shape, each of its callers is decided by the rescue
 * limiter, one by one, in call order.
 *
 * With `lease: { tokens, maxMs }`, a process takes up to `tokens` of a key's tokens in one script call
 * and spends them locally for at most `maxMs`; unspent ones expire (they are never given back, so a
 * lease can only under-admit what it holds). Worst case over the limit, in any window: every instance
 * spends a full lease taken just before the window, so a fleet admits at most
 * `instances × lease.tokens` more than the bucket alone would (and never more than `rate × maxMs` more).
 *
 * When Redis fails or does not answer within `timeoutMs`, decisions go at once to an in-process
 * KeyedLimiter of `rate / instances` per key (see rescue.ts) and come back to Redis after two PONGs in a
 * row; on a Cluster, only the keys of the failed master go to rescue. When a key's part comes back, the
 * tokens the rescue admitted for it are charged to its bucket (see charge).
 *
 * `reconfigure({ rate, burst, lease })` changes it live (the client, prefix, timing, instances and clock are
 * fixed at construction). Redis keeps each bucket: the next script call sends the new interval and burst,
 * and the bucket's stored time is read against them (decisions in flight keep the old ones). Leases held
 * are spent until they expire; a change of `lease` drops them (their tokens lapse: under-admitting, never
 * over). The rescue limiter in use is reconfigured in place (rate / instances), keeping its tokens.
 */
import type { Cluster } from 'ioredis';
import type { Clock } from '../core/clock.js';
import { finite, liveOptions, options as optionsOf, positive, type OptionKeys } from '../core/validate.js';
import type { Reconfigurable } from '../core/reconfigurable.js';
import { KeyedLimiter } from './keyed-limiter.js';
import { redisKey } from './keys.js';
import { REDIS_COMMON_KEYS, type RedisCommonOptions } from './redis-limiter-options.js';
import { RedisLimiterBase } from './redis-limiter-base.js';
import { isCluster } from './redis-cluster.js';
import { isNoScript } from './redis-call.js';
import { isIntArray, NODE_SCRIPT, Script, TOKEN_SCRIPT } from './redis-scripts.js';
import {
  answerBatch,
  answerKeys,
  MAX_BATCH,
  multiArgs,
  nodeArgs,
  parseAllowed,
  parseDecision,
  splitReason,
  takeAll,
  takeByNode,
  Waiter,
  type Batch,
  type KeysCall,
  type WaiterContext,
} from './redis-token-batches.js';
import type { LimitDecision, SharedRateLimiter } from './types.js';

/** The keys of RedisTokenLimiterOptions, all of them: any other is refused (see `options`). */
const REDIS_TOKEN_LIMITER_KEYS = {
  prefix: true,
  rate: true,
  burst: true,
  lease: true,
  ...REDIS_COMMON_KEYS,
} as const satisfies OptionKeys<RedisTokenLimiterOptions>;
/** The keys of LeaseOptions, all of them: any other is refused (see `options`). */
const LEASE_KEYS = { tokens: true, maxMs: true } as const satisfies OptionKeys<LeaseOptions>;
/** The options a running RedisTokenLimiter cannot change: all but rate, burst and lease (see `reconfigure`). */
const REDIS_TOKEN_LIMITER_FIXED = Object.keys(REDIS_TOKEN_LIMITER_KEYS).filter((k) => k !== 'rate' && k !== 'burst' && k !== 'lease');

/** RedisTokenLimiterLiveOptions are the options `RedisTokenLimiter.reconfigure` changes and `options()` answers. */
export type RedisTokenLimiterLiveOptions = Pick<RedisTokenLimiterOptions, 'rate' | 'burst' | 'lease'>;

/** LeaseOptions turns on token leasing: up to `tokens` tokens taken per script call, spent within `maxMs`. */
export interface LeaseOptions {
  /** The most tokens one script call takes for this process (at most `burst`), an integer ≥ 1. Required. */
  tokens: number;
  /** Milliseconds a lease may be spent for; what is left then expires. Required. */
  maxMs: number;
}

/** RedisTokenLimiterOptions configures a RedisTokenLimiter. */
export interface RedisTokenLimiterOptions extends RedisCommonOptions {
  /** The prefix of the Redis keys (≤ 256 bytes, no braces): client key `k` is counted at `${prefix}{${k}}`. Required. */
  prefix: string;
  /** Tokens per second per client key for the whole fleet, fractions allowed. Required. */
  rate: number;
  /** Each bucket's size, ≥ 1. Defaults to `rate` (at least 1). */
  burst?: number;
  /** Token leasing, for keys whose rate exceeds what one round trip per decision can carry. Defaults to none. */
  lease?: LeaseOptions;
  /** The time source for deadlines, probes, leases and the rescue limiter. Defaults to the monotonic system clock. */
  clock?: Clock;
}

/** Defaults for RedisTokenLimiterOptions (and see redisCommonDefaults). */
export const redisTokenLimiterDefaults = Object.freeze({});

const script = new Script(TOKEN_SCRIPT);
const sha = script.sha;
/** EVALSHA's key count, sent as a string (ioredis would convert a number on every call). */
const ONE_KEY = '1';
const nodeScript = new Script(NODE_SCRIPT);
/** What a node batch's call answers when the node could not take it whole (see splitError): its keys are sent one by one. */
const SPLIT = Symbol('split');
const ONE = '1';
/** The script's 4th argument for a batch, for a reply of 1 or 0 alone (`take(key, n)`), and for a lease. */
const BATCH = '1';
const ANSWER_ONLY = 'a';
const LEASE = 'l';

/** A key's lease: tokens left to spend until `until` (clock time), or callers waiting for one in flight. */
class Lease {
  left = 0;
  until = -Infinity;
  /** Callers waiting for the lease call in flight (undefined: none in flight). */
  waiting: Waiter[] | undefined = undefined;
  resetMs = 0;
}

/** RedisTokenLimiter is a token bucket per key in Redis with an in-process rescue. */
export class RedisTokenLimiter extends RedisLimiterBase<KeyedLimiter> implements SharedRateLimiter, Reconfigurable<RedisTokenLimiterLiveOptions> {
  /** rate is tokens per second per key. */
  readonly rate: number;
  /** burst is each bucket's size. */
  readonly burst: number;
  /** lease is the leasing configuration, or undefined without leasing. */
  readonly lease: Readonly<LeaseOptions> | undefined;
  private interval: string;
  private burstArg: string;
  private leaseArg: string;
  /** What this limiter's single-token callers share (see Waiter). */
  private ctx: WaiterContext;
  /** The last client key asked about and its Redis key: a caller that asks about the same key again builds and checks nothing. */
  private lastKey = '';
  private lastK: string;
  /** This tick's batch, when it holds one key only (the common case: no Map). */
  private oneKey: string | undefined;
  private oneClient = '';
  private oneBatch: Waiter[] | undefined;
  /** This tick's batches of other keys. */
  private readonly batches = new Map<string, Batch>();
  private scheduled = false;
  private readonly leases = new Map<string, Lease>();
  private readonly flushTick = (): void => {
    this.scheduled = false;
    const w = this.oneBatch;
    if (w !== undefined) {
      const k = this.oneKey!;
      this.oneBatch = this.oneKey = undefined;
      // A lone caller was sent at once (see one()): with other keys this tick, this key's batch joins their one call.
      if (this.batches.size > 0 && !w.some((c) => c.decide)) this.batches.set(k, { client: this.oneClient, waiters: w });
      else this.flush(k, w);
    }
    if (this.batches.size > 0) {
      if (this.cluster === undefined) this.sendKeys(takeAll(this.batches));
      else if (this.nodeBatches) for (const call of takeByNode(this.cluster, this.batches)) this.sendKeys(call);
      for (const [k, b] of this.batches) this.flush(k, b.waiters);
      this.batches.clear();
    }
  };
  /** The client when it is a Cluster: a tick's keys are then grouped by the master that owns them. */
  private readonly cluster: Cluster | undefined;
  /** A tick's keys of one Cluster master go in one call (off after a master could not run the node script, e.g. Redis < 7). */
  private nodeBatches = true;

  constructor(options: RedisTokenLimiterOptions) {
    const o = optionsOf('RedisTokenLimiter', options, REDIS_TOKEN_LIMITER_KEYS);
    const { rate, burst, lease } = tokenSettings(o);
    super('RedisTokenLimiter', [script.lua, nodeScript.lua], o);
    this.rate = rate;
    this.burst = burst;
    this.lease = lease;
    this.interval = String(1000 / rate);
    this.burstArg = String(burst);
    this.leaseArg = String(lease?.tokens ?? 1);
    this.cluster = isCluster(this.client) ? this.client : undefined;
    this.lastK = redisKey('RedisTokenLimiter', this.prefix, '');
    this.ctx = this.makeCtx();
  }

  /** options answers the options this limiter runs now: those `reconfigure` may change (`lease: undefined` without leasing). */
  options(): RedisTokenLimiterLiveOptions {
    return { rate: this.rate, burst: this.burst, lease: this.lease === undefined ? undefined : { ...this.lease } };
  }

  /**
   * reconfigure lays `partial` over `options()` and applies it, validated as the constructor validates it
   * (the same errors; every other option refused: fixed at construction), all or, when it throws, none.
   * What it keeps is in the file comment.
   */
  reconfigure(partial: Partial<RedisTokenLimiterLiveOptions>): void {
    const p = liveOptions('RedisTokenLimiter', partial as RedisTokenLimiterOptions, REDIS_TOKEN_LIMITER_KEYS, REDIS_TOKEN_LIMITER_FIXED);
    const s = tokenSettings({ ...this.options(), ...p });
    const leaseChanged = s.lease?.tokens !== this.lease?.tokens || s.lease?.maxMs !== this.lease?.maxMs;
    const self = this as { -readonly [K in 'rate' | 'burst' | 'lease']: RedisTokenLimiter[K] };
    self.rate = s.rate;
    self.burst = s.burst;
    self.lease = s.lease;
    this.interval = String(1000 / s.rate);
    this.burstArg = String(s.burst);
    this.leaseArg = String(s.lease?.tokens ?? 1);
    this.ctx = this.makeCtx();
    if (leaseChanged) this.leases.clear();
    const rescue = this.rescueInUse();
    rescue?.limiter.reconfigure({ rate: s.rate / rescue.instances, burst: Math.max(1, s.burst / rescue.instances) });
  }

  /** makeCtx builds what single-token callers share, for the interval and burst the limiter runs now. */
  private makeCtx(): WaiterContext {
    const burst = this.burst;
    const client = this.client;
    const interval = this.interval;
    const burstArg = this.burstArg;
    return {
      burst,
      tally: this.tally,
      // A lone take() sends the interval and burst only: one token, answer 1 or 0 (see TOKEN_SCRIPT); its
      // EVALSHA is the client's own call, as a bare one would be.
      sendOne: (k, decide, again) =>
        again
          ? decide
            ? script.eval(client, k, interval, burstArg, ONE)
            : script.eval(client, k, interval, burstArg)
          : decide
            ? script.evalsha(client, k, interval, burstArg, ONE)
            : client.evalsha(sha, ONE_KEY, k, interval, burstArg),
      local: (key, decide, k) => {
        const answer = decide ? this.rescue().decide(key, 1) : this.rescue().allow(key, 1);
        if (decide ? (answer as LimitDecision).allowed : answer === true) this.owe(k, 1);
        return answer;
      },
    };
  }

  /**
   * take takes `n` tokens (default 1) from `key`'s shared bucket when it holds them. n > burst answers
   * false without asking Redis; n < 0 rejects with RangeError, a bad key with TypeError, a call after
   * close() with ClosedError. Never rejects for a Redis failure.
   */
  take(key: string, n = 1): Promise<boolean> {
    // A single token's answer is counted where it is made (see Waiter): no promise in between.
    if (n === 1) return this.one(key, false) as Promise<boolean>;
    return this.answered(this.decideTake(key, n), key, n);
  }

  private decideTake(key: string, n: number): Promise<boolean> {
    if (this.closed) return Promise.reject(this.closedError('take'));
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.take: n must be a number ≥ 0, got ${String(n)}`));
    let k: string;
    try {
      k = redisKey('RedisTokenLimiter', this.prefix, key);
    } catch (err) {
      return Promise.reject(err);
    }
    if (n > this.burst) return Promise.resolve(false);
    const count = String(n);
    return this.switch.run(
      k,
      () => script.evalsha(this.client, k, this.interval, this.burstArg, count, ANSWER_ONLY),
      parseAllowed,
      () => {
        const ok = this.rescue().allow(key, n);
        if (ok) this.owe(k, n);
        return ok;
      },
      1,
      () => script.eval(this.client, k, this.interval, this.burstArg, count, ANSWER_ONLY),
    );
  }

  /** takeDecision is `take` with the numbers behind the answer. */
  takeDecision(key: string, n = 1): Promise<LimitDecision> {
    if (n === 1) return this.one(key, true) as Promise<LimitDecision>;
    return this.answered(this.decideTakeDecision(key, n), key, n);
  }

  private decideTakeDecision(key: string, n: number): Promise<LimitDecision> {
    if (this.closed) return Promise.reject(this.closedError('takeDecision'));
    if (!(n >= 0)) return Promise.reject(new RangeError(`RedisTokenLimiter.takeDecision: n must be a number ≥ 0, got ${String(n)}`));
    let k: string;
    try {
      k = redisKey('RedisTokenLimiter', this.prefix, key);
    } catch (err) {
      return Promise.reject(err);
    }
    if (n > this.burst) return Promise.resolve({ allowed: false, limit: this.burst, remaining: 0, retryAfterMs: Infinity, resetMs: 0 });
    const burst = this.burst;
    const count = String(n);
    return this.switch.run(
      k,
      () => script.evalsha(this.client, k, this.interval, this.burstArg, count),
      (r) => parseDecision(r, burst),
      () => {
        const d = this.rescue().decide(key, n);
        if (d.allowed) this.owe(k, n);
        return d;
      },
      1,
      () => script.eval(this.client, k, this.interval, this.burstArg, count),
    );
  }

  /**
   * A single-token decision: from rescue, from the key's lease, or in this tick's batch for the key.
   * Every answer is counted as it is made (Waiter.resolve, or tally here).
   */
  private one(key: string, decide: boolean): Promise<boolean | LimitDecision> {
    if (this.closed) return Promise.reject(this.closedError(decide ? 'takeDecision' : 'take'));
    let k: string;
    if (key === this.lastKey) {
      k = this.lastK;
    } else {
      try {
        k = redisKey('RedisTokenLimiter', this.prefix, key);
      } catch (err) {
        return Promise.reject(err);
      }
      this.lastKey = key;
      this.lastK = k;
    }
    if (this.switch.rescues(k)) {
      this.switch.rescueDecisions++;
      const answer = this.ctx.local(key, decide, k);
      this.tally(answer, key, 1);
      return Promise.resolve(answer);
    }
    if (this.lease !== undefined) return this.fromLease(key, k, decide);
    if (!this.scheduled && this.switch.idle) {
      // Nothing in flight and no batch this tick: a lone caller is sent at once rather than at the end
      // of the tick (callers that follow in this tick batch behind it, as they would behind any call in flight).
      const c = new Waiter(this.ctx, k, key, decide);
      this.switch.start(k, c, 1);
      return c.promise;
    }
    let w: Waiter[] | undefined;
    if (this.oneKey === k) {
      w = this.oneBatch!;
    } else if (this.oneKey === undefined) {
      this.oneKey = k;
      this.oneClient = key;
      w = this.oneBatch = [];
    } else {
      let b = this.batches.get(k);
      if (b === undefined) this.batches.set(k, (b = { client: key, waiters: [] }));
      w = b.waiters;
    }
    if (!this.scheduled) {
      this.scheduled = true;
      process.nextTick(this.flushTick);
    }
    const c = new Waiter(this.ctx, k, key, decide);
    w.push(c);
    if (w.length >= MAX_BATCH) {
      if (w === this.oneBatch) this.oneBatch = this.oneKey = undefined;
      else this.batches.delete(k);
      this.flush(k, w);
    }
    return c.promise;
  }

  /**
   * sendKeys sends several keys' batches as one script call: on a single Redis, TOKEN_SCRIPT's 'm' mode
   * with the keys as KEYS; on a Cluster, NODE_SCRIPT, whose KEYS[1] routes the call to its master while
   * the other keys ride in ARGV (allowed to touch other slots of the same node). A node that cannot take
   * the call whole (see splitReason) gets the keys one by one.
   */
  private sendKeys(call: KeysCall): void {
    const { keys, groups } = call;
    if (keys.length === 0) return;
    if (keys.length === 1) {
      this.flush(keys[0]!, groups[0]!.waiters);
      return;
    }
    let total = 0;
    for (const g of groups) total += g.waiters.length;
    let send: () => Promise<unknown>;
    let resend: () => Promise<unknown>;
    if (this.cluster === undefined) {
      const args = multiArgs(call, this.interval, this.burstArg);
      send = () => this.client.evalsha(script.sha, keys.length, ...args);
      resend = () => this.client.eval(script.lua, keys.length, ...args);
    } else {
      const args = nodeArgs(call, this.interval, this.burstArg);
      send = () => this.client.evalsha(nodeScript.sha, 1, ...args).catch(this.splitOn);
      resend = () => this.client.eval(nodeScript.lua, 1, ...args).catch(this.splitOn);
    }
    this.switch.startWith(
      keys[0]!,
      send,
      (r) => {
        if (r !== SPLIT) return answerKeys(r, groups);
        for (let i = 0; i < keys.length; i++) this.flush(keys[i]!, groups[i]!.waiters);
        return 0; // counted by the calls that decide them
      },
      () => {
        for (const g of groups) this.rescueBatch(g.waiters);
      },
      total,
      resend,
    );
  }

  /** splitOn turns a node script's error that asks for one call per key into SPLIT (and node batches off for a node that cannot run it). */
  private readonly splitOn = (err: unknown): unknown => {
    const why = splitReason(err);
    if (why === undefined) throw err;
    if (why === 'unsupported') this.nodeBatches = false;
    return SPLIT;
  };

  /** flush sends a key's batch as one script call: the caller's own one-token call for a lone caller, else the batch call. */
  private flush(k: string, w: Waiter[]): void {
    if (w.length === 1) {
      this.switch.start(k, w[0]!, 1);
      return;
    }
    const count = String(w.length);
    this.switch.startWith(
      k,
      () => script.evalsha(this.client, k, this.interval, this.burstArg, count, BATCH),
      (r) => (answerBatch(w, r, this.burst, this.rate) ? w.length : -1),
      () => this.rescueBatch(w),
      w.length,
      () => script.eval(this.client, k, this.interval, this.burstArg, count, BATCH),
    );
  }

  /** rescueBatch decides each caller of a batch in process, in call order. */
  private rescueBatch(w: Waiter[]): void {
    for (let i = 0; i < w.length; i++) w[i]!.local();
  }

  /** fromLease spends a token of the key's lease, or waits for a new lease (one lease call per key in flight). */
  private fromLease(key: string, k: string, decide: boolean): Promise<boolean | LimitDecision> {
    let l = this.leases.get(k);
    if (l === undefined) {
      if (this.leases.size >= this.maxKeys) this.dropLeases();
      this.leases.set(k, (l = new Lease()));
    }
    if (l.waiting === undefined && l.left > 0 && this.clock.now() < l.until) {
      l.left--;
      this.switch.redisDecisions++;
      const answer = decide ? this.leaseDecision(l) : true;
      this.tally(answer, key, 1);
      return Promise.resolve(answer);
    }
    const c = new Waiter(this.ctx, k, key, decide);
    if (l.waiting !== undefined) {
      l.waiting.push(c);
      return c.promise;
    }
    const waiting: Waiter[] = (l.waiting = [c]);
    const arg = this.leaseArg;
    this.switch.startWith(
      k,
      () => script.evalsha(this.client, k, this.interval, this.burstArg, arg, LEASE),
      (r) => {
        if (!isIntArray(r, 2) || r[0]! < 0 || r[0]! > this.lease!.tokens || r[1]! < 0) return -1;
        const n = waiting.length; // callers join the wait while the call is in flight
        this.settleLease(l, waiting, r[0]!, r[1]! / 1000);
        return n;
      },
      () => {
        l.waiting = undefined;
        l.left = 0;
        this.switch.rescueDecisions += waiting.length;
        this.rescueBatch(waiting);
      },
      0, // counted when answered
      () => script.eval(this.client, k, this.interval, this.burstArg, arg, LEASE),
    );
    return c.promise;
  }

  /** settleLease answers the callers that waited for a lease of `taken` tokens, and keeps the rest for later ones. */
  private settleLease(l: Lease, waiting: Waiter[], taken: number, aheadMs: number): void {
    l.waiting = undefined;
    l.left = taken;
    l.until = this.clock.now() + this.lease!.maxMs;
    l.resetMs = Math.ceil(aheadMs);
    const interval = 1000 / this.rate;
    const retryAfterMs = Math.max(0, Math.ceil(aheadMs + interval - this.burst * interval));
    for (const c of waiting) {
      if (l.left > 0) {
        l.left--;
        c.resolve(c.decide ? this.leaseDecision(l) : true);
      } else {
        c.resolve(c.decide ? { allowed: false, limit: this.burst, remaining: 0, retryAfterMs, resetMs: l.resetMs } : false);
      }
    }
  }

  private leaseDecision(l: Lease): LimitDecision {
    return { allowed: true, limit: this.burst, remaining: l.left, retryAfterMs: 0, resetMs: l.resetMs };
  }

  /** dropLeases forgets expired leases, and the oldest half if that was not enough (bounded memory). */
  private dropLeases(): void {
    const now = this.clock.now();
    for (const [k, l] of this.leases) if (l.waiting === undefined && (l.left === 0 || now >= l.until)) this.leases.delete(k);
    if (this.leases.size < this.maxKeys) return;
    let drop = this.leases.size >> 1;
    for (const [k, l] of this.leases) {
      if (drop-- <= 0) break;
      if (l.waiting === undefined) this.leases.delete(k);
    }
  }

  protected override beforeClose(): void {
    // Batches not sent yet are answered from rescue, as calls still waiting on Redis are.
    const w = this.oneBatch;
    if (w !== undefined) {
      this.switch.rescueDecisions += w.length;
      this.rescueBatch(w);
    }
    for (const b of this.batches.values()) {
      this.switch.rescueDecisions += b.waiters.length;
      this.rescueBatch(b.waiters);
    }
    this.oneBatch = this.oneKey = undefined;
    this.batches.clear();
    this.leases.clear();
  }

  /**
   * charge takes up to `n` tokens from the bucket at `k` as a lease does (TOKEN_SCRIPT's 'l' mode: as
   * many as the bucket holds, never below empty), for the tokens the rescue admitted while the key's
   * part was in rescue. Not through the switch: it is no decision, and no caller waits for it.
   */
  protected override charge(k: string, n: number): Promise<number> {
    const count = String(Math.ceil(n));
    const taken = (r: unknown): number => (isIntArray(r, 2) ? r[0]! : 0);
    return script.evalsha(this.client, k, this.interval, this.burstArg, count, LEASE).then(taken, (err: unknown) => {
      if (!isNoScript(err)) throw err;
      return script.eval(this.client, k, this.interval, this.burstArg, count, LEASE).then(taken);
    });
  }

  protected makeRescue(instances: number): KeyedLimiter {
    return new KeyedLimiter({ rate: this.rate / instances, burst: Math.max(1, this.burst / instances), maxKeys: this.maxKeys, clock: this.clock });
  }
}

/** tokenSettings validates the options the constructor and `reconfigure` share: rate, burst (default: the rate, at least 1), lease. */
function tokenSettings(o: Partial<RedisTokenLimiterOptions>): { rate: number; burst: number; lease: Readonly<LeaseOptions> | undefined } {
  const rate = positive('RedisTokenLimiter', 'rate', o.rate);
  const burst = finite('RedisTokenLimiter', 'burst', o.burst ?? Math.max(1, rate), 1);
  let lease: Readonly<LeaseOptions> | undefined;
  if (o.lease !== undefined) {
    const l = optionsOf('RedisTokenLimiter.lease', o.lease, LEASE_KEYS);
    lease = Object.freeze({
      tokens: finite('RedisTokenLimiter', 'lease.tokens', l.tokens, 1, Math.floor(burst)),
      maxMs: positive('RedisTokenLimiter', 'lease.maxMs', l.maxMs),
    });
    if (!Number.isInteger(lease.tokens)) throw new RangeError(`RedisTokenLimiter: lease.tokens must be an integer, got ${lease.tokens}`);
  }
  return { rate, burst, lease };
}
