/**
 * HealthProber: the client side of grpc.health.v1 for one instance address. It follows `Watch` (the
 * server pushes each change) and falls back to polling `Check` every `intervalMs` when the server does
 * not implement Watch. Only NOT_SERVING (or SERVICE_UNKNOWN / NOT_FOUND for the service asked about)
 * takes an instance out of rotation: an unreachable server is the connection's business, not health's.
 */
import {
  credentials as grpcCredentials,
  makeGenericClientConstructor,
  status,
  type ChannelCredentials,
  type Client,
  type ClientReadableStream,
} from '@grpc/grpc-js';
import type { Clock, TimerHandle } from '../core/clock.js';
import { healthServiceDefinition, type HealthCheckResponse, type HealthStatus } from './health.js';

/** HealthCheckOptions configures the active health checks of a GrpcDiscovery. */
export interface HealthCheckOptions {
  /** The service name asked about ('' is the whole server). Defaults to ''. */
  service?: string;
  /** How often Check is polled when the server answers UNIMPLEMENTED to Watch, and how long after a broken Watch it starts again, in ms. Defaults to 5 000. */
  intervalMs?: number;
  /** The deadline of each Check, in ms. Defaults to 1 000. */
  timeoutMs?: number;
  /** Use Watch where the server implements it. Defaults to true. */
  watch?: boolean;
}

/** Defaults for HealthCheckOptions. */
export const healthCheckDefaults = Object.freeze({ service: '', intervalMs: 5_000, timeoutMs: 1_000, watch: true });

const HealthClient = makeGenericClientConstructor(healthServiceDefinition, 'grpc.health.v1.Health');

interface HealthClientCalls extends Client {
  Check(req: { service: string }, options: { deadline: number }, cb: (err: { code: number } | null, res?: HealthCheckResponse) => void): void;
  Watch(req: { service: string }): ClientReadableStream<HealthCheckResponse>;
}

/** HealthProber checks one address and calls `onChange(serving)` when it enters or leaves rotation. */
export class HealthProber {
  private readonly client: HealthClientCalls;
  private stream: ClientReadableStream<HealthCheckResponse> | undefined;
  private timer: TimerHandle | undefined;
  private closed = false;
  private useWatch: boolean;
  /** serving is false while the server says NOT_SERVING (or does not know the service). */
  serving = true;
  /** last is the last status the server answered. */
  last: HealthStatus | undefined;

  constructor(
    address: string,
    private readonly o: Required<HealthCheckOptions>,
    private readonly clock: Clock,
    private readonly onChange: (serving: boolean) => void,
    creds: ChannelCredentials = grpcCredentials.createInsecure(),
  ) {
    this.client = new HealthClient(address, creds) as unknown as HealthClientCalls;
    this.useWatch = o.watch;
    this.start();
  }

  private set(st: HealthStatus): void {
    this.last = st;
    const serving = st !== 'NOT_SERVING' && st !== 'SERVICE_UNKNOWN';
    if (serving !== this.serving) {
      this.serving = serving;
      this.onChange(serving);
    }
  }

  private start(): void {
    if (this.closed) return;
    if (this.useWatch) this.watch();
    else this.check();
  }

  private later(): void {
    if (this.closed) return;
    this.timer = this.clock.setTimeout(() => this.start(), this.o.intervalMs);
    this.timer.unref();
  }

  private watch(): void {
    const s = this.client.Watch({ service: this.o.service });
    this.stream = s;
    s.on('data', (r: HealthCheckResponse) => this.set(r.status));
    s.on('error', (err: { code?: number }) => {
      if (this.stream !== s) return;
      this.stream = undefined;
      if (err.code === status.UNIMPLEMENTED) {
        this.useWatch = false;
        this.check();
        return;
      }
      this.later();
    });
    s.on('end', () => {
      if (this.stream !== s) return;
      this.stream = undefined;
      this.later();
    });
  }

  private check(): void {
    this.client.Check({ service: this.o.service }, { deadline: Date.now() + this.o.timeoutMs }, (err, res) => {
      if (this.closed) return;
      if (err === null && res !== undefined) this.set(res.status);
      else if (err?.code === status.NOT_FOUND) this.set('SERVICE_UNKNOWN');
      this.later();
    });
  }

  /** close stops checking. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.clock.clearTimeout(this.timer);
    const s = this.stream;
    this.stream = undefined;
    s?.cancel();
    this.client.close();
  }
}
