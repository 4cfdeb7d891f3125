/**
 * Pass: the shedder and breaker tokens of one admitted request, completed exactly once when its
 * response closes — finished, or cut off by a client that went away. A response checked by two guards
 * (an app-wide one and a route's own) carries a chain of passes, all finished by one 'close' listener.
 */
import type { ServerResponse } from 'node:http';
import { AbortedError, withoutStack } from '../core/errors.js';
import type { AdmissionToken } from '../core/admission.js';
import type { TokenSink } from './types.js';

const kPass = Symbol('bulwark.http.pass');
const CLIENT_GONE = withoutStack(() => new AbortedError('client closed the connection before the response finished'));

/** Pass holds the tokens of one admitted request. */
export class Pass {
  shed: AdmissionToken | undefined;
  breaker: AdmissionToken | undefined;
  error: unknown = undefined;
  done = false;
  /** admitted: every check passed and the request went on to the handler (else a close releases the tokens). */
  admitted = false;
  /** The pass of another guard on the same response (an app-wide guard and a route's own): finished with this one. */
  prev: Pass | undefined;
  constructor(readonly guard: TokenSink) {}

  /** attach makes `res` finish this pass (and any pass already on it) when it closes. */
  attach(res: ServerResponse): void {
    const prev = (res as WithPass)[kPass];
    if (prev === undefined) res.on('close', onClose);
    else this.prev = prev;
    (res as WithPass)[kPass] = this;
  }

  /**
   * release gives back the tokens of a request that will not be handled (a later check refused it, or
   * the client left while an asynchronous limiter decided or an injected fault delayed it): `release()`,
   * neither a success nor a failure. Only a fault's delay comes after the breaker's admission.
   */
  release(): void {
    if (this.done) return;
    this.done = true;
    if (this.breaker !== undefined) this.guard.complete('breaker', this.breaker, undefined, undefined);
    if (this.shed !== undefined) this.guard.complete('shedder', this.shed, undefined, undefined);
  }

  /** finish completes the tokens by the response's end (see docs/http.md for the outcome table). */
  finish(finished: boolean, status: number): void {
    this.prev?.finish(finished, status);
    if (this.done) return;
    if (!this.admitted) {
      // Closed while an asynchronous limiter was still deciding: the handler never ran.
      this.release();
      return;
    }
    this.done = true;
    if (this.breaker !== undefined) {
      // The status judges: an error the framework answered 4xx (validation, not found) is the client's fault.
      const ok = finished && status < 500;
      const why = ok ? undefined : (this.error ?? (finished ? statusError(status) : CLIENT_GONE));
      this.guard.complete('breaker', this.breaker, ok, why);
    }
    if (this.shed !== undefined) this.guard.complete('shedder', this.shed, finished && status !== 503, undefined);
  }
}

function statusError(status: number): Error {
  return withoutStack(() => new Error(`response status ${status}`));
}

type WithPass = ServerResponse & { [kPass]?: Pass };

function onClose(this: WithPass): void {
  this[kPass]?.finish(this.writableFinished, this.statusCode);
}

/** noteError records `err` as the handler's failure of the request answered on `res` (for the breaker). */
export function noteError(res: ServerResponse, err: unknown): void {
  for (let p = (res as WithPass)[kPass]; p !== undefined; p = p.prev) {
    if (p.error === undefined) p.error = err ?? new Error('handler failed');
  }
}
