/**
 * CallRun is one guarded call's state: what to run, which instances it tried, and the attempt in
 * flight. The first attempt asks the service breaker; each attempt picks an instance (another one than
 * the call's earlier attempts failed on, while any other is available) whose breaker admits it — an
 * instance whose breaker refuses is passed over (the pick is released, not reported: see `refused`),
 * unless the cap or panic keeps it in rotation (`admitPast`) — runs the task under the per-attempt
 * timeout, and reports the outcome to its instance's breaker and the balancer.
 *
 * A call's first attempt, when the bulkhead has a free slot and the call has no signal of its own nor a
 * policy Fallback (`call`), runs on the call's own promise: the run takes the slot (`tryEnter`), admits,
 * picks, runs the task under the shared deadline and, when the task answers, reports and resolves the
 * call — one promise per call, with no Retry, Bulkhead or `then` layer around it. When that attempt
 * fails, the run leaves the slot and hands the call on (`RunContext.afterFirst`): Retry's `retryAfter`
 * runs attempts 2… through `inBulkhead` (the bulkhead's `execute`, with its queue) as the generic path
 * does, and the fallback answers if they fail too. Every other call takes that generic path from its
 * first attempt: Retry and the bulkhead wrap `attempt` (one promise per attempt); ResilientClient wires
 * them. The attempt in flight is its own node in the deadline granule it waits in.
 *
 * The service breaker hears the outcome of the whole call, not of each attempt: a call a retry
 * answered is a success (it is settled by the attempt that answers, or by `ended` when the call fails).
 * Fed per attempt, an SreBreaker (k = 1.5) drops a quarter of the calls to a service whose instances
 * fail half their attempts, although retries answer most of those calls: its job is to shed calls that
 * would fail anyway, and the retry budget already bounds what retries add. Instance breakers and
 * passive health still count every attempt.
 */
import { AbortedError, BreakerOpenError, BulwarkError, FaultInjectedError, PeerError, type TimeoutError } from '../core/errors.js';
import type { FaultInjector } from '../policy/fault.js';
import type { Bulkhead } from '../policy/bulkhead.js';
import type { Retry } from '../policy/retry.js';
import type { FallbackStrategy } from '../policy/fallback.js';
import { clientAttemptChannel } from '../core/diagnostics.js';
import { neverAborted } from '../core/guard.js';
import type { Clock } from '../core/clock.js';
import type { Emitter } from '../core/events.js';
import type { ServiceInstance } from '../registry/types.js';
import type { DeadlineNode, Granule } from '../core/deadline.js';
import type { AttemptTimeout } from './deadlines.js';
import type { ClientCounters } from './stats.js';
import type { AdmissionToken, AttemptEvent, CallBreaker, ClientMeasure, InstanceTask, ServiceBalancer } from './types.js';
import { AnsweredBatch, type PendingBatches } from './answered-batch.js';

export type { AttemptEvent, InstanceTask } from './types.js';

/** ServiceParts is what CallRun needs of the service it calls. */
export interface ServiceParts {
  readonly name: string;
  readonly balancer: ServiceBalancer;
  readonly breaker: CallBreaker;
  /** instanceBreaker returns the breaker of `instance` (one per service and instance id). */
  instanceBreaker(instance: ServiceInstance): CallBreaker;
  /** refusing is true while some instance's breaker has refused and may still be open. Optional. */
  readonly refusing?: boolean;
  /** noteRefusal notes that `id`'s breaker refused a pick. Optional. */
  noteRefusal?(id: string): void;
  /** avoids tells whether picks should leave `id` out up front (its breaker refused and is still open). Optional. */
  avoids?(id: string): boolean;
  /**
   * admitPast answers a token for `instance` when its breaker refuses on evidence but the cap or panic
   * keeps it in rotation (see ServiceState), else undefined. Optional: without it, refusals stand.
   */
  admitPast?(instance: ServiceInstance): AdmissionToken | undefined;
  /** The fault injected into each attempt (an operator's rehearsal), or undefined. Optional. */
  readonly fault?: FaultInjector | undefined;
  /** The bulkhead every attempt runs in. */
  readonly bulkhead: Bulkhead;
  /**
   * The balancer runs on the client's clock: an attempt's report carries its end reading (`CallOutcome.at`),
   * which saves the strategy a clock read. Optional: without it, reports carry none.
   */
  readonly sharesClock?: boolean;
  /** The durations of the service's answered calls not yet handed to the client's measure (made by the first measured one). Optional. */
  answered?: AnsweredBatch | undefined;
}

/** Shared, per-client things a run reports to. */
export interface RunContext {
  readonly clock: Clock;
  readonly counters: ClientCounters;
  readonly attempts: Emitter<AttemptEvent>;
  /** Where attempt and call durations go as plain arguments (ResilientClient.measure), or undefined. */
  measure: ClientMeasure | undefined;
  /** The batches of answered calls' durations not yet handed to `measure` (AnsweredBatch). */
  readonly pending: PendingBatches;
  /**
   * afterFirst carries on a call whose first attempt, run on the call's own promise (`CallRun.call`),
   * failed with `err` (its bulkhead slot left): the retries, then the fallback or the failure. What it
   * answers (or throws) settles the call.
   */
  afterFirst<T>(run: CallRun<T>, err: unknown): T | PromiseLike<T>;
}

/** What `CallRun.begin` answers when an instance was picked and admitted. */
const ADMITTED: unique symbol = Symbol('admitted');

// The resolvers of the promise being made: `new Promise(capture)` makes no executor closure per call.
let capturedResolve: ((value: never) => void) | undefined;
let capturedReject: ((err: unknown) => void) | undefined;
function capture(resolve: (value: never) => void, reject: (err: unknown) => void): void {
  capturedResolve = resolve;
  capturedReject = reject;
}

/**
 * ResultFailure is thrown by an attempt whose task answered a value that counts as a failure (an HTTP
 * 5xx): it fails the attempt for breakers, balancer and retry, and carries the value so that the last
 * one can still be answered when no retry or fallback takes over.
 */
export class ResultFailure<T> extends PeerError {
  constructor(
    message: string,
    readonly value: T,
    status: number,
  ) {
    super(message, { status });
  }
}

/** ResultJudge says whether a value the task answered is a failure: false if not, else a status for the message. */
export type ResultJudge<T> = (value: T) => number | false;

/** The outcome reported for a pick that was not run, to balancers without `release`. */
const NOT_RUN = Object.freeze({ ok: true, latencyMs: 0 });

/** Picks one attempt may make to find an instance whose breaker admits it. */
const MAX_PICKS = 3;

/** The outcome reported for a refused pick, to balancers without `release`: a failure, never a 0 ms success that would draw traffic. */
const REFUSED = Object.freeze({ ok: false, latencyMs: 0 });

/**
 * refused ends a pick whose instance breaker refused it. It is released, not reported as a failure:
 * a refusal is no new evidence about the instance — the failures that opened the breaker were each
 * reported already, and the number of refusals grows with our traffic, not with the instance's
 * behaviour. Counting them would eject the instance on top of its open breaker, lengthen every later
 * ejection (outlier detection multiplies by times ejected), and hold it out of rotation past the
 * breaker's own half-open probe, so the two would disagree about when it may come back. Steering is
 * the balancer's job: the next pick excludes the refused instance and the strategy chooses among the
 * others (P2C draws its two choices from them). Balancers without `release` get a failure with no
 * latency instead (see REFUSED).
 */
function refused(balancer: ServiceBalancer, instance: ServiceInstance): void {
  if (balancer.release !== undefined) balancer.release(instance);
  else balancer.report(instance, REFUSED);
}

/** notRun ends a pick whose call was not made. */
function notRun(balancer: ServiceBalancer, instance: ServiceInstance): void {
  if (balancer.release !== undefined) balancer.release(instance);
  else balancer.report(instance, NOT_RUN);
}

/** drop lets go of a token without counting the call as a success or a failure. */
function drop(token: AdmissionToken): void {
  token.release();
}

/** Errors that failed an attempt without counting against the instance: retrying them cannot help. */
const notRetryable = new WeakSet<object>();

/** isRetryable is false for errors the attempt did not count as the instance's failure. */
export function isRetryable(err: unknown): boolean {
  return err === null || typeof err !== 'object' || !notRetryable.has(err);
}

/** CallRun carries one call through its attempts. */
export class CallRun<T> implements DeadlineNode {
  /** Ids of the instances earlier attempts failed on (allocated at the first failure). */
  private tried: string[] | undefined;
  private attemptsMade = 0;
  // The attempt in flight (one at a time per call): what it runs on, its tokens, and its promise.
  private instance: ServiceInstance | undefined;
  private token: AdmissionToken | undefined;
  /** The service breaker's admission of the whole call (taken by the first attempt, settled once). */
  private serviceToken: AdmissionToken | undefined;
  /** Some attempt of this call failed (counted against its instance). */
  private failedAny = false;
  private start = 0;
  /** When the call's first attempt started (-1: none has): where a call's duration for ClientMeasure starts. */
  firstStart = -1;
  private settled = true;
  /** The first attempt runs on the call's own promise, in a slot the run took (`call`): settling it settles the call. */
  private ownSlot = false;
  /** The resolvers of the attempt's promise or, while `ownSlot`, of the call's. */
  private resolveAttempt: ((value: T) => void) | undefined;
  private rejectAttempt: ((err: unknown) => void) | undefined;
  /** DeadlineNode fields: the granule this attempt waits in, and its neighbours there. */
  granule: Granule | undefined;
  deadlinePrev: DeadlineNode | undefined;
  deadlineNext: DeadlineNode | undefined;

  constructor(
    private readonly ctx: RunContext,
    readonly service: ServiceParts,
    private readonly fn: InstanceTask<T>,
    private readonly key: string | undefined,
    private readonly timeout: AttemptTimeout | undefined,
    private readonly callerSignal: AbortSignal | undefined,
    private readonly isFailure: ((err: unknown) => boolean) | undefined,
    private readonly judge: ResultJudge<T> | undefined,
    /** The call's Retry (undefined: no retry), for `RunContext.afterFirst`. */
    readonly retry: Retry | undefined,
    /** The call's fallback function (undefined: none), for `RunContext.afterFirst`. */
    readonly fallback: FallbackStrategy<T> | undefined,
  ) {}

  /** has is the `exclude` set handed to the balancer: the instances earlier attempts failed on or were refused by. */
  has(id: string): boolean {
    return (this.tried !== undefined && this.tried.includes(id)) || this.service.avoids?.(id) === true;
  }

  /** The `inBulkhead` task, made for the calls that take the generic path or retry. */
  private bulkheadTask: ((signal: AbortSignal) => Promise<T>) | undefined;

  /**
   * inBulkhead runs one attempt in the service's bulkhead: what the call runs, through Retry when it
   * retries. An attempt's signal that never aborts needs no listener there (no options object made).
   */
  get inBulkhead(): (signal: AbortSignal) => Promise<T> {
    if (this.bulkheadTask === undefined) {
      const attempt = (signal: AbortSignal): Promise<T> => this.attempt(signal);
      this.bulkheadTask = (signal) => this.service.bulkhead.execute(attempt, signal === neverAborted ? undefined : { signal });
    }
    return this.bulkheadTask;
  }

  /**
   * call runs the call's first attempt on the call's own promise, in a bulkhead slot the caller took
   * (`Bulkhead.tryEnter`), and answers that promise: the attempt's value settles the call; its failure
   * goes on to `RunContext.afterFirst` (retries, fallback). For calls without a signal of their own.
   */
  call(): Promise<T> {
    const call = new Promise<T>(capture);
    this.resolveAttempt = capturedResolve as (value: T) => void;
    this.rejectAttempt = capturedReject;
    this.ownSlot = true;
    const refused = this.begin();
    if (refused !== ADMITTED) this.firstFailed(refused);
    else this.launch(neverAborted);
    return call;
  }

  /** attempt runs one attempt (in a bulkhead slot); Retry calls it again, through inBulkhead, on a retryable failure. */
  private attempt(signal: AbortSignal): Promise<T> {
    const refused = this.begin();
    if (refused !== ADMITTED) return Promise.reject(refused);
    const attempt = new Promise<T>(capture);
    this.resolveAttempt = capturedResolve as (value: T) => void;
    this.rejectAttempt = capturedReject;
    this.launch(signal);
    return attempt;
  }

  /**
   * begin starts an attempt: the first one asks the service breaker, each one picks an instance whose
   * breaker admits it. Answers ADMITTED, or the error that ends the attempt before it runs.
   */
  private begin(): unknown {
    const { service, ctx } = this;
    if (this.attemptsMade++ > 0) ctx.counters.retries++;
    else {
      try {
        this.serviceToken = service.breaker.admit();
      } catch (err) {
        if (err instanceof BreakerOpenError) ctx.counters.breakerRejections++;
        return err;
      }
    }
    let picked: ServiceInstance | undefined;
    let token: AdmissionToken | undefined;
    // Pick an instance whose breaker admits the attempt; one that refuses is passed over (it was not
    // called: the next pick goes elsewhere), up to MAX_PICKS picks — unless the cap or panic keeps it
    // in rotation, when the call goes through its open breaker.
    for (let picks = 0; token === undefined; picks++) {
      const refusing = service.refusing === true;
      try {
        picked = service.balancer.pick(this.key, this.tried === undefined && !refusing ? undefined : this);
      } catch (err) {
        return err; // nothing ran: the service breaker hears of the call when it ends
      }
      try {
        token = (refusing ? service.admitPast?.(picked) : undefined) ?? service.instanceBreaker(picked).admit();
      } catch (err) {
        if (!(err instanceof BreakerOpenError)) {
          notRun(service.balancer, picked);
          return err;
        }
        // Passed over: the next pick excludes it (and the strategy chooses among the others), and so
        // do later calls' first picks while its breaker stays open (no refusal per call) — unless,
        // counted out now, it is one too many for the cap, or the service is in panic.
        service.noteRefusal?.(picked.id);
        token = service.admitPast?.(picked);
        if (token !== undefined) break;
        refused(service.balancer, picked);
        ctx.counters.breakerRejections++;
        if (ctx.attempts.hasListeners || clientAttemptChannel.hasSubscribers) {
          this.emitAttempt({ service: service.name, instance: picked, outcome: 'rejected', latencyMs: 0, error: err });
        }
        if (picks + 1 >= MAX_PICKS || (this.tried ??= []).includes(picked.id)) return err;
        this.tried.push(picked.id);
      }
    }
    this.instance = picked!;
    this.token = token!;
    ctx.counters.attempts++;
    const start = (this.start = ctx.clock.now());
    if (this.firstStart === -1) this.firstStart = start;
    return ADMITTED;
  }

  /** launch runs the task of the attempt `begin` admitted, under its timeout; its outcome settles the attempt. */
  private launch(signal: AbortSignal): void {
    const n = this.attemptsMade;
    this.settled = false;
    const timeout = this.timeout;
    // An injected fault runs inside the attempt, under its timeout: what it delays can time out, what
    // it fails counts against the instance (see policy/fault.ts).
    const fault = this.service.fault;
    let result: T | PromiseLike<T>;
    try {
      if (timeout === undefined) result = fault === undefined ? this.fn(this.instance!, signal) : fault.run(this.fn, this.instance!, signal);
      else if (signal === neverAborted) {
        // Nobody else can abort this attempt: share the deadline of its granule (core/deadline.ts);
        // the deadlines run on the client's clock, so the reading just taken dates it.
        const shared = timeout.deadlines.join(this, this.start);
        result = fault === undefined ? this.fn(this.instance!, shared) : fault.run(this.fn, this.instance!, shared);
      } else result = timeout.policy.execute((this.task ??= (s: AbortSignal) => this.runTask(s)), { signal });
    } catch (err) {
      this.onError(err, n);
      return;
    }
    if (result !== null && typeof (result as PromiseLike<T>)?.then === 'function') {
      // The handlers carry the attempt's number: a task that settles after its deadline must not
      // settle the retry that followed.
      (result as PromiseLike<T>).then(
        (value) => this.onValue(value, n),
        (err: unknown) => this.onError(err, n),
      );
    } else this.onValue(result as T, n);
  }

  /** task is what the policy Timeout runs (`runTask`), made for the calls that take that path: ones with a caller's signal. */
  private task: ((signal: AbortSignal) => T | PromiseLike<T>) | undefined;

  /** runTask runs the caller's function on the instance this attempt picked (through the fault, if any). */
  private runTask(signal: AbortSignal): T | PromiseLike<T> {
    const fault = this.service.fault;
    return fault === undefined ? this.fn(this.instance!, signal) : fault.run(this.fn, this.instance!, signal);
  }

  /** onValue settles the attempt with the task's value (or a ResultFailure when the judge says so). */
  private onValue(value: T, n: number): void {
    if (this.settled || n !== this.attemptsMade) return;
    this.settled = true;
    this.granule?.remove(this);
    const status = this.judge === undefined ? false : this.judge(value);
    if (status === false) {
      this.finish(undefined);
      if (this.ownSlot) {
        // The call's first attempt answered: the call succeeded.
        this.ownSlot = false;
        this.service.bulkhead.leave();
        this.ctx.counters.succeeded++; // measured as it answered (ClientMeasure.answered)
      }
      this.resolveAttempt!(value);
      return;
    }
    const failure = new ResultFailure(`${this.service.name}/${this.instance!.id} answered ${status}`, value, status);
    this.finish(failure);
    this.fail(failure);
  }

  /** onError settles the attempt with the task's failure. */
  private onError(err: unknown, n: number): void {
    if (this.settled || n !== this.attemptsMade) return;
    this.settled = true;
    this.granule?.remove(this);
    const reason = err ?? new Error('task rejected without a reason');
    this.finish(reason);
    this.fail(reason);
  }

  /** onDeadline is called by the granule at the deadline, if the attempt is still in flight. */
  onDeadline(err: TimeoutError): void {
    if (this.settled) return;
    this.settled = true;
    this.granule = undefined;
    this.finish(err);
    this.fail(err);
  }

  /** fail rejects the attempt in flight with `err` or, when it is the call's first on its own promise, carries the call on. */
  private fail(err: unknown): void {
    if (this.ownSlot) this.firstFailed(err);
    else this.rejectAttempt!(err);
  }

  /**
   * firstFailed leaves the slot of the call's first attempt, which ended with `err` (before it ran, or
   * failed), and settles the call with what `RunContext.afterFirst` answers: retries, fallback, failure.
   */
  private firstFailed(err: unknown): void {
    this.ownSlot = false;
    this.service.bulkhead.leave();
    // Taken first: the retries' attempts set their own.
    const resolve = this.resolveAttempt!;
    const reject = this.rejectAttempt!;
    try {
      resolve(this.ctx.afterFirst(this, err) as T);
    } catch (e) {
      reject(e);
    }
  }

  /** finish reports one attempt's outcome to the breakers, the balancer, the counters and listeners. */
  private finish(err: unknown): void {
    const { ctx } = this;
    const instance = this.instance!;
    const token = this.token!;
    const end = ctx.clock.now();
    const latencyMs = end - this.start;
    // An injected fault always counts: the rehearsal is of the instance failing.
    const failed =
      err !== undefined &&
      !this.byCaller(err) &&
      (this.isFailure === undefined || err instanceof ResultFailure || err instanceof FaultInjectedError || this.isFailure(err));
    if (failed) {
      ctx.counters.failedAttempts++;
      token.failure(err);
      this.failedAny = true; // the service breaker hears of it if the call fails in the end (`ended`)
      (this.tried ??= []).push(instance.id); // a retry must go elsewhere
    } else if (err !== undefined && this.byCaller(err)) {
      // The caller gave up: the instance is neither blamed nor credited, nor the service.
      drop(token);
      this.endService(undefined, false);
    } else {
      token.success();
      this.endService(undefined, true); // answered (or the caller's own error): the call ends here
      // Not the instance's fault (the caller's mistake or cancellation): another instance would say the same.
      if (err !== null && typeof err === 'object') notRetryable.add(err);
    }
    const at = this.service.sharesClock === true ? end : undefined;
    this.service.balancer.report(instance, failed ? { ok: false, latencyMs, at } : { ok: true, latencyMs, at });
    const measure = ctx.measure;
    if (measure !== undefined) {
      const service = this.service;
      if (err === undefined) {
        // An attempt that answers ends its call as succeeded: both durations noted in the service's
        // batch, handed to the measure when it is full or read (AnsweredBatch), no call into it here.
        const b = (service.answered ??= new AnsweredBatch(service.name));
        const n = b.n;
        if (n === 0 && !b.listed) ctx.pending.add(b);
        b.durations[n] = latencyMs;
        b.durations[n + 1] = end - this.firstStart;
        b.n = n + 2;
        if (n + 2 === b.durations.length) b.flush(measure);
      } else {
        service.answered?.flush(measure); // the ok series counts in call order
        measure.attempt(service.name, failed, latencyMs);
      }
    }
    if (ctx.attempts.hasListeners || clientAttemptChannel.hasSubscribers) {
      this.emitAttempt(
        failed
          ? { service: this.service.name, instance, outcome: 'error', latencyMs, error: err }
          : { service: this.service.name, instance, outcome: 'ok', latencyMs },
      );
    }
  }

  /**
   * ended settles the service breaker's admission of a call that failed in the end: a failure if
   * some attempt failed on an instance, else released (nothing ran, or nothing counted).
   */
  ended(err: unknown): void {
    if (this.serviceToken !== undefined) this.endService(err, false);
  }

  /** endService settles the service admission once: success, failure (some attempt failed) or release. */
  private endService(err: unknown, ok: boolean): void {
    const t = this.serviceToken;
    if (t === undefined) return;
    this.serviceToken = undefined;
    if (ok) t.success();
    else if (this.failedAny && !(this.callerSignal?.aborted === true)) t.failure(err);
    else drop(t);
  }

  /** emitAttempt tells the client's `onAttempt` listeners and `bulwark:client:attempt` subscribers about an attempt. */
  private emitAttempt(event: AttemptEvent): void {
    if (clientAttemptChannel.hasSubscribers) clientAttemptChannel.publish(event);
    this.ctx.attempts.emit(event);
  }

  /** byCaller tells whether `err` is the caller's own cancellation rather than the instance's failure. */
  private byCaller(err: unknown): boolean {
    return this.callerSignal?.aborted === true || (err instanceof BulwarkError && err.code === AbortedError.code);
  }
}
