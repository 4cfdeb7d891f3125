/**
 * A greeter service for the gRPC tests, defined in code (JSON bodies), so no .proto file is needed:
 * `SayHello({ name, delayMs?, fail?, spinMs? })` answers `{ message, server }`; `delayMs` waits (on a
 * timer) before answering, `spinMs` burns the CPU that long in 5 ms slices (an event loop saturated by
 * a CPU-bound handler), `fail` answers that status code instead.
 */
import {
  makeGenericClientConstructor,
  Server,
  ServerCredentials,
  status,
  type Client,
  type ServiceDefinition,
  type ServerUnaryCall,
  type sendUnaryData,
  type ServerOptions,
  type CallOptions,
  type ServiceError,
  Metadata,
} from '@grpc/grpc-js';

export interface HelloRequest {
  name: string;
  delayMs?: number;
  spinMs?: number;
  fail?: number;
}
export interface HelloReply {
  message: string;
  server: string;
}

const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));
const parse = (b: Buffer): never => JSON.parse(b.toString()) as never;

export const greeterService = {
  SayHello: {
    path: '/helloworld.Greeter/SayHello',
    requestStream: false,
    responseStream: false,
    requestSerialize: json,
    requestDeserialize: parse,
    responseSerialize: json,
    responseDeserialize: parse,
  },
} satisfies ServiceDefinition;

export interface GreeterClient extends Client {
  SayHello(req: HelloRequest, metadata: Metadata, options: CallOptions, cb: (err: ServiceError | null, res?: HelloReply) => void): void;
}

export const GreeterClientCtor = makeGenericClientConstructor(greeterService, 'helloworld.Greeter') as unknown as new (
  address: string,
  creds: import('@grpc/grpc-js').ChannelCredentials,
  options?: import('@grpc/grpc-js').ChannelOptions,
) => GreeterClient;

/** sayHello calls SayHello and answers the reply, or rejects with the ServiceError. */
export function sayHello(client: GreeterClient, req: HelloRequest, options: CallOptions = {}, metadata?: Metadata): Promise<HelloReply> {
  return new Promise((resolve, reject) => {
    client.SayHello(req, metadata ?? new Metadata(), options, (err, res) => (err ? reject(err) : resolve(res!)));
  });
}

/** greeterHandler answers as this server (`name` in replies); `behaviour()` may change its behaviour at run time. */
export function greeterHandler(name: string, behaviour: () => { delayMs?: number; fail?: number } = () => ({})) {
  return {
    SayHello: (call: ServerUnaryCall<HelloRequest, HelloReply>, cb: sendUnaryData<HelloReply>) => {
      const b = behaviour();
      const fail = call.request.fail ?? b.fail;
      const delayMs = call.request.delayMs ?? b.delayMs ?? 0;
      const answer = () =>
        fail !== undefined ? cb({ code: fail, details: `${name} fails` }) : cb(null, { message: `hello ${call.request.name}`, server: name });
      const reply = () => (delayMs > 0 ? setTimeout(answer, delayMs) : answer());
      if (call.request.spinMs === undefined) return reply();
      // CPU-bound work in 5 ms slices, yielding between them (as a handler parsing or rendering in chunks)
      let left = call.request.spinMs;
      const slice = () => {
        const end = performance.now() + Math.min(5, left);
        while (performance.now() < end);
        left -= 5;
        if (left > 0) setImmediate(slice);
        else reply();
      };
      slice();
    },
  };
}

/** startGreeter starts a greeter on a free loopback port; answers the server and its address. */
export async function startGreeter(
  name: string,
  options: ServerOptions = {},
  behaviour?: () => { delayMs?: number; fail?: number },
  extra?: (s: Server) => void,
): Promise<{ server: Server; address: string; port: number }> {
  const server = new Server(options);
  server.addService(greeterService, greeterHandler(name, behaviour));
  extra?.(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { server, address: `127.0.0.1:${port}`, port };
}

export { status };
