/**
 * The Lua scripts of the Redis limiters (internal: not exported from bulwark/limit), and how they are
 * run: EVALSHA, and EVAL (which loads the script again, on the node that answered) when Redis answers
 * NOSCRIPT — after a restart, a failover, a resharding to a new master or SCRIPT FLUSH.
 *
 * What go-zero's `tokenscript` gets wrong, and these do not:
 * - time comes from Redis (`TIME`, microseconds), not from each caller's clock in whole seconds:
 *   callers with skewed clocks, or a call delayed in a queue, cannot mint tokens (go-zero #4072);
 * - the stored state never moves backwards: a token bucket stores its "full again" time (GCRA), which
 *   only ever moves forward, even if Redis's clock steps back;
 * - expiry is never 0: a bucket's key expires a second after it is full again, a window's at its end
 *   (go-zero's `math.floor(capacity / rate * 2)` is 0 when burst < rate / 2, and the key never lives);
 * - Lua numbers become integer replies with fractions cut off, so the scripts round on purpose;
 *   a Lua number passed to a command is written with full precision (Redis ≥ 7: shortest exact form).
 */
import { createHash } from 'node:crypto';
import type { RedisClient } from './types.js';

/**
 * readAhead(v, out): Lua statements that set the local `out` to how many ms the state `v` (a GET reply)
 * holds a time ahead of now (0 for none, or one in the past), given `sec` and `frac` (now, from TIME).
 * The packed state is told by its length and its zero first byte (struct.unpack answers that byte:
 * no string.byte call); anything else is read as the old text state, "<seconds> <ms>".
 */
const readAhead = (v: string, out: string): string => `
${out} = 0
if ${v} then
  local b, s, f
  if #${v} == 17 then b, s, f = struct.unpack('<Bdd', ${v}) end
  if b ~= 0 then
    s, f = nil, nil
    local sp = string.find(${v}, ' ', 1, true)
    if sp then s, f = tonumber(string.sub(${v}, 1, sp - 1)), tonumber(string.sub(${v}, sp + 1)) end
  end
  if s and f then
    ${out} = (s - sec) * 1000 + (f - frac)
    if ${out} < 0 then ${out} = 0 end
  end
end`;

/**
 * writeAhead(key, a): Lua statements that store now + `a` ms as `key`'s state, expiring a second after
 * that time (to the next whole ms). The expiry goes to SET as a string made by string.format('%d'):
 * Redis 7.0 turns a Lua number argument into text with snprintf('%.17g'), which costs about three
 * times as much. The ms within the second are `f % 1000` (Lua 5.1's `%` is `f - floor(f / 1000) * 1000`,
 * an opcode: no call of math.floor), and the whole seconds `(f - r) / 1000`, exact: r is exact
 * (Sterbenz), so f - r is the multiple of 1 000 — the state is bit for bit what math.floor wrote.
 */
const writeAhead = (key: string, a: string): string => `
do
  local f = frac + ${a}
  local r = f % 1000
  redis.call('SET', ${key}, struct.pack('<Bdd', 0, sec + (f - r) / 1000, r), 'PX', string.format('%d', ${a} + 1001))
end`;

/**
 * STATE_LUA: the functions the multi-key modes (TOKEN_SCRIPT's 'm', NODE_SCRIPT) share, given `sec`,
 * `frac` (now), `interval` and `lim`: aheadOf(value) is readAhead as a function; admitUpTo(key, value, k)
 * admits up to k single-token callers of one key, one token at a time, writes the key if any was
 * admitted and answers how many. (A single key's decision does not call them: making a closure per
 * call costs more inside Redis than the inline statements.)
 */
const STATE_LUA = `
local function aheadOf(v)
  local a
  ${readAhead('v', 'a')}
  return a
end
local function admitUpTo(key, v, k)
  local a, m = aheadOf(v), 0
  while m < k do
    local x = a + interval
    if x > lim then break end
    a, m = x, m + 1
  end
  if m > 0 then ${writeAhead('key', 'a')} end
  return m
end`;

/**
 * TOKEN_SCRIPT: KEYS[1] holds the bucket's "full again" time (GCRA's theoretical arrival time) as whole
 * seconds of Redis's clock and milliseconds within that second (a double in [0, 1000)), packed as a
 * zero byte and two little-endian doubles (17 bytes, by struct.pack: no decimal formatting or parsing,
 * which cost more than the rest of the arithmetic). Split so that a step of 1 000 / rate ms is added to
 * a number below 1 000, not to ms since 1970 (whose double is precise to only 0.24 µs): exact at any
 * rate, where one number would round every step by more than 0.1 % of a token above 100 000 tokens/s
 * and never empty from ~8 M/s. A state written as text, "<seconds> <ms>", is read too.
 * The arithmetic runs on `ahead`, how far that time is ahead of now (0 for a full bucket).
 *
 * ARGV: interval (ms per token), burst, n[, mode]. Reply: {allowed 0|1, remaining, retryAfterMs (-1: never), resetMs}.
 *
 * With ARGV[4] = 'a' (`take(key, n)`, which needs only the answer) the reply is the integer 1 or 0:
 * the same decision, without computing and sending the numbers. With interval and burst alone (no n),
 * it is that answer for one token: a lone `take()`, the path that comes first, right after TIME, and
 * does only what the decision needs — no mode to read, no n to send or parse (every argument costs the
 * client and Redis), and burst read only when the bucket is not full (one token always fits a full
 * bucket: burst ≥ 1), numbers read by arithmetic (`x + 0`: the same conversion as tonumber, without
 * the call). Inside Redis it costs 1.14× the TIME+GET+SET floor, where the general path took 1.22×
 * (INFO commandstats usec_per_call, medians of per-round ratios, 41 interleaved rounds of 4 000 calls;
 * fastest rounds 3.76 / 3.33 / 4.01 µs). What is left is what exactness needs: unpacking and packing
 * the state and formatting its expiry.
 *
 * With ARGV[4] = '1' (a batch of n single-token decisions) it admits as many of the n as the bucket
 * holds, one token at a time with the same test and arithmetic as n calls of one token in a row, and
 * answers {admitted m, remaining, retryAfterMs, resetMs, startUs}: the middle three are what call m + 1
 * alone would get (the first one refused), startUs is `ahead` before the batch in whole microseconds
 * (the admitted calls' numbers are derived from it).
 *
 * With ARGV[4] = 'm' (one tick's `take()` callers of several keys, on a single Redis) KEYS are the
 * keys and ARGV[4 + i] how many callers KEYS[i] has: each key admits as many as its bucket holds, as
 * a batch does, and the reply is the list of how many each admitted.
 *
 * With ARGV[4] = 'l' (a lease) it takes up to n tokens, as many as the bucket holds (at least one, or
 * none), and answers {taken, aheadUs after}: what a process then spends locally.
 */
export const TOKEN_SCRIPT = `
local t = redis.call('TIME')
if ARGV[3] == nil then
  local sec, frac, interval = t[1] + 0, t[2] / 1000, ARGV[1] + 0
  local v = redis.call('GET', KEYS[1])
  local nxt = interval
  if v then
    local ahead
    ${readAhead('v', 'ahead')}
    if ahead ~= 0 then
      nxt = ahead + interval
      if not (nxt <= (ARGV[2] + 1e-9) * interval) then return 0 end
    end
  end
  ${writeAhead('KEYS[1]', 'nxt')}
  return 1
end
local sec = tonumber(t[1])
local frac = t[2] / 1000
local interval = tonumber(ARGV[1])
local lim = (tonumber(ARGV[2]) + 1e-9) * interval
local mode = ARGV[4]
if mode ~= 'm' then
  local v = redis.call('GET', KEYS[1])
  local ahead
  ${readAhead('v', 'ahead')}
  local n = ARGV[3]
  if mode == 'a' then
    local nxt = ahead + tonumber(n) * interval
    if nxt <= lim then
      ${writeAhead('KEYS[1]', 'nxt')}
      return 1
    end
    return 0
  end
  local burst = tonumber(ARGV[2])
  n = tonumber(n)
  local ceil, floor = math.ceil, math.floor
  if mode == '1' or mode == 'l' then
    local nxt, m = ahead, 0
    if mode == 'l' then
      m = floor((lim - ahead) / interval)
      if m > n then m = n end
      if m < 0 then m = 0 end
      nxt = ahead + m * interval
    else
      while m < n do
        local x = nxt + interval
        if x > lim then break end
        nxt, m = x, m + 1
      end
    end
    if m > 0 then ${writeAhead('KEYS[1]', 'nxt')} end
    if mode == 'l' then return { m, floor(nxt * 1000) } end
    local left = floor(burst - nxt / interval + 1e-9)
    if left < 0 then left = 0 end
    return { m, left, ceil(nxt + interval - burst * interval), ceil(nxt), floor(ahead * 1000) }
  end
  local nxt = ahead + n * interval
  if nxt <= lim then
    ${writeAhead('KEYS[1]', 'nxt')}
    return { 1, floor(burst - nxt / interval + 1e-9), 0, ceil(nxt) }
  end
  local left = floor(burst - ahead / interval + 1e-9)
  if left < 0 then left = 0 end
  if n > burst then return { 0, left, -1, ceil(ahead) } end
  return { 0, left, ceil(nxt - burst * interval), ceil(ahead) }
end
${STATE_LUA}
local out = {}
for i = 1, #KEYS do
  out[i] = admitUpTo(KEYS[i], redis.call('GET', KEYS[i]), tonumber(ARGV[4 + i]))
end
return out
`;

/**
 * NODE_SCRIPT: one tick's `take()` callers of several keys that one Cluster master owns, in one call.
 * KEYS[1] is the first key (it routes the call to its master) and ARGV[3] its callers; ARGV[4], ARGV[5]…
 * are further key, callers pairs. Each key admits as many as its bucket holds, exactly as TOKEN_SCRIPT's
 * 'm' mode; the reply is the list of how many each admitted. The flag lets the script touch keys of
 * other slots than KEYS[1]'s on the same node (Redis ≥ 7); every key is read before any is written, so
 * that a key the node does not own (its slot moved) fails the call before it changed anything.
 */
export const NODE_SCRIPT = `#!lua flags=allow-cross-slot-keys
local t = redis.call('TIME')
local sec = tonumber(t[1])
local frac = t[2] / 1000
local interval = tonumber(ARGV[1])
local lim = (tonumber(ARGV[2]) + 1e-9) * interval
${STATE_LUA}
local keys, counts, found = { KEYS[1] }, { tonumber(ARGV[3]) }, {}
for i = 4, #ARGV, 2 do
  keys[#keys + 1] = ARGV[i]
  counts[#counts + 1] = tonumber(ARGV[i + 1])
end
for i = 1, #keys do found[i] = redis.call('GET', keys[i]) end
local out = {}
for i = 1, #keys do
  out[i] = admitUpTo(keys[i], found[i], counts[i])
end
return out
`;

/**
 * PERIOD_SCRIPT: KEYS[1] counts calls of one client key.
 * ARGV: periodMs, quota, n, window, alignOffsetMs. Reply: {allowed 0|1, remaining, resetMs, retryAfterMs (-1: never)}.
 *
 * Windows: '0' fixed from the key's first call, '1' fixed at multiples of periodMs of Redis's clock
 * (plus alignOffsetMs) — the key holds the count and expires at the window's end, and a count found
 * without expiry gets one (it would never reset); 's' the sliding-window counter — the key holds
 * "<window index> <count> <previous window's count>", windows aligned like '1', and a call counts the
 * current window plus the previous one weighted by how much of it still lies within the last periodMs.
 * Only admitted calls are counted.
 */
export const PERIOD_SCRIPT = `
local period = tonumber(ARGV[1])
local quota = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local ceil, floor = math.ceil, math.floor
if ARGV[4] == 's' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000) + tonumber(ARGV[5])
  local idx = floor(now / period)
  local elapsed = now - idx * period
  local c, p = 0, 0
  local v = redis.call('GET', KEYS[1])
  if v then
    local w, vc, vp = string.match(v, '^(%d+) (%d+) (%d+)$')
    w = tonumber(w)
    if w == idx then c, p = tonumber(vc), tonumber(vp) elseif w == idx - 1 then p = tonumber(vc) end
  end
  local used = p * (1 - elapsed / period) + c
  local allowed = 0
  if used + n <= quota + 1e-9 then
    allowed = 1
    c = c + n
    used = used + n
    redis.call('SET', KEYS[1], string.format('%d %d %d', idx, c, p), 'PX', ceil(2 * period - elapsed))
  end
  local left = floor(quota - used + 1e-9)
  if left < 0 then left = 0 end
  local reset = 0
  if c > 0 then reset = ceil(2 * period - elapsed) elseif p > 0 then reset = ceil(period - elapsed) end
  local retry = 0
  if allowed == 0 then
    if n > quota then
      retry = -1
    elseif quota - c - n >= 0 then
      retry = ceil((1 - (quota - c - n) / p) * period - elapsed)
    else
      retry = ceil((2 - (quota - n) / c) * period - elapsed)
    end
    if retry < 0 then retry = 0 end
  end
  return { allowed, left, reset, retry }
end
local count = tonumber(redis.call('GET', KEYS[1]))
local ttl
local fresh = false
if count == nil then
  count = 0
  fresh = true
  if ARGV[4] == '1' then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
    ttl = period - (now + tonumber(ARGV[5])) % period
  else
    ttl = period
  end
  ttl = math.max(1, ceil(ttl))
else
  ttl = redis.call('PTTL', KEYS[1])
  if ttl < 1 then
    ttl = math.max(1, ceil(period))
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
local allowed = 0
if count + n <= quota then
  allowed = 1
  count = count + n
  if fresh then
    redis.call('SET', KEYS[1], count, 'PX', ttl)
  else
    redis.call('INCRBY', KEYS[1], n)
  end
end
local retry = 0
if allowed == 0 then
  if n > quota then retry = -1 else retry = ttl end
end
return { allowed, quota - count, ttl, retry }
`;

const ONE_KEY = '1';

/** Script is a Lua script with its SHA1, run by EVALSHA (and EVAL when the node answers NOSCRIPT). */
export class Script {
  readonly sha: string;
  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  /**
   * evalsha runs the script by its SHA1 on the node that owns `key` (rejects NOSCRIPT when the node
   * lacks it). Each argument is sent as given (the key count as the string '1': ioredis would convert
   * a number on every call).
   */
  evalsha(redis: RedisClient, key: string, a: string, b: string, c?: string, d?: string, e?: string): Promise<unknown> {
    return c === undefined
      ? redis.evalsha(this.sha, ONE_KEY, key, a, b)
      : d === undefined
        ? redis.evalsha(this.sha, ONE_KEY, key, a, b, c)
        : e === undefined
          ? redis.evalsha(this.sha, ONE_KEY, key, a, b, c, d)
          : redis.evalsha(this.sha, ONE_KEY, key, a, b, c, d, e);
  }

  /** eval sends the script itself, which also caches it on that node. */
  eval(redis: RedisClient, key: string, a: string, b: string, c?: string, d?: string, e?: string): Promise<unknown> {
    return c === undefined
      ? redis.eval(this.lua, ONE_KEY, key, a, b)
      : d === undefined
        ? redis.eval(this.lua, ONE_KEY, key, a, b, c)
        : e === undefined
          ? redis.eval(this.lua, ONE_KEY, key, a, b, c, d)
          : redis.eval(this.lua, ONE_KEY, key, a, b, c, d, e);
  }
}

/** isIntArray tells whether `reply` is an array of `length` integers (what the scripts answer). */
export function isIntArray(reply: unknown, length: number): reply is number[] {
  if (!Array.isArray(reply) || reply.length !== length) return false;
  for (let i = 0; i < length; i++) if (!Number.isInteger(reply[i])) return false;
  return true;
}
