/**
 * ServeNode is one running `bulwark serve` node: a node:http server with the client API, the peer
 * protocol, /metrics, /status, /healthz and /readyz; an HttpPool whose peers come from static --peers or
 * from etcd (the node announces itself and follows the service: `HttpPool.bindRegistry`, which calls
 * registry `announce()`); one ServedGroup per --group; the guarded origin.
 *
 * Lifecycle. start(): listen, then join the membership (retried with backoff while etcd does not
 * answer), then ready. shutdown() (SIGTERM / SIGINT): not ready → deregister → wait --drain-delay while
 * still serving (peers and load balancers see it leave) → stop accepting → drain in-flight requests
 * (answers carry `connection: close`) → close what is left, all within --shutdown-timeout.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpPool, normalizePeerUrl, urlOf, type Membership } from '../../cache/index.js';
import { Backoff, delay, systemClock } from '../../core/index.js';
import { EtcdRegistry, type Registry } from '../../registry/index.js';
import type { ServeConfig } from './config.js';
import { Origin } from './origin.js';
import { handleClient, replyText, type ClientApi } from './client-api.js';
import { declaresBody } from '../../internal/declared-body.js';
import { BulwarkMetrics, metricsHandler } from '../../metrics/index.js';
import { dashboardHandler, STATUS_PATH_KEY, type DashboardHandler } from '../../dashboard/index.js';
import promClient from 'prom-client';
import { ServedGroup } from './served-group.js';
import { reachEtcd, unreachableText } from '../etcd-reach.js';

/** The client API's path prefix. */
const API_PREFIX = '/v1/';

/** ServeNode runs one cache node. */
export class ServeNode implements ClientApi {
  readonly groups = new Map<string, ServedGroup>();
  readonly pool: HttpPool;
  /** metrics tracks the node's groups, peer pool and origin guards: /metrics and the components of /status. */
  readonly metrics = new BulwarkMetrics({ registry: new promClient.Registry() });
  private readonly serveMetrics = metricsHandler(this.metrics);
  /** The node's dashboard at /dashboard/ (read-only; beyond loopback it answers nothing without a token). */
  private readonly dashboard: DashboardHandler;
  private readonly server: Server;
  /** The peer protocol's path prefix (the pool's basePath), kept here: a request routes without reaching the pool. */
  private readonly peerPath: string;
  private registry: Registry | undefined;
  private membership: Membership | undefined;
  private ready = false;
  private draining = false;
  private inflight = 0;
  private readonly closed = (): void => void this.inflight--;
  private requests = 0;
  private readonly startedAt = systemClock.now();
  private stopping: Promise<void> | undefined;
  private readonly stopJoining = new AbortController();
  private joined: Promise<void> | undefined;

  private constructor(
    readonly config: ServeConfig,
    readonly origin: Origin,
    private readonly log: (line: string) => void,
  ) {
    this.pool = new HttpPool({
      self: config.advertise,
      timeoutMs: config.peerTimeoutMs,
      ...(config.peerSecret === undefined ? {} : { secret: config.peerSecret }),
      ...(config.ringReplicas === undefined ? {} : { replicas: config.ringReplicas }),
      owners: config.owners,
      protocol: config.protocol,
    });
    this.peerPath = this.pool.basePath;
    for (const name of config.groups) {
      this.groups.set(
        name,
        new ServedGroup({
          name,
          cacheBytes: config.cacheBytes,
          hotCacheBytes: config.hotCacheBytes,
          ttlMs: config.ttlMs,
          negativeTtlMs: config.negativeTtlMs,
          ttlJitter: config.ttlJitter,
          loadTimeoutMs: config.loadTimeoutMs,
          staleBytes: config.staleBytes,
          staleMaxAgeMs: config.staleMaxAgeMs,
          pool: this.pool,
          load: (key, signal) => origin.load(name, key, signal),
          clock: systemClock,
        }),
      );
    }
    this.metrics.track(this.pool, { name: 'peers' });
    for (const [name, g] of this.groups) this.metrics.track(g.group, { name });
    origin.track(this.metrics);
    this.dashboard = dashboardHandler(this.metrics, { path: '/dashboard', title: `bulwark serve ${config.advertise}` });
    this.server = createServer(
      {
        requestTimeout: config.requestTimeoutMs,
        headersTimeout: config.headersTimeoutMs,
        keepAliveTimeout: config.keepAliveTimeoutMs,
        // How often Node checks the two timeouts above (30 s by default would let a slow client hold a socket that long).
        connectionsCheckingInterval: Math.min(1_000, config.headersTimeoutMs),
        maxHeaderSize: 16 * 1024,
      },
      (req, res) => this.handle(req, res),
    );
  }

  /** start builds the node and listens; it is ready once membership is known (see `whenReady`). */
  static async start(config: ServeConfig, log: (line: string) => void = () => {}): Promise<ServeNode> {
    const origin = await Origin.create(config);
    const node = new ServeNode(config, origin, log);
    await new Promise<void>((resolve, reject) => {
      node.server.once('error', reject);
      node.server.listen(config.listenPort, config.listenHost, () => {
        node.server.off('error', reject);
        resolve();
      });
    });
    log(`bulwark serve: listening on ${node.listenUrl()}, advertised as ${config.advertise}; groups ${config.groups.join(', ')}`);
    node.joined = node.join();
    return node;
  }

  /** whenReady settles once membership is known (or the node shuts down first). */
  whenReady(): Promise<void> {
    return this.joined ?? Promise.resolve();
  }

  /** listenUrl is where the server listens (with the port the OS chose for --listen host:0). */
  listenUrl(): string {
    const a = this.server.address() as AddressInfo;
    return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  /** isReady tells whether /readyz answers 200: membership known and not draining. */
  isReady(): boolean {
    return this.ready && !this.draining;
  }

  private async join(): Promise<void> {
    const r = this.config.registry;
    if (r.kind === 'memory') {
      this.pool.setPeers(...r.peers);
      this.ready = true;
      this.log(`bulwark serve: ready; ring of ${this.pool.members().length} (static peers)`);
      return;
    }
    this.registry = new EtcdRegistry({
      hosts: r.hosts,
      ...(r.tls === undefined ? {} : { tls: r.tls }),
      ...(r.auth === undefined ? {} : { auth: r.auth }),
      prefix: r.prefix,
      ttlMs: r.leaseTtlMs,
      onWarning: (m) => this.log(`bulwark serve: etcd: ${m}`),
    });
    const backoff = new Backoff({ initialMs: 200, maxMs: 5_000, multiplier: 2, jitter: 'full' });
    for (;;) {
      if (this.stopJoining.signal.aborted) return;
      try {
        // The dashboard's stream path in the metadata: `bulwark dashboard` finds the node by it.
        const metadata = { [STATUS_PATH_KEY]: `${this.dashboard.path}/events` };
        const m = await this.pool.bindRegistry(this.registry, { service: this.config.service, metadata });
        // A shutdown that began while this registration was under way must not leave it behind.
        if (this.stopJoining.signal.aborted) {
          await m.close();
          return;
        }
        this.membership = m;
        break;
      } catch (err) {
        if (this.stopJoining.signal.aborted) return;
        const code = (err as { code?: string }).code;
        const why = code === 'ERR_REGISTRY_PENDING' || code === 'ERR_REGISTRY_UNAVAILABLE' ? await this.etcdSilence(r.hosts) : (err as Error).message;
        this.log(`bulwark serve: not ready: cannot join ${this.config.service} yet (${why}); trying again`);
        await delay(backoff.next(), this.stopJoining.signal).catch(() => {});
      }
    }
    if (!(await this.converge(this.registry, r.hosts))) return;
    this.ready = true;
    this.log(`bulwark serve: ready; ring of ${this.pool.members().length} from etcd, equal to its listing`);
  }

  /** etcdSilence says why etcd does not answer: each member's cause when a connection finds one ("connection refused"). */
  private async etcdSilence(hosts: readonly string[]): Promise<string> {
    const reach = await reachEtcd(hosts, 1_000);
    const all = unreachableText(reach);
    if (all !== undefined) return `cannot reach etcd at ${all}`;
    const causes = reach.filter((m) => m.cause !== undefined).map((m) => `${m.member}: ${m.cause}`);
    return `etcd at ${reach.map((m) => m.member).join(',')} does not answer${causes.length === 0 ? '' : ` (${causes.join('; ')})`}`;
  }

  /**
   * converge resolves true once the ring equals a listing of the service taken from etcd after this node's
   * registration was written (bindRegistry resolves only then), false if the node shuts down first. Until
   * the watch has brought the ring up to what etcd lists, the node is not ready: the listing is taken again
   * after a short backoff (50 ms doubling to 1 s) — a wait for a condition, not a fixed sleep.
   */
  private async converge(registry: Registry, hosts: readonly string[]): Promise<boolean> {
    const backoff = new Backoff({ initialMs: 50, maxMs: 1_000, multiplier: 2, jitter: 'none' });
    const signal = this.stopJoining.signal;
    while (!signal.aborted) {
      try {
        const listed = new Set([this.pool.self]);
        const instances = await registry.getService(this.config.service, { signal }).catch((err: unknown) => {
          if ((err as { code?: string }).code === 'ERR_NOT_FOUND') return [];
          throw err;
        });
        for (const inst of instances) {
          try {
            listed.add(normalizePeerUrl('membership', 'instance url', urlOf(inst))); // as the membership reads it
          } catch {
            // an instance whose URL cannot be used is left out of the ring too
          }
        }
        const ring = this.pool.members();
        if (ring.length === listed.size && ring.every((m) => listed.has(m))) return true;
      } catch (err) {
        if (signal.aborted) break;
        const code = (err as { code?: string }).code;
        const why = code === 'ERR_REGISTRY_UNAVAILABLE' ? await this.etcdSilence(hosts) : (err as Error).message;
        this.log(`bulwark serve: not ready: cannot list ${this.config.service} (${why}); trying again`);
      }
      await delay(backoff.next(), signal).catch(() => {});
    }
    return false;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    this.inflight++;
    this.requests++;
    this.dispatch(req, res);
    // A response already handed to its socket whole (a cache hit answers in the request's own tick) is no
    // longer in flight; any other is until it closes — one listener made once, not a closure per request.
    if (res.writableFinished) this.inflight--;
    else res.on('close', this.closed);
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): void {
    if (this.draining) res.setHeader('connection', 'close');
    // A request answered before its body arrived (a 401, a 413) must not keep its socket open for a body
    // that may never come: Node waits for the rest of the body, and its requestTimeout no longer runs.
    if (declaresBody(req)) {
      res.once('finish', () => {
        if (!req.complete) req.socket.destroySoon();
      });
    }
    const url = req.url ?? '/';
    if (url.startsWith(this.peerPath)) {
      void this.pool.handler(req, res);
      return;
    }
    if (url.startsWith(API_PREFIX)) {
      void handleClient(this, req, res);
      return;
    }
    const path = url.split('?')[0]!;
    if (path === this.dashboard.path || path.startsWith(`${this.dashboard.path}/`)) return this.dashboard(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD') return replyText(res, 405, 'method not allowed', { allow: 'GET, HEAD' });
    switch (path) {
      case '/healthz':
        return replyText(res, 200, 'ok');
      case '/readyz':
        return replyText(res, this.isReady() ? 200 : 503, this.isReady() ? 'ready' : this.draining ? 'draining' : 'waiting for membership');
      case '/status':
        return this.sendStatus(res);
      case '/metrics':
        return this.serveMetrics(req, res);
      default:
        return replyText(res, 404, 'not found');
    }
  }

  /** sendStatus answers /status: the node's own status and a snapshot of every tracked component. */
  private sendStatus(res: ServerResponse): void {
    const body = JSON.stringify({ ...this.status(), components: this.metrics.snapshot().components });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
    res.end(body);
  }

  /** status answers the node's snapshot: membership, groups, origin guards, server. */
  status(): NodeStatus {
    const groups: Record<string, Record<string, unknown>> = {};
    for (const [name, g] of this.groups) groups[name] = g.stats();
    const r = this.config.registry;
    return {
      node: {
        url: this.config.advertise,
        ready: this.isReady(),
        draining: this.draining,
        uptimeMs: Math.round(systemClock.now() - this.startedAt),
        pid: process.pid,
      },
      membership: {
        registry: r.kind === 'memory' ? 'memory' : `etcd://${r.hosts.map((h) => h.replace(/^https?:\/\//, '')).join(',')}`,
        service: this.config.service,
        members: [...this.pool.members()],
      },
      groups,
      origin: this.origin.stats(),
      server: { inflight: this.inflight, requests: this.requests },
    };
  }

  /**
   * shutdown leaves the cluster and drains: not ready → deregister → --drain-delay → stop accepting →
   * finish in-flight requests → close. Resolves within --shutdown-timeout (plus closing connections).
   */
  shutdown(): Promise<void> {
    this.stopping ??= (async () => {
      const deadline = systemClock.now() + this.config.shutdownTimeoutMs;
      const left = () => Math.max(0, deadline - systemClock.now());
      this.draining = true;
      this.stopJoining.abort();
      // Dashboard streams never end by themselves: they would hold the drain until its deadline.
      await this.dashboard.close();
      this.log('bulwark serve: draining: leaving the registry');
      await withDeadline(this.joined ?? Promise.resolve(), left());
      await withDeadline(this.membership?.close() ?? Promise.resolve(), left());
      await delay(Math.min(this.config.drainDelayMs, left())).catch(() => {});
      this.log(`bulwark serve: no longer accepting; ${this.inflight} requests in flight`);
      const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      this.server.closeIdleConnections();
      while (this.inflight > 0 && left() > 0) await delay(Math.min(20, left()));
      this.server.closeAllConnections();
      await withDeadline(closed, 1_000);
      await this.metrics.close();
      for (const g of this.groups.values()) await g.group.close();
      await withDeadline(Promise.all([this.pool.close(), this.origin.close(), this.registry?.close()]), 2_000);
      this.log('bulwark serve: stopped');
    })();
    return this.stopping;
  }
}

/** NodeStatus is what /status answers. */
export interface NodeStatus {
  node: { url: string; ready: boolean; draining: boolean; uptimeMs: number; pid: number };
  membership: { registry: string; service: string; members: string[] };
  groups: Record<string, Record<string, unknown>>;
  origin: ReturnType<Origin['stats']>;
  server: { inflight: number; requests: number };
}

async function withDeadline(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}
