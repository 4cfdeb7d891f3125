/**
 * The batches of RedisTokenLimiter (internal): one tick's single-token callers per key, how several
 * keys' batches are grouped into one script call (all of them on a single Redis, one call per master on
 * a Cluster), the arguments of that call, and how its replies and a batch's reply are checked and
 * answered. The limiter owns the sending; this file owns the shapes.
 */
import { ReplyError, type Cluster } from 'ioredis';
import { keySlot, ownerOf } from './redis-cluster.js';
import { isIntArray } from './redis-scripts.js';
import { isNoScript, Pending } from './redis-call.js';
import type { LimitDecision } from './types.js';

/** What a single-token caller needs of its limiter: one object per limiter, shared by all its callers. */
export interface WaiterContext {
  /** The bucket's size, for the numbers of a decision. */
  readonly burst: number;
  /** tally counts an answer of the limiter (allowed or limited; a refusal is published when someone listens). */
  tally(answer: boolean | LimitDecision, key: string, n: number): void;
  /** sendOne asks Redis for one token of the Redis key `k`: by EVALSHA, or by EVAL when `again` (after NOSCRIPT). */
  sendOne(k: string, decide: boolean, again: boolean): Promise<unknown>;
  /** local decides one token of the client key `key` (Redis key `k`) in process. */
  local(key: string, decide: boolean, k: string): boolean | LimitDecision;
}

type Answer = boolean | LimitDecision;
/** The resolve function of the promise made last with `keepResolve` as its executor (see Waiter). */
let kept: ((answer: Answer) => void) | undefined;
/** One executor for every Waiter's promise: it runs inside the Promise constructor, so no closure is made per caller. */
const keepResolve = (resolve: (answer: Answer) => void): void => {
  kept = resolve;
};

/**
 * Waiter is a single-token caller (take or takeDecision): its promise, answered once and counted as it
 * is answered. Alone, it is its own script call and its own node among the calls waiting on Redis (a
 * Pending: one object per lone caller besides its promise, no closures); in a batch, the batch's call
 * answers it.
 */
export class Waiter extends Pending {
  /** What the caller awaits. */
  readonly promise: Promise<Answer>;
  private readonly settle: (answer: Answer) => void;

  constructor(
    private readonly ctx: WaiterContext,
    /** The Redis key. */
    readonly k: string,
    /** The client key (for the rescue limiter and the refusal event). */
    readonly key: string,
    /** Whether the caller asked for the numbers (takeDecision) or a boolean (take). */
    readonly decide: boolean,
  ) {
    super();
    this.promise = new Promise(keepResolve);
    this.settle = kept!;
  }

  /** resolve answers the caller. */
  resolve(answer: Answer): void {
    this.ctx.tally(answer, this.key, 1);
    this.settle(answer);
  }

  send(): Promise<unknown> {
    return this.ctx.sendOne(this.k, this.decide, false);
  }

  resend(): Promise<unknown> {
    return this.ctx.sendOne(this.k, this.decide, true);
  }

  answer(reply: unknown): number {
    const answer = this.decide ? parseDecision(reply, this.ctx.burst) : reply === 1 ? true : reply === 0 ? false : undefined;
    if (answer === undefined) return -1;
    this.resolve(answer);
    return 1;
  }

  local(): void {
    this.resolve(this.ctx.local(this.key, this.decide, this.k));
  }
}
/** One key's callers of a tick, and the client key (for the rescue limiter). */
export type Batch = { client: string; waiters: Waiter[] };
/** Several keys' batches that go as one script call: Redis keys and their batches, in the same order. */
export type KeysCall = { keys: string[]; groups: Batch[] };

/** MAX_BATCH is the most single-token decisions one script call carries (and keys one multi-key call carries). */
export const MAX_BATCH = 1024;

/**
 * takeAll moves this tick's `take()` batches (single Redis) into one call, at most MAX_BATCH keys.
 * Batches with a `takeDecision()` caller stay in the map for their own call.
 */
export function takeAll(batches: Map<string, Batch>): KeysCall {
  const call: KeysCall = { keys: [], groups: [] };
  for (const [k, b] of batches) {
    if (b.waiters.some((c) => c.decide)) continue;
    call.keys.push(k);
    call.groups.push(b);
    batches.delete(k);
    if (call.keys.length >= MAX_BATCH) break;
  }
  return call;
}

/**
 * takeByNode moves this tick's `take()` batches (Cluster) into one call per master that owns their slot
 * in the client's slot map, at most MAX_BATCH keys each; the rest, and keys of slots with no known
 * master, stay in the map for their own calls.
 */
export function takeByNode(cluster: Cluster, batches: Map<string, Batch>): KeysCall[] {
  const nodes = new Map<string, KeysCall>();
  for (const [k, b] of batches) {
    if (b.waiters.some((c) => c.decide)) continue;
    const node = ownerOf(cluster, keySlot(k));
    if (node === '') continue;
    let n = nodes.get(node);
    if (n === undefined) nodes.set(node, (n = { keys: [], groups: [] }));
    if (n.keys.length >= MAX_BATCH) continue;
    n.keys.push(k);
    n.groups.push(b);
    batches.delete(k);
  }
  return [...nodes.values()];
}

/** multiArgs is TOKEN_SCRIPT's 'm' call on a single Redis: KEYS are the keys, then interval, burst, 0, 'm', and each key's callers. */
export function multiArgs(call: KeysCall, interval: string, burst: string): string[] {
  const args = [...call.keys, interval, burst, '0', 'm'];
  for (const g of call.groups) args.push(String(g.waiters.length));
  return args;
}

/** nodeArgs is NODE_SCRIPT's call (numkeys 1): the first key, interval, burst, its callers, then key, callers pairs. */
export function nodeArgs(call: KeysCall, interval: string, burst: string): string[] {
  const { keys, groups } = call;
  const args = [keys[0]!, interval, burst, String(groups[0]!.waiters.length)];
  for (let i = 1; i < keys.length; i++) args.push(keys[i]!, String(groups[i]!.waiters.length));
  return args;
}

/** answerKeys checks a multi-key reply (how many each key admitted) and answers the callers: the decisions made, or -1 for a bad shape. */
export function answerKeys(r: unknown, groups: Batch[]): number {
  if (!Array.isArray(r) || r.length !== groups.length) return -1;
  for (let i = 0; i < groups.length; i++) {
    const m = r[i] as unknown;
    if (typeof m !== 'number' || !Number.isInteger(m) || m < 0 || m > groups[i]!.waiters.length) return -1;
  }
  let total = 0;
  for (let i = 0; i < groups.length; i++) {
    const w = groups[i]!.waiters;
    const m = r[i] as number;
    for (let j = 0; j < w.length; j++) w[j]!.resolve(j < m);
    total += w.length;
  }
  return total;
}

/**
 * splitReason reads a node script's error: 'moved' when a key of the call is no longer the node's (its
 * slot moved: a resharding, or a failover the slot map has not caught up with), 'unsupported' when the
 * node cannot run the script (Redis < 7: no script flags) — either way the keys are then sent one by
 * one, as ioredis routes single-key calls — or undefined for any other error (the node is down,
 * CLUSTERDOWN, NOSCRIPT), which fails the call as it is.
 */
export function splitReason(err: unknown): 'moved' | 'unsupported' | undefined {
  if (!(err instanceof ReplyError) || isNoScript(err)) return undefined;
  const msg = (err as Error).message;
  if (/non.local key|cross.slot/i.test(msg)) return 'moved';
  if (/shebang|flags|compil/i.test(msg)) return 'unsupported';
  return undefined;
}

/** answerBatch checks a batch reply and answers its callers; false (nobody answered) for a bad shape. */
export function answerBatch(w: Waiter[], r: unknown, burst: number, rate: number): boolean {
  const k = w.length;
  if (!isIntArray(r, 5) || r[0]! < 0 || r[0]! > k || r[1]! < 0 || r[3]! < 0) return false;
  const m = r[0]!;
  if (m < k && r[2]! < 1) return false;
  const interval = 1000 / rate;
  const start = r[4]! / 1000;
  for (let i = 0; i < k; i++) {
    const c = w[i]!;
    if (!c.decide) {
      c.resolve(i < m);
    } else if (i < m) {
      const d = start + (i + 1) * interval; // how far ahead the bucket's "full again" time is after this caller's token
      c.resolve({ allowed: true, limit: burst, remaining: Math.max(0, Math.floor(burst - d / interval + 1e-9)), retryAfterMs: 0, resetMs: Math.ceil(d) });
    } else {
      c.resolve({ allowed: false, limit: burst, remaining: r[1]!, retryAfterMs: r[2]!, resetMs: r[3]! });
    }
  }
  return true;
}

/** parseDecision reads a full reply: {allowed, remaining, retryAfterMs (-1: never), resetMs}; undefined for a bad shape. */
export function parseDecision(r: unknown, burst: number): LimitDecision | undefined {
  if (!isIntArray(r, 4) || (r[0] !== 0 && r[0] !== 1)) return undefined;
  return { allowed: r[0] === 1, limit: burst, remaining: r[1]!, retryAfterMs: r[2]! < 0 ? Infinity : r[2]!, resetMs: r[3]! };
}

/** parseAllowed reads an answer-only reply: 1 or 0, anything else is a bad shape. */
export function parseAllowed(r: unknown): boolean | undefined {
  return r === 1 ? true : r === 0 ? false : undefined;
}
