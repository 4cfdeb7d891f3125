/**
 * InstanceStream: the aggregator's one stream to one instance. It reads the instance's dashboard
 * events (server-sent events) from the path the instance announced, on the address it registered —
 * never a URL from the registry — keeps the last frame's text, and connects again after a backoff when
 * the stream ends.
 */
import { request, type ClientRequest } from 'node:http';
import { Backoff } from '../core/backoff.js';
import type { Clock, TimerHandle } from '../core/clock.js';

/** A frame larger than this ends the stream (an instance is not trusted to bound its own). */
const MAX_EVENT_BYTES = 8 << 20;

/** addressParts answers host and port of a registered `host:port` (`[v6]:port`), or undefined when it is anything else. */
export function addressParts(address: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(address);
  if (m === null) return undefined;
  const port = Number(m[3]);
  if (port < 1 || port > 65_535) return undefined;
  return { host: m[1] ?? m[2]!, port };
}

/** statusPathOk tells whether an announced path is a plain absolute path: no scheme, host, query, fragment or `..`. */
export function statusPathOk(path: string): boolean {
  return /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path) && !path.startsWith('//') && !path.split('/').includes('..') && path.length <= 1024;
}

export class InstanceStream {
  /** The last frame's JSON text, and when (clock ms) it came. */
  frame: string | undefined;
  frameAt: number | undefined;
  /** Whether the stream is open now, and the last reason it is not. */
  connected = false;
  reason: string | undefined = 'connecting';
  private req: ClientRequest | undefined;
  private timer: TimerHandle | undefined;
  private closed = false;
  private readonly backoff = new Backoff({ initialMs: 250, maxMs: 5_000, multiplier: 2, jitter: 'full' });

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly path: string,
    private readonly token: string | undefined,
    private readonly clock: Clock,
  ) {
    this.connect();
  }

  private connect(): void {
    if (this.closed) return;
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    const req = request({ host: this.host, port: this.port, path: this.path, method: 'GET', headers, agent: false, timeout: 10_000 });
    this.req = req;
    let done = false;
    const end = (why: string): void => {
      if (done) return;
      done = true;
      this.connected = false;
      this.reason = why;
      req.destroy();
      if (this.req === req) this.req = undefined;
      this.retry();
    };
    req.on('timeout', () => end('no data for 10 s'));
    req.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? err.message));
    req.on('response', (res) => {
      if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        res.resume();
        end(`answered ${res.statusCode ?? '?'} ${res.headers['content-type'] ?? ''}`.trim());
        return;
      }
      this.connected = true;
      this.reason = undefined;
      this.backoff.reset();
      res.setEncoding('utf8');
      let buf = '';
      res.on('data', (chunk: string) => {
        buf += chunk;
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          this.event(buf.slice(0, cut));
          buf = buf.slice(cut + 2);
        }
        if (buf.length > MAX_EVENT_BYTES) end('an event past 8 MiB');
      });
      res.on('end', () => end('stream ended'));
      res.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? err.message));
    });
    req.end();
  }

  /** event reads one server-sent event; only `tick` frames are kept. */
  private event(block: string): void {
    if (!block.startsWith('event: tick\n')) {
      const lines = block.split('\n');
      if (!lines.includes('event: tick')) return;
    }
    const at = block.indexOf('\ndata: ');
    if (at < 0) return;
    this.frame = block.slice(at + 7);
    this.frameAt = this.clock.now();
  }

  private retry(): void {
    if (this.closed) return;
    this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => this.connect(), this.backoff.next());
    this.timer.unref();
  }

  close(): void {
    this.closed = true;
    this.clock.clearTimeout(this.timer);
    this.req?.destroy();
    this.req = undefined;
    this.connected = false;
  }
}
