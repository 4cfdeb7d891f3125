/**
 * The demo's fleet, all in this process on loopback: three services of two or three instances (one
 * healthy, one flaky, one slow among them) registered in a MemoryRegistry behind a FaultyRegistry, and
 * a three-node cache cluster (groupcache-style Groups over HttpPools) in front of an origin guarded by
 * a breaker. Its actions — kill / restore an instance or a cache node, make an instance slow or failing,
 * take the registry down, break the origin — are what the dashboard's demo buttons press: local changes
 * to this fleet, not rules.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CircuitBreaker } from '../../breaker/index.js';
import { Group, HttpPool } from '../../cache/index.js';
import { systemClock, type Clock } from '../../core/index.js';
import type { DashboardAction, DashboardActions } from '../../dashboard/index.js';
import { MemoryRegistry } from '../../registry/index.js';
import { FaultyRegistry } from './faulty-registry.js';
import { startDemoService, type DemoService, type DemoServiceOptions } from './services.js';

/** FleetSpec is one instance of the fleet: its service and how it behaves. */
interface FleetSpec extends DemoServiceOptions {
  readonly service: string;
}

/** The fleet's instances: payments keeps the first demo's three (healthy, flaky, slow). */
export const fleetSpecs: readonly FleetSpec[] = Object.freeze([
  { service: 'payments', id: 'healthy', failureRate: 0, latencyMs: 2 },
  { service: 'payments', id: 'flaky', failureRate: 0.3, latencyMs: 2 },
  { service: 'payments', id: 'slow', failureRate: 0, latencyMs: 200 },
  { service: 'orders', id: 'orders-1', failureRate: 0, latencyMs: 3 },
  { service: 'orders', id: 'orders-2', failureRate: 0.05, latencyMs: 5 },
  { service: 'stock', id: 'stock-1', failureRate: 0, latencyMs: 2 },
  { service: 'stock', id: 'stock-2', failureRate: 0, latencyMs: 80 },
]);

/** The services callers call, in the order they take turns. */
export const fleetServices: readonly string[] = Object.freeze(['payments', 'orders', 'stock']);

/** What "make slow" and "make failing" set. */
const SLOW_MS = 400;
const FAILING_RATE = 0.8;
/** How long the origin takes to answer, ms. */
const ORIGIN_MS = 15;

/** FleetInstance is one running instance of the fleet. */
export interface FleetInstance {
  readonly service: string;
  readonly spec: FleetSpec;
  readonly server: DemoService;
  /** 'normal', 'slow' or 'failing': what the buttons set. */
  mode: 'normal' | 'slow' | 'failing';
}

/** CacheNode is one node of the cache cluster. */
export interface CacheNode {
  readonly name: string;
  readonly pool: HttpPool;
  readonly group: Group;
  readonly alive: boolean;
}

interface RunningNode extends CacheNode {
  alive: boolean;
  readonly server: Server;
  readonly port: number;
}

/** DemoFleet is the running fleet and its actions. */
export class DemoFleet implements DashboardActions {
  readonly title = 'Demo controls';
  readonly memory = new MemoryRegistry();
  readonly registry = new FaultyRegistry(this.memory);
  /** The breaker in front of the origin, inside each cache node's getter. */
  readonly originBreaker: CircuitBreaker;
  /** Loads that reached the origin. */
  originLoads = 0;
  private originBroken = false;
  private constructor(
    readonly instances: readonly FleetInstance[],
    private readonly nodes: RunningNode[],
    breaker: CircuitBreaker,
    private readonly clock: Clock,
  ) {
    this.originBreaker = breaker;
  }

  /** start starts every instance and cache node on loopback and registers the instances. */
  static async start(options: { clock?: Clock; random?: () => number } = {}): Promise<DemoFleet> {
    const clock = options.clock ?? systemClock;
    const instances: FleetInstance[] = [];
    const nodes: RunningNode[] = [];
    const breaker = new CircuitBreaker({
      name: 'origin',
      failureRate: 0.5,
      minimumCalls: 5,
      windowMs: 5_000,
      buckets: 10,
      openMs: 2_000,
      halfOpenCalls: 2,
      clock,
    });
    let fleet: DemoFleet | undefined;
    try {
      for (const spec of fleetSpecs) {
        const server = await startDemoService({ ...spec, clock, ...(options.random === undefined ? {} : { random: options.random }) });
        instances.push({ service: spec.service, spec, server, mode: 'normal' });
      }
      fleet = new DemoFleet(instances, nodes, breaker, clock);
      const f = fleet;
      for (let i = 1; i <= 3; i++) nodes.push(await startNode(`cache-${i}`, (key) => f.loadFromOrigin(key), clock));
      for (const n of nodes) n.pool.setPeers(...nodes.map((m) => m.pool.self));
      for (const inst of instances) await fleet.memory.register({ id: inst.server.id, name: inst.service, address: inst.server.address });
      return fleet;
    } catch (err) {
      await Promise.all(instances.map((i) => i.server.close()));
      await Promise.all(nodes.map((n) => closeNode(n)));
      throw err;
    }
  }

  /** cacheNodes answers the cache cluster's nodes. */
  cacheNodes(): readonly CacheNode[] {
    return this.nodes;
  }

  /** cacheGet reads `key` through the next live cache node (round robin); undefined when none is up. */
  cacheGet(key: string, turn: number): Promise<unknown> | undefined {
    const live = this.nodes.filter((n) => n.alive);
    if (live.length === 0) return undefined;
    return live[turn % live.length]!.group.get(key);
  }

  /** originAnswering is false while the origin is broken. */
  get originAnswering(): boolean {
    return !this.originBroken;
  }

  private async loadFromOrigin(key: string): Promise<string> {
    return this.originBreaker.execute(async () => {
      this.originLoads++;
      await new Promise<void>((resolve) => this.clock.setTimeout(resolve, ORIGIN_MS));
      if (this.originBroken) throw new Error('origin: 503 (broken by the demo)');
      return `profile of ${key}`;
    });
  }

  list(): readonly DashboardAction[] {
    const out: DashboardAction[] = [];
    for (const i of this.instances) {
      const target = `${i.service} › ${i.server.id} (${i.server.address})`;
      const id = i.server.id;
      if (!i.server.alive) {
        out.push({ id: `restore:${id}`, label: 'restore', target, state: 'killed' });
        continue;
      }
      const state = i.mode === 'normal' ? 'up' : i.mode === 'slow' ? `slow (${SLOW_MS} ms)` : `failing (${FAILING_RATE * 100} %)`;
      out.push({ id: `kill:${id}`, label: 'kill', target, state });
      if (i.mode !== 'slow') out.push({ id: `slow:${id}`, label: 'make slow', target, state });
      if (i.mode !== 'failing') out.push({ id: `failing:${id}`, label: 'make failing', target, state });
      if (i.mode !== 'normal') out.push({ id: `normal:${id}`, label: 'back to normal', target, state });
    }
    for (const n of this.nodes) {
      const target = `cache node ${n.name} (${n.pool.self.replace('http://', '')})`;
      out.push(n.alive ? { id: `kill:${n.name}`, label: 'kill', target, state: 'up' } : { id: `restore:${n.name}`, label: 'restore', target, state: 'killed' });
    }
    out.push(
      this.registry.answering
        ? { id: 'registry:down', label: 'take down', target: 'registry', state: 'answering' }
        : { id: 'registry:up', label: 'bring back', target: 'registry', state: 'down' },
    );
    out.push(
      this.originBroken
        ? { id: 'origin:repair', label: 'repair', target: 'cache origin', state: 'broken' }
        : { id: 'origin:break', label: 'break', target: 'cache origin', state: 'answering' },
    );
    return out;
  }

  async run(id: string): Promise<string> {
    const [verb, what] = id.split(':') as [string, string];
    if (verb === 'registry') {
      this.registry.setAnswering(what === 'up');
      return what === 'up' ? 'the registry answers again' : 'the registry stopped answering: the registry cache serves what it knew';
    }
    if (verb === 'origin') {
      this.originBroken = what === 'break';
      return this.originBroken ? 'the origin fails every load: its breaker opens, the cache answers stale values' : 'the origin answers again';
    }
    const node = this.nodes.find((n) => n.name === what);
    if (node !== undefined) {
      if (verb === 'kill' && node.alive) {
        node.alive = false;
        await new Promise<void>((resolve) => (node.server.close(() => resolve()), node.server.closeAllConnections()));
        return `cache node ${node.name} killed: its peers load its keys themselves`;
      }
      if (verb === 'restore' && !node.alive) {
        await new Promise<void>((resolve, reject) => node.server.once('error', reject).listen(node.port, '127.0.0.1', () => resolve()));
        node.alive = true;
        return `cache node ${node.name} restored`;
      }
      throw new Error(`cache node ${node.name} cannot ${verb} now`);
    }
    const inst = this.instances.find((i) => i.server.id === what);
    if (inst === undefined) throw new Error(`no instance or cache node ${JSON.stringify(what)}`);
    const base = inst.spec;
    switch (verb) {
      case 'kill':
        await inst.server.kill();
        return `${inst.service} › ${what} killed: it refuses connections, still registered`;
      case 'restore':
        await inst.server.restore();
        return `${inst.service} › ${what} restored`;
      case 'slow':
        inst.mode = 'slow';
        inst.server.set({ latencyMs: SLOW_MS, failureRate: base.failureRate ?? 0 });
        return `${inst.service} › ${what} answers in ${SLOW_MS} ms`;
      case 'failing':
        inst.mode = 'failing';
        inst.server.set({ failureRate: FAILING_RATE, latencyMs: base.latencyMs ?? 2 });
        return `${inst.service} › ${what} fails ${FAILING_RATE * 100} % of requests`;
      case 'normal':
        inst.mode = 'normal';
        inst.server.set({ failureRate: base.failureRate ?? 0, latencyMs: base.latencyMs ?? 2 });
        return `${inst.service} › ${what} back to normal`;
      default:
        throw new Error(`no action ${JSON.stringify(verb)}`);
    }
  }

  /** close stops every instance, cache node and the registry. */
  async close(): Promise<void> {
    this.registry.setAnswering(true);
    await Promise.all(this.instances.map((i) => i.server.close()));
    await Promise.all(this.nodes.map((n) => closeNode(n)));
    await this.registry.close();
  }
}

async function startNode(name: string, getter: (key: string) => Promise<string>, clock: Clock): Promise<RunningNode> {
  let handler: HttpPool['handler'] | undefined;
  const server = createServer((req, res) => void handler?.(req, res));
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  const pool = new HttpPool({ self: `http://127.0.0.1:${port}` });
  handler = pool.handler;
  const group = new Group({ name: 'profiles', cacheBytes: 1 << 20, ttlMs: 10_000, staleBytes: 1 << 20, staleMaxAgeMs: 300_000, peers: pool, getter, clock });
  return { name, pool, group, alive: true, server, port };
}

async function closeNode(n: RunningNode): Promise<void> {
  if (n.alive) await new Promise<void>((resolve) => (n.server.close(() => resolve()), n.server.closeAllConnections()));
  n.alive = false;
  await (n.group as { close?: () => Promise<void> }).close?.();
  await (n.pool as { close?: () => Promise<void> }).close?.();
}
