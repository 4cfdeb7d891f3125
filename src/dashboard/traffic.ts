/**
 * traffic reads a component's calls and errors (monotonic totals) from its status, by kind: what the
 * dashboard turns into calls/s and errors/s. Kinds it does not know count nothing.
 */

type Status = Record<string, unknown>;

const num = (s: Status, k: string): number => (typeof s[k] === 'number' ? (s[k] as number) : 0);

/** traffic answers [calls, errors] of a component's status, or undefined when it counts no calls. */
export function traffic(kind: string, status: unknown): [number, number] | undefined {
  if (status === null || typeof status !== 'object') return undefined;
  const s = status as Status;
  switch (kind) {
    case 'ResilientClient':
      // Errors are its attempts that failed or were refused (breakers, bulkhead): what its guards absorbed
      // — a retry or a fallback may still have answered the call — not only the calls that failed in the end.
      return [num(s, 'calls'), num(s, 'failedAttempts') + num(s, 'breakerRejections') + num(s, 'bulkheadRejections')];
    case 'CircuitBreaker':
    case 'SreBreaker':
      return [num(s, 'successfulCalls') + num(s, 'failedCalls') + num(s, 'notPermittedCalls'), num(s, 'failedCalls') + num(s, 'notPermittedCalls')];
    case 'HttpGuard': {
      const refused = num(s, 'limited') + num(s, 'shed') + num(s, 'broken');
      return [num(s, 'passed') + num(s, 'skipped') + refused, refused];
    }
    case 'GrpcServerGuard':
    case 'GrpcClientGuard':
      return [num(s, 'calls'), num(s, 'refused')];
    case 'Group':
      return [num(s, 'gets'), num(s, 'localLoadErrs') + num(s, 'peerErrors')];
    case 'TokenLimiter':
    case 'PeriodLimiter':
    case 'KeyedLimiter':
    case 'RedisTokenLimiter':
    case 'RedisPeriodLimiter':
      return [num(s, 'allowed') + num(s, 'limited'), num(s, 'limited')];
    case 'AdaptiveShedder':
      return [num(s, 'passed') + num(s, 'dropped'), num(s, 'dropped')];
    default:
      return undefined;
  }
}
