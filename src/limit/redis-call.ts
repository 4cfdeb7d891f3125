/**
 * The script calls RedisRescue runs for the Redis limiters: the RedisCall contract, the pending call
 * that waits on Redis (a call that is its own FIFO node), one made of functions, and small helpers for
 * Redis replies and errors. RedisRescue (rescue.ts) decides where each call is answered.
 */
/**
 * RedisCall is one script call that RedisRescue runs for a limiter: how to ask Redis, how to answer its
 * callers from the reply, and how to answer them in process.
 */
export interface RedisCall {
  /** send asks Redis (EVALSHA). */
  send(): Promise<unknown>;
  /** resend asks again after Redis answered `send` with NOSCRIPT (EVAL, which also caches the script on that node). */
  resend?(): Promise<unknown>;
  /** answer answers the callers from a reply and says how many decisions it made on Redis (-1 for a bad shape: nobody answered). */
  answer(reply: unknown): number;
  /** local answers the callers in process. */
  local(): void;
}

/**
 * Pending is a RedisCall and its place among the calls waiting on Redis (the FIFO of pending calls,
 * linked through `next`); RedisRescue.start fills in the deadline, part and count when it sends it.
 * The call and its FIFO node are one object, so that a lone caller's call is one allocation (see
 * Waiter in redis-token-batches.ts) rather than a node pointing at a call.
 */
export abstract class Pending implements RedisCall {
  done = false;
  next: Pending | undefined = undefined;
  /** When the call fails if Redis has not answered (clock time). */
  deadline = 0;
  /** The call's part: its key's slot on a Cluster, 0 on a single Redis. */
  slot = 0;
  /** The master the call went to (`host:port` from the slot map; '' on a single Redis). */
  node = '';
  /** How many decisions this call carries (a batch carries several). */
  count = 1;

  abstract send(): Promise<unknown>;
  abstract resend?(): Promise<unknown>;
  abstract answer(reply: unknown): number;
  abstract local(): void;

  /** rescue answers the call's callers from the in-process limiter. */
  rescue(): void {
    this.done = true;
    this.local();
  }
}

/** A Pending call made of functions (for calls that are not on a lone caller's path). */
export class FnCall extends Pending {
  constructor(
    readonly send: () => Promise<unknown>,
    readonly answer: (reply: unknown) => number,
    readonly local: () => void,
    readonly resend: (() => Promise<unknown>) | undefined,
  ) {
    super();
  }
}

/** isNoScript tells whether `err` is Redis's NOSCRIPT (the node does not have the script cached). */
export function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/** preview is a short text of an unexpected reply, for error messages. */
export function preview(reply: unknown): string {
  try {
    return (JSON.stringify(reply) ?? String(reply)).slice(0, 120);
  } catch {
    return Object.prototype.toString.call(reply);
  }
}

/** describe is an error's name and message, for warnings. */
export function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
