/**
 * EtcdPool sends each etcd call to a live member of the cluster and moves on when one does not answer.
 *
 * - Members are used in turn (round robin over those not cooling down), so load spreads over the
 *   cluster and a member that comes back gets its share again as soon as its cooldown ends.
 * - An attempt that fails for the transport (connection refused, reset, no answer within the attempt's
 *   time) puts its member in a cooldown of `cooldownMs`: calls skip it meanwhile, unless every member
 *   is cooling down, then the one that failed longest ago is tried (nothing is refused on a guess).
 * - A member that answered with a transient etcd error (`etcdserver: leader changed`, `no leader`,
 *   `request timed out`: an election is going on) is alive: no cooldown, the call just goes on.
 * - The call retries on the other members within its own deadline (`callTimeoutMs`); once every member
 *   has been tried it waits a little (25 ms doubling to 250 ms: an election takes about one election
 *   timeout, 1 s by default) and goes round again. Only when the deadline passes with no member having
 *   answered does it reject `RegistryUnavailableError`, naming every endpoint and the last error.
 * - An error etcd answers on purpose (lease not found, permission denied) is not retried. A refusal of
 *   who we are (a wrong user or password, no permission on the keys, an untrusted TLS certificate)
 *   rejects RegistryDeniedError at once: no other member would answer otherwise.
 *
 * Why not etcd3's own fault handling: in etcd3 1.1.2 `ConnectionPool.exec` moves to the next host only
 * through the global policy's retry (`withConnection` ends its loop with the error of the first host
 * whose policy ran the call); the defaults are a cockatiel retry (3 attempts, back to back, no deadline
 * of ours) and a per-host `ConsecutiveBreaker(3)` that keeps refusing a returned host for 5 s; all of it
 * runs on Node's timers, which a `ManualClock` cannot drive, and its watch stream picks a random host.
 * So each member gets its own etcd3 client whose policies run the call once, and this file decides.
 */
import { EtcdAuthenticationFailedError, EtcdInvalidAuthTokenError, EtcdPermissionDeniedError, GRPCUnauthenticatedError, isRecoverableError } from 'etcd3';
import { delay, throwIfAborted } from '../core/abort.js';
import type { Clock } from '../core/clock.js';
import { AbortedError, RegistryDeniedError, RegistryUnavailableError } from '../core/errors.js';

/** The wait after every member failed once: 25 ms doubling to 250 ms. */
const ROUND_WAIT_MS = 25;
const ROUND_WAIT_MAX_MS = 250;

/** PoolMember is one etcd endpoint and its client. */
export interface PoolMember<C> {
  readonly endpoint: string;
  readonly client: C;
  /** Clock time until which calls skip this member (0: live). */
  downUntil: number;
  /** Attempts sent to this member. */
  attempts: number;
  /** Attempts that failed on this member. */
  failures: number;
}

/** EtcdPoolOptions configures an EtcdPool. */
export interface EtcdPoolOptions {
  clock: Clock;
  /** Deadline of a whole call, over every attempt. */
  callTimeoutMs: number;
  /** Deadline of one attempt on one member. */
  attemptTimeoutMs: number;
  /** How long a member that failed for the transport is skipped. */
  cooldownMs: number;
}

/** AttemptOptions is what one attempt passes to the etcd3 call: a gRPC deadline (wall time, as gRPC wants). */
export interface AttemptOptions {
  deadline: Date;
}

/** AttemptTimeout is the error of an attempt that got no answer in time (the member counts as not answering). */
class AttemptTimeout extends Error {}

/** EtcdPool runs calls on live members; see the module comment. */
export class EtcdPool<C> {
  readonly members: ReadonlyArray<PoolMember<C>>;
  /** Attempts that failed and were retried on another member (or the same one, later). */
  retried = 0;
  /** The newest etcd revision any answer to `call` carried (0 until one did); see `saw`. */
  revision = 0;
  /** Calls that no member answered within their deadline. */
  failed = 0;
  private readonly clock: Clock;
  private readonly callTimeoutMs: number;
  private readonly attemptTimeoutMs: number;
  private readonly cooldownMs: number;
  private cursor = 0;

  constructor(members: ReadonlyArray<{ endpoint: string; client: C }>, options: EtcdPoolOptions) {
    this.members = members.map((m) => ({ endpoint: m.endpoint, client: m.client, downUntil: 0, attempts: 0, failures: 0 }));
    this.clock = options.clock;
    this.callTimeoutMs = options.callTimeoutMs;
    this.attemptTimeoutMs = options.attemptTimeoutMs;
    this.cooldownMs = options.cooldownMs;
  }

  /** endpoints names every member, for messages. */
  get endpoints(): string {
    return this.members.map((m) => m.endpoint).join(', ');
  }

  /**
   * pick answers the next member not cooling down and not in `exclude`, in turn; when each of those left
   * is cooling down, the one that failed longest ago; undefined when `exclude` holds every member.
   */
  pick(exclude?: ReadonlySet<PoolMember<C>>): PoolMember<C> | undefined {
    const now = this.clock.now();
    const n = this.members.length;
    let fallback: PoolMember<C> | undefined;
    for (let i = 0; i < n; i++) {
      const idx = (this.cursor + i) % n;
      const m = this.members[idx]!;
      if (exclude?.has(m)) continue;
      if (m.downUntil <= now) {
        this.cursor = (idx + 1) % n;
        return m;
      }
      if (fallback === undefined || m.downUntil < fallback.downUntil) fallback = m;
    }
    return fallback;
  }

  /** failedOn records that `member` did not answer (`err`): it cools down unless etcd itself answered. */
  failedOn(member: PoolMember<C>, err: unknown): void {
    member.failures++;
    if (!answeredByEtcd(err)) member.downUntil = this.clock.now() + this.cooldownMs;
  }

  /**
   * saw notes the etcd revision an answer carries (`header.revision`: puts, txns, deletes, ranges, lease
   * grants) in `revision`, the newest one seen. Answers without a header (a keep-alive's TTL) are ignored.
   */
  private saw(value: unknown): void {
    const rev = Number((value as { header?: { revision?: unknown } } | undefined)?.header?.revision);
    if (rev > this.revision) this.revision = rev;
  }

  /** answeredOn records that `member` answered: it is live again. */
  answeredOn(member: PoolMember<C>): void {
    member.downUntil = 0;
  }

  /**
   * call runs `fn` on a live member, retrying on the others within `timeoutMs` (see the module comment).
   * Rejects `AbortedError` when `signal` aborts, `RegistryUnavailableError` when no member answered
   * (or etcd answered an error not worth retrying, kept as `cause`).
   */
  async call<T>(what: string, fn: (client: C, options: AttemptOptions) => Promise<T>, signal?: AbortSignal, timeoutMs = this.callTimeoutMs): Promise<T> {
    throwIfAborted(signal);
    const end = this.clock.now() + timeoutMs;
    let tried: Set<PoolMember<C>> | undefined;
    let last: unknown;
    let wait = ROUND_WAIT_MS;
    for (;;) {
      const left = end - this.clock.now();
      if (left <= 0) break;
      const m = this.pick(tried);
      if (m === undefined) {
        // every member failed once: an election, or the whole cluster down; wait a little and go round again
        if (left <= wait) break;
        await delay(wait, signal, { clock: this.clock });
        wait = Math.min(ROUND_WAIT_MAX_MS, wait * 2);
        tried!.clear();
        continue;
      }
      m.attempts++;
      try {
        const value = await this.attempt(m, what, fn, Math.min(left, this.attemptTimeoutMs), signal);
        m.downUntil = 0;
        this.saw(value);
        return value;
      } catch (err) {
        if (err instanceof AbortedError) throw err;
        if (denied(err)) {
          this.failed++;
          throw new RegistryDeniedError(`etcd at ${m.endpoint} refused ${what}: ${message(err)}`, { cause: err });
        }
        if (!retryable(err)) throw new RegistryUnavailableError(`etcd at ${m.endpoint} refused ${what}: ${message(err)}`, { cause: err });
        this.failedOn(m, err);
        this.retried++;
        last = err;
        (tried ??= new Set()).add(m);
      }
    }
    this.failed++;
    throw new RegistryUnavailableError(`no etcd member answered ${what} within ${timeoutMs} ms (${this.endpoints}): ${message(last)}`, { cause: last });
  }

  /**
   * probe runs `fn` once on `member` alone, within `ms`, and answers whether it answered. A member that
   * did not (whatever the reason: no answer, or etcd's own "no leader" / "request timed out") cools down
   * like a member that failed a call, so that calls and watches leave it until it answers again.
   */
  async probe(member: PoolMember<C>, what: string, fn: (client: C, options: AttemptOptions) => Promise<unknown>, ms: number): Promise<boolean> {
    member.attempts++;
    try {
      await this.attempt(member, what, fn, ms, undefined);
      member.downUntil = 0;
      return true;
    } catch {
      member.failures++;
      member.downUntil = this.clock.now() + this.cooldownMs;
      return false;
    }
  }

  /** attempt runs `fn` on one member, bounded by `ms` of clock time and by `signal`. */
  private attempt<T>(
    m: PoolMember<C>,
    what: string,
    fn: (client: C, options: AttemptOptions) => Promise<T>,
    ms: number,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        this.clock.clearTimeout(timer);
        reject(new AbortedError(`etcd ${what} aborted`, { cause: signal!.reason }));
      };
      const timer = this.clock.setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        reject(new AttemptTimeout(`${m.endpoint} did not answer ${what} within ${Math.round(ms)} ms`));
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      let p: Promise<T>;
      try {
        p = fn(m.client, { deadline: new Date(Date.now() + ms) });
      } catch (err) {
        p = Promise.reject(err);
      }
      p.then(
        (v) => {
          this.clock.clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (err: unknown) => {
          this.clock.clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }
}

/** retryable: the transport failed, the attempt timed out, or etcd answered a transient error (an election). */
export function retryable(err: unknown): boolean {
  return err instanceof AttemptTimeout || (err instanceof Error && isRecoverableError(err));
}

/**
 * denied: etcd refused who we are — authentication failed, permission denied, a token it does not take
 * (etcd3 already retried that one once with a fresh token) — or the TLS handshake found its certificate
 * untrusted (grpc-js reports that as UNAVAILABLE, naming the certificate error in the message).
 */
export function denied(err: unknown): boolean {
  if (err instanceof EtcdAuthenticationFailedError || err instanceof EtcdPermissionDeniedError || err instanceof EtcdInvalidAuthTokenError) return true;
  if (err instanceof GRPCUnauthenticatedError) return true;
  return err instanceof Error && TLS_REFUSAL.test(err.message);
}

/** Node's TLS verification errors (`err.code`s of tls.connect, as grpc-js puts them in its message). */
const TLS_REFUSAL =
  /self[- ]signed certificate|unable to (?:get local issuer|verify the first) certificate|certificate (?:has expired|signature failure)|Hostname\/IP does not match|ERR_TLS_CERT_ALTNAME_INVALID|CERT_HAS_EXPIRED|UNABLE_TO_VERIFY_LEAF_SIGNATURE|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN/;

/** answeredByEtcd: the member is alive and said so (`etcdserver: …`), only the cluster could not serve yet. */
export function answeredByEtcd(err: unknown): boolean {
  return err instanceof Error && err.message.includes('etcdserver:');
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
