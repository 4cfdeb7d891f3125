/**
 * grpc.health.v1: the standard health service (github.com/grpc/grpc/blob/master/doc/health-checking.md),
 * encoded by hand so that bulwark/grpc needs neither .proto files nor a loader.
 *
 * - `GrpcHealth` serves `Check` and `Watch` from a status per service name ('' is the whole server);
 *   `shutdown()` turns every name NOT_SERVING and tells every watcher at once.
 * - `healthServiceDefinition` is the service definition, for servers (`server.addService`) and for
 *   clients (`makeGenericClientConstructor`).
 */
import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import { status, type sendUnaryData, type Server, type ServerUnaryCall, type ServerWritableStream, type ServiceDefinition } from '@grpc/grpc-js';
import { options as checkOptions, type OptionKeys } from '../core/validate.js';
import { ensureGrpcJs } from './version.js';

/** HealthStatus is a serving status of grpc.health.v1. */
export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';
const STATUSES: readonly HealthStatus[] = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];

/** HealthCheckRequest names the service asked about ('' is the whole server). */
export interface HealthCheckRequest {
  service: string;
}
/** HealthCheckResponse is the answer. */
export interface HealthCheckResponse {
  status: HealthStatus;
}

function encodeRequest(r: HealthCheckRequest): Buffer {
  const w = new BinaryWriter();
  if (r.service !== '') w.tag(1, 2).string(r.service);
  return Buffer.from(w.finish());
}

function decodeRequest(b: Buffer): HealthCheckRequest {
  const r = new BinaryReader(b);
  let service = '';
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === 2) service = r.string();
    else r.skip(wire);
  }
  return { service };
}

function encodeResponse(r: HealthCheckResponse): Buffer {
  const n = STATUSES.indexOf(r.status);
  const w = new BinaryWriter();
  if (n > 0) w.tag(1, 0).int32(n);
  return Buffer.from(w.finish());
}

function decodeResponse(b: Buffer): HealthCheckResponse {
  const r = new BinaryReader(b);
  let n = 0;
  while (r.pos < r.len) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === 0) n = r.int32();
    else r.skip(wire);
  }
  return { status: STATUSES[n] ?? 'UNKNOWN' };
}

/** healthServiceDefinition is grpc.health.v1.Health's service definition (Check and Watch). */
export const healthServiceDefinition = {
  Check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: encodeRequest,
    requestDeserialize: decodeRequest,
    responseSerialize: encodeResponse,
    responseDeserialize: decodeResponse,
  },
  Watch: {
    path: '/grpc.health.v1.Health/Watch',
    requestStream: false,
    responseStream: true,
    requestSerialize: encodeRequest,
    requestDeserialize: decodeRequest,
    responseSerialize: encodeResponse,
    responseDeserialize: decodeResponse,
  },
} satisfies ServiceDefinition;

/** GrpcHealthOptions configures a GrpcHealth. */
export interface GrpcHealthOptions {
  /** The status the whole server ('') and each of `services` start with. Defaults to SERVING. */
  initial?: HealthStatus;
  /** Services known from the start, each with the `initial` status. Defaults to none. */
  services?: readonly string[];
}

/** The keys of GrpcHealthOptions, all of them: any other is refused (see `options`). */
const GRPC_HEALTH_KEYS = { initial: true, services: true } as const satisfies OptionKeys<GrpcHealthOptions>;

/** GrpcHealth serves grpc.health.v1 for one server. */
export class GrpcHealth {
  private readonly statuses = new Map<string, HealthStatus>();
  private readonly watchers = new Map<string, Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>>();
  private down = false;

  /** Starts with `initial` for the whole server (''), and each name of `services` SERVING. Defaults to SERVING. */
  constructor(options?: GrpcHealthOptions) {
    ensureGrpcJs();
    const o = checkOptions('GrpcHealth', options, GRPC_HEALTH_KEYS);
    const initial = o.initial ?? 'SERVING';
    if (!STATUSES.includes(initial)) throw new TypeError(`GrpcHealth: initial must be one of ${STATUSES.join(', ')}, got ${String(initial)}`);
    this.statuses.set('', initial);
    for (const s of o.services ?? []) this.statuses.set(s, initial);
  }

  /** setStatus sets the status of `service` ('' is the whole server) and tells its watchers. Ignored after shutdown(), except NOT_SERVING. */
  setStatus(service: string, st: HealthStatus): void {
    if (typeof service !== 'string') throw new TypeError(`GrpcHealth.setStatus: service must be a string, got ${typeof service}`);
    if (!STATUSES.includes(st)) throw new TypeError(`GrpcHealth.setStatus: status must be one of ${STATUSES.join(', ')}, got ${String(st)}`);
    if (this.down && st !== 'NOT_SERVING') return;
    this.statuses.set(service, st);
    for (const w of this.watchers.get(service) ?? []) w.write({ status: st });
  }

  /** status answers the status of `service`, SERVICE_UNKNOWN for a name never set. */
  status(service = ''): HealthStatus {
    return this.statuses.get(service) ?? 'SERVICE_UNKNOWN';
  }

  /**
   * shutdown turns every service NOT_SERVING for good: watchers are told at once, then their streams
   * end (so that the server's own shutdown does not wait on them).
   */
  shutdown(): void {
    for (const s of this.statuses.keys()) this.setStatus(s, 'NOT_SERVING');
    this.down = true;
    for (const set of this.watchers.values()) for (const w of set) w.end();
    this.watchers.clear();
  }

  /** addTo adds the health service to `server`. */
  addTo(server: Pick<Server, 'addService'>): void {
    server.addService(healthServiceDefinition, {
      Check: (call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>, callback: sendUnaryData<HealthCheckResponse>) => {
        const st = this.statuses.get(call.request.service);
        if (st === undefined) callback({ code: status.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
        else callback(null, { status: st });
      },
      Watch: (call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const name = call.request.service;
        let set = this.watchers.get(name);
        if (set === undefined) this.watchers.set(name, (set = new Set()));
        set.add(call);
        call.write({ status: this.status(name) });
        call.on('cancelled', () => {
          set.delete(call);
          if (set.size === 0) this.watchers.delete(name);
        });
      },
    });
  }
}
