/**
 * RedisFleetStore: the fleet on Redis (ioredis). Per dependency key, all under one hash tag (so a
 * Redis Cluster keeps them on one slot):
 *
 * - `…:r` a hash of reports (caller → "gen|calls|failures") and `…:e` a sorted set of their expiry
 *   times on Redis's own clock: the TTL is enforced by the store, at every publish and read (a Lua
 *   script drops the expired reporters and announces them);
 * - `…:c` the pub/sub channel every report, departure and generation is announced on;
 * - `…:g` the generation; `…:p:<gen>` the current probe permit period (start, taken, ok, failed),
 *   taken and counted by Lua scripts: the INCR with expiry of the issue, atomically.
 *
 * Commands run on the given client (or one made from a URL); the watch runs on a duplicate in
 * subscriber mode. Every operation is bounded by `timeoutMs`.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Clock } from '../core/clock.js';
import { systemClock } from '../core/clock.js';
import type { Disposer } from '../core/events.js';
import { clockOption, options as optionsObject, positive, showValue } from '../core/validate.js';
import type { BreakerFleetOptions, FleetLink, FleetMember } from '../breaker/types.js';
import { newCallerId } from './caller-id.js';
import { FleetView } from './fleet-view.js';
import type { FleetReport } from './quorum.js';
import { withTimeout } from './store-timeout.js';
import type { FleetEvent, FleetSnapshot, FleetStore, PermitAnswer } from './types.js';

/** RedisFleetStoreOptions configures a RedisFleetStore. */
export interface RedisFleetStoreOptions {
  /** The ioredis client, or a `redis://` URL (the store then makes its own client and closes it). Required. */
  redis: Redis | string;
  /** Prefix of every key and channel. Defaults to 'bulwark:fleet:'. */
  prefix?: string;
  /** This process's caller id (no '|'). Defaults to a fresh one (host, pid, random). */
  callerId?: string;
  /** Milliseconds an operation may wait for Redis before it counts as failed. Defaults to 1 000. */
  timeoutMs?: number;
  /** The time source of timeouts and the views' timers. Defaults to `systemClock`. */
  clock?: Clock;
}

const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;
/** Drops the expired reporters of KEYS[1] (hash) / KEYS[2] (zset) and announces them on channel `ch`. */
const EXPIRE = `local function expire(ch) for _, c in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do redis.call('HDEL', KEYS[1], c) redis.call('ZREM', KEYS[2], c) redis.call('PUBLISH', ch, 'x|' .. c) end end`;

/** KEYS: r, e. ARGV: caller, "gen|calls|failures", ttlMs, channel. */
const PUBLISH = `${NOW} ${EXPIRE}
expire(ARGV[4])
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2) redis.call('PEXPIRE', KEYS[2], ttl * 2)
redis.call('PUBLISH', ARGV[4], 'r|' .. ARGV[1] .. '|' .. ARGV[2])
return 1`;
/** KEYS: r, e, g. ARGV: channel. Answers { gen, caller, report, caller, report … }. */
const SNAPSHOT = `${NOW} ${EXPIRE}
expire(ARGV[1])
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, redis.call('GET', KEYS[3]) or '0')
return out`;
/** KEYS: p. ARGV: limit, periodMs. Answers { granted 0/1, ms left in the period, the period's start }. */
const PERMIT = `${NOW}
local period = tonumber(ARGV[2])
local start = tonumber(redis.call('HGET', KEYS[1], 's') or '-1')
if start < 0 or now - start >= period then
  redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 's', now, 't', 0, 'o', 0, 'f', 0) redis.call('PEXPIRE', KEYS[1], period * 2) start = now
end
local left = start + period - now
if redis.call('HINCRBY', KEYS[1], 't', 1) > tonumber(ARGV[1]) then redis.call('HINCRBY', KEYS[1], 't', -1) return {0, left, start} end
return {1, left, start}`;
/** KEYS: p, g. ARGV: gen, ok 1/0, needed, channel. Answers the generation now. */
const PROBE = `local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur ~= tonumber(ARGV[1]) or redis.call('EXISTS', KEYS[1]) == 0 then return cur end
if ARGV[2] == '0' then redis.call('HINCRBY', KEYS[1], 'f', 1) return cur end
local ok = redis.call('HINCRBY', KEYS[1], 'o', 1)
if ok < tonumber(ARGV[3]) or tonumber(redis.call('HGET', KEYS[1], 'f')) > 0 then return cur end
cur = redis.call('INCR', KEYS[2]) redis.call('DEL', KEYS[1]) redis.call('PUBLISH', ARGV[4], 'g|' .. cur)
return cur`;
/** KEYS: r, e. ARGV: caller, channel. */
const LEAVE = `if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then redis.call('ZREM', KEYS[2], ARGV[1]) redis.call('PUBLISH', ARGV[2], 'x|' .. ARGV[1]) end return 1`;

const sha = (s: string) => createHash('sha1').update(s).digest('hex');
const SCRIPTS = { PUBLISH, SNAPSHOT, PERMIT, PROBE, LEAVE };
const SHAS = Object.fromEntries(Object.entries(SCRIPTS).map(([k, v]) => [k, sha(v)])) as Record<keyof typeof SCRIPTS, string>;

/** RedisFleetStore keeps a fleet on Redis; see the module comment. */
export class RedisFleetStore implements FleetStore {
  readonly callerId: string;
  private readonly client: Redis;
  private readonly owned: boolean;
  private readonly sub: Redis;
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  /** Listeners by channel. */
  private readonly listeners = new Map<string, Set<(e: FleetEvent) => void>>();
  private readonly statusListeners = new Set<(up: boolean) => void>();
  private closed = false;

  constructor(options: RedisFleetStoreOptions) {
    const o = optionsObject('RedisFleetStore', options);
    const r = o.redis;
    if (typeof r === 'string') {
      if (!/^rediss?:\/\//.test(r)) throw new TypeError(`RedisFleetStore: redis must be an ioredis client or a redis:// URL, got ${JSON.stringify(r)}`);
      this.client = new Redis(r, { retryStrategy: (n) => Math.min(n * 20, 200), maxRetriesPerRequest: 1, enableOfflineQueue: false });
      this.client.on('error', () => {});
      this.owned = true;
    } else if (r !== null && typeof r === 'object' && typeof (r as { evalsha?: unknown }).evalsha === 'function') {
      this.client = r;
      this.owned = false;
    } else throw new TypeError(`RedisFleetStore: redis must be an ioredis client or a redis:// URL, got ${showValue(r)}`);
    const id = o.callerId ?? newCallerId();
    if (typeof id !== 'string' || id === '' || id.includes('|'))
      throw new TypeError(`RedisFleetStore: callerId must be a non-empty string without '|', got ${showValue(id)}`);
    this.callerId = id;
    const prefix = o.prefix ?? 'bulwark:fleet:';
    if (typeof prefix !== 'string') throw new TypeError(`RedisFleetStore: prefix must be a string, got ${showValue(prefix)}`);
    this.prefix = prefix;
    this.timeoutMs = positive('RedisFleetStore', 'timeoutMs', o.timeoutMs ?? 1_000);
    this.clock = clockOption('RedisFleetStore', o.clock, systemClock);
    this.sub = this.client.duplicate({ retryStrategy: (n: number) => Math.min(n * 20, 200), enableOfflineQueue: true });
    this.sub.on('error', () => {});
    this.sub.on('message', (channel: string, message: string) => this.onMessage(channel, message));
    this.sub.on('ready', () => this.status(true));
    this.sub.on('close', () => this.status(false));
  }

  join(member: FleetMember, options: BreakerFleetOptions): FleetLink {
    return new FleetView(this, member, options, this.clock);
  }

  async publish(key: string, report: FleetReport, ttlMs: number): Promise<void> {
    const k = this.keys(key);
    await this.run('PUBLISH', [k.r, k.e], [report.caller, `${report.gen}|${report.calls}|${report.failures}`, Math.ceil(ttlMs), k.c]);
  }

  async snapshot(key: string): Promise<FleetSnapshot> {
    const k = this.keys(key);
    const out = (await this.run('SNAPSHOT', [k.r, k.e, k.g], [k.c])) as string[];
    const reports: FleetReport[] = [];
    for (let i = 1; i + 1 < out.length; i += 2) {
      const r = parseReport(out[i]!, out[i + 1]!);
      if (r !== undefined) reports.push(r);
    }
    return { gen: Number(out[0]), reports };
  }

  watch(key: string, listener: (event: FleetEvent) => void, onStatus: (up: boolean) => void): Disposer {
    const channel = this.keys(key).c;
    let set = this.listeners.get(channel);
    if (set === undefined) {
      this.listeners.set(channel, (set = new Set()));
      // Subscribed: the view reads a snapshot taken with the subscription on (its first may miss reports).
      this.sub.subscribe(channel).then(
        () => {
          if (!this.closed && this.listeners.get(channel) === set) onStatus(true);
        },
        () => onStatus(false),
      );
    }
    set.add(listener);
    this.statusListeners.add(onStatus);
    return () => {
      this.statusListeners.delete(onStatus);
      const s = this.listeners.get(channel);
      if (s === undefined) return;
      s.delete(listener);
      if (s.size === 0) {
        this.listeners.delete(channel);
        if (!this.closed) this.sub.unsubscribe(channel).catch(() => undefined);
      }
    };
  }

  async takePermit(key: string, gen: number, limit: number, periodMs: number): Promise<PermitAnswer> {
    const k = this.keys(key);
    const [granted, left, start] = (await this.run('PERMIT', [`${k.p}${gen}`], [limit, Math.ceil(periodMs)])) as [number, number, number];
    return { granted: granted === 1, periodLeftMs: Number(left), periodStart: Number(start) };
  }

  async probeResult(key: string, gen: number, ok: boolean, needed: number): Promise<number> {
    const k = this.keys(key);
    return Number(await this.run('PROBE', [`${k.p}${gen}`, k.g], [gen, ok ? 1 : 0, needed, k.c]));
  }

  async leave(key: string): Promise<void> {
    const k = this.keys(key);
    await this.run('LEAVE', [k.r, k.e], [this.callerId, k.c]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.statusListeners.clear();
    this.listeners.clear();
    this.sub.disconnect();
    if (this.owned) this.client.disconnect();
  }

  private keys(key: string): { r: string; e: string; g: string; c: string; p: string } {
    const base = `${this.prefix}{${key}}`;
    return { r: `${base}:r`, e: `${base}:e`, g: `${base}:g`, c: `${base}:c`, p: `${base}:p:` };
  }

  /** run runs a script by its SHA, loading it on NOSCRIPT, within timeoutMs. */
  private run(name: keyof typeof SCRIPTS, keys: string[], args: (string | number)[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('RedisFleetStore: closed'));
    const attempt = this.client.evalsha(SHAS[name], keys.length, ...keys, ...args).catch((err: unknown) => {
      if (err instanceof Error && err.message.startsWith('NOSCRIPT')) return this.client.eval(SCRIPTS[name], keys.length, ...keys, ...args);
      throw err;
    });
    return withTimeout(attempt, this.timeoutMs, this.clock, `RedisFleetStore ${name.toLowerCase()}`);
  }

  private onMessage(channel: string, message: string): void {
    const set = this.listeners.get(channel);
    if (set === undefined) return;
    let e: FleetEvent | undefined;
    const bar = message.indexOf('|');
    const kind = message.slice(0, bar);
    const rest = message.slice(bar + 1);
    if (kind === 'g') e = { type: 'generation', gen: Number(rest) };
    else if (kind === 'x') e = { type: 'gone', caller: rest };
    else if (kind === 'r') {
      const at = rest.indexOf('|');
      const report = parseReport(rest.slice(0, at), rest.slice(at + 1));
      if (report !== undefined) e = { type: 'report', report };
    }
    if (e !== undefined) for (const l of set) l(e);
  }

  private status(up: boolean): void {
    if (this.closed) return;
    for (const l of this.statusListeners) l(up);
  }
}

/** parseReport reads "gen|calls|failures" of `caller`; undefined if it is not that. */
function parseReport(caller: string, value: string): FleetReport | undefined {
  const [g, c, f] = value.split('|').map(Number);
  if (!Number.isFinite(g) || !Number.isFinite(c) || !Number.isFinite(f)) return undefined;
  return { caller, gen: g!, calls: c!, failures: f! };
}
