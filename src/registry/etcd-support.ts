/**
 * The small seam between EtcdRegistry and the `etcd3` client: a client built for fail-fast use (our own
 * deadlines and retries instead of etcd3's — its `dialTimeout` is documented but not applied, microsoft/etcd3
 * #137, and its default host breaker would keep refusing for 5 s after etcd returns), calls bounded by a
 * deadline that reject `RegistryUnavailableError` naming the endpoint, and the key/value codec.
 */
import { Etcd3, type IKeyValue, type IOptions } from 'etcd3';
import { RegistryUnavailableError } from '../core/errors.js';
import type { ServiceInstance } from './types.js';
import { checkInstance } from './validate.js';

/** gRPC reconnects fast after etcd returns (gRPC's default first backoff is 1 s, growing to 120 s). */
const GRPC_OPTIONS: NonNullable<IOptions['grpcOptions']> = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 5_000,
};

/** A fault-handling policy that runs the call once: retries and breaking are ours to decide. */
const once = {
  execute: <T>(fn: (ctx: { signal: AbortSignal; attempt: number }) => PromiseLike<T> | T) =>
    Promise.resolve().then(() => fn({ signal: new AbortController().signal, attempt: 1 })),
};

/** Watch streams reconnect after 50 ms, doubling to at most 500 ms (etcd3's default grows to 30 s). */
function watchBackoff(ms: number): { duration: number; next(): ReturnType<typeof watchBackoff> } {
  return { duration: ms, next: () => watchBackoff(Math.min(500, ms * 2)) };
}

/** createClient builds the etcd3 client EtcdRegistry uses. */
export function createClient(hosts: string[]): Etcd3 {
  const options: IOptions = {
    hosts,
    grpcOptions: GRPC_OPTIONS,
    faultHandling: { host: () => once as never, global: once as never, watchBackoff: watchBackoff(50) as never },
  };
  return new Etcd3(options);
}

/** Caller runs etcd calls under a deadline; every failure becomes RegistryUnavailableError naming the endpoint. */
export class Caller {
  constructor(
    readonly endpoint: string,
    readonly timeoutMs: number,
  ) {}

  /** call runs `fn` with a gRPC deadline and its own timer (a stopped server may never answer). */
  call<T>(what: string, fn: (options: { deadline: Date }) => Promise<T>): Promise<T> {
    const deadline = new Date(Date.now() + this.timeoutMs);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new RegistryUnavailableError(`etcd at ${this.endpoint} did not answer ${what} within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      let p: Promise<T>;
      try {
        p = fn({ deadline });
      } catch (err) {
        p = Promise.reject(err);
      }
      p.then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(this.unavailable(what, err));
        },
      );
    });
  }

  /** unavailable wraps `err` (kept as cause) in a RegistryUnavailableError naming the endpoint. */
  unavailable(what: string, err: unknown): RegistryUnavailableError {
    if (err instanceof RegistryUnavailableError) return err;
    const msg = err instanceof Error ? err.message : String(err);
    return new RegistryUnavailableError(`etcd at ${this.endpoint} unavailable (${what}): ${msg}`, { cause: err });
  }
}

/** rangeEnd is the end of the key range holding every key that starts with `prefix`. */
export function rangeEnd(prefix: string): Buffer {
  const b = Buffer.from(prefix);
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i]! < 0xff) {
      const out = Buffer.from(b.subarray(0, i + 1));
      out[i]!++;
      return out;
    }
  }
  return Buffer.from([0]);
}

/** Decoded is one key from etcd: the instance, or why the value was skipped. */
export type Decoded = { instance: ServiceInstance; error?: undefined } | { instance?: undefined; error: string };

/** decode reads `<prefix>/<name>/<id>` → JSON ServiceInstance; a value of the wrong shape answers `error`. */
export function decode(prefix: string, kv: IKeyValue): Decoded {
  const key = kv.key.toString();
  const rest = key.startsWith(prefix) ? key.slice(prefix.length) : '';
  const parts = rest.split('/');
  if (parts.length !== 2) return { error: `key ${key} is not ${prefix}<name>/<id>` };
  let value: unknown;
  try {
    value = JSON.parse(kv.value.toString());
  } catch (err) {
    return { error: `value of ${key} is not JSON: ${(err as Error).message}` };
  }
  try {
    const instance = checkInstance('etcd value', value);
    if (instance.name !== parts[0] || instance.id !== parts[1]) return { error: `value of ${key} names ${instance.name}/${instance.id}` };
    return { instance };
  } catch (err) {
    return { error: `value of ${key} is not a service instance: ${(err as Error).message}` };
  }
}

/** Warner reports each bad value once (per key and revision), bounded. */
export class Warner {
  private readonly seen = new Set<string>();
  constructor(private readonly sink: (message: string) => void) {}

  warn(kv: IKeyValue, message: string): void {
    const id = `${kv.key.toString()}@${kv.mod_revision}`;
    if (this.seen.has(id)) return;
    if (this.seen.size >= 4096) this.seen.clear();
    this.seen.add(id);
    try {
      this.sink(`bulwark EtcdRegistry: skipped ${message}`);
    } catch {
      // a throwing warning sink must not break the registry
    }
  }
}

/** defaultWarning emits a process warning. */
export function defaultWarning(message: string): void {
  process.emitWarning(message, { code: 'BULWARK_REGISTRY_BAD_VALUE' });
}
