/**
 * Network faults for real-server tests: partitions that drop packets (not refuse them) and latency.
 *
 * - `PacketFilter` adds iptables DROP rules to a chain of its own, `BULWARK-TEST-<pid>-<n>`, jumped to
 *   from INPUT: a packet is lost on its way in, as across a real partition, so the sender's TCP sees
 *   nothing but silence — a connect() hangs in SYN retransmission, an established connection's writes
 *   wait in exponential retransmission backoff (the next try may come seconds after the heal), and
 *   nobody gets ECONNREFUSED as from a stopped server. (Dropped in OUTPUT instead, the sender's own
 *   transmit fails and TCP retries at the application's next write: a partition that heals at once.)
 *   Processes that need a cut of only part of their traffic get their own loopback address (all of
 *   127.0.0.0/8 answers on `lo`) and, where both sides of a flow would look alike (an outgoing
 *   connection to 127.0.0.x leaves from 127.0.0.1), their own uid (`spawn`'s `uid` option; `nobodyUid`
 *   below): the owner match works only where packets are sent, so a second chain, `…-M` from OUTPUT,
 *   marks that uid's packets and the INPUT chain drops the marked ones (the mark stays with a packet
 *   across loopback).
 *   `open()` first removes chains left by test processes that are gone (a run killed before its
 *   `finally`), so that a crashed run never leaves a rule that breaks a later one; `close()` (call it in
 *   `finally` / `after`) flushes and removes the chains, and a process exit removes them too.
 * - `DelayProxy` is a TCP proxy that holds every chunk `delayMs` in each direction before passing it on,
 *   in order (this kernel has no sch_netem for `tc qdisc … delay`). `delayMs` can be changed while it runs.
 *
 * `netfaultSkip` is the one-line reason to skip when iptables or root is missing; with
 * BULWARK_REQUIRE_SERVERS=1 (CI) importing this file throws instead, so the run fails rather than skips.
 * Targets are loopback addresses only (house rule for fault tests).
 */
import { execFile, execFileSync } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { promisify } from 'node:util';
import { findBinary, requireServers } from './servers.js';

const run = promisify(execFile);

/** CHAIN_PREFIX names every chain a test makes; the stale-chain sweep removes only these. */
const CHAIN_PREFIX = 'BULWARK-TEST-';

/** nobodyUid is a uid to run a child as, so that an owner-match rule can tell its packets apart (Debian's `nobody`). */
export const nobodyUid = 65_534;

function unavailable(): string | undefined {
  if (process.platform !== 'linux') return `network faults need Linux iptables (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network faults need root for iptables (set BULWARK_REQUIRE_SERVERS=1 to fail instead)';
  const iptables = findBinary('iptables');
  if (iptables === undefined) return 'iptables is not installed (set BULWARK_REQUIRE_SERVERS=1 to fail instead)';
  try {
    execFileSync(iptables, ['-w', '-S', 'OUTPUT'], { stdio: 'pipe' });
  } catch (err) {
    return `iptables does not work here: ${
      String((err as { stderr?: Buffer }).stderr ?? (err as Error).message)
        .trim()
        .split('\n')[0]
    }`;
  }
  return undefined;
}

/** netfaultSkip is node:test's `skip` for a test that needs `PacketFilter` (undefined when it can run). */
export const netfaultSkip: string | undefined = unavailable();
if (netfaultSkip !== undefined && requireServers) throw new Error(`${netfaultSkip}, and BULWARK_REQUIRE_SERVERS=1 requires network faults`);

/** Flow selects packets: each field given narrows it (all of them must match). */
export interface Flow {
  /** Source address (e.g. '127.0.0.12'). */
  from?: string;
  /** Source port. */
  fromPort?: number;
  /** Destination address. */
  to?: string;
  /** Destination port. */
  toPort?: number;
  /** The sending socket's owner (iptables owner match): a process run as this uid. */
  uid?: number;
}

async function iptables(...args: string[]): Promise<string> {
  const { stdout } = await run('iptables', ['-w', ...args]);
  return stdout;
}

function iptablesSync(...args: string[]): void {
  try {
    execFileSync('iptables', ['-w', ...args], { stdio: 'pipe' });
  } catch {
    // gone already
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** sweepStaleChains removes the chains (and their jumps) of test processes that no longer run. */
export async function sweepStaleChains(): Promise<string[]> {
  const listing = await iptables('-S');
  const removed: string[] = [];
  for (const m of listing.matchAll(new RegExp(`^-N (${CHAIN_PREFIX}(\\d+)-\\d+(?:-M)?)$`, 'gm'))) {
    const [, chain, pid] = m;
    if (alive(Number(pid))) continue;
    removeChainSync(chain!);
    removed.push(chain!);
  }
  return removed;
}

function removeChainSync(chain: string): void {
  // Every jump to it (a crashed run may have added one twice), then its rules, then the chain.
  for (const from of ['INPUT', 'OUTPUT']) {
    for (let i = 0; i < 10; i++) {
      try {
        execFileSync('iptables', ['-w', '-D', from, '-j', chain], { stdio: 'pipe' });
      } catch {
        break;
      }
    }
  }
  iptablesSync('-F', chain);
  iptablesSync('-X', chain);
}

let chains = 0;
const open = new Set<string>();
process.once('exit', () => {
  for (const chain of open) {
    removeChainSync(chain);
    removeChainSync(`${chain}-M`);
  }
});

/** PacketFilter drops chosen packets until `heal()`; `close()` removes every trace of it. */
export class PacketFilter {
  private closed = false;
  /** The chain (from OUTPUT) that marks the packets of uid flows, for the drop chain to drop. */
  readonly markChain: string;
  /** This filter's packet mark: the pid and filter number, so that two test processes never share one. */
  private readonly mark: string;

  private constructor(
    readonly chain: string,
    n: number,
  ) {
    this.markChain = `${chain}-M`;
    this.mark = `0x${((((process.pid & 0xffff) << 8) | (n & 0xff)) >>> 0).toString(16)}`;
  }

  /** open sweeps stale chains, then makes this filter's empty chains and hooks them into INPUT and OUTPUT. */
  static async open(): Promise<PacketFilter> {
    if (netfaultSkip !== undefined) throw new Error(netfaultSkip);
    await sweepStaleChains();
    const n = ++chains;
    const filter = new PacketFilter(`${CHAIN_PREFIX}${process.pid}-${n}`, n);
    for (const c of [filter.chain, filter.markChain]) removeChainSync(c);
    open.add(filter.chain);
    await iptables('-N', filter.chain);
    await iptables('-N', filter.markChain);
    await iptables('-I', 'INPUT', '1', '-j', filter.chain);
    await iptables('-I', 'OUTPUT', '1', '-j', filter.markChain);
    return filter;
  }

  /** drop drops every packet of `flow` (TCP or not) from now on. */
  async drop(flow: Flow): Promise<void> {
    if (this.closed) throw new Error(`${this.chain} is closed`);
    if (flow.from === undefined && flow.to === undefined && flow.fromPort === undefined && flow.toPort === undefined && flow.uid === undefined) {
      throw new RangeError('PacketFilter.drop: a flow must name an address, port or uid (an empty one would cut all of loopback)');
    }
    for (const host of [flow.from, flow.to]) {
      if (host !== undefined && !host.startsWith('127.')) throw new RangeError(`PacketFilter.drop: only loopback addresses may be cut, got ${host}`);
    }
    const match: string[] = [];
    if (flow.from !== undefined) match.push('-s', flow.from);
    if (flow.to !== undefined) match.push('-d', flow.to);
    if (flow.fromPort !== undefined || flow.toPort !== undefined) {
      match.push('-p', 'tcp');
      if (flow.fromPort !== undefined) match.push('--sport', String(flow.fromPort));
      if (flow.toPort !== undefined) match.push('--dport', String(flow.toPort));
    }
    if (flow.uid === undefined) {
      await iptables('-A', this.chain, ...match, '-j', 'DROP');
      return;
    }
    // The owner is known only where a packet is sent: mark it there, drop it where it arrives.
    await iptables('-A', this.markChain, ...match, '-m', 'owner', '--uid-owner', String(flow.uid), '-j', 'MARK', '--set-mark', this.mark);
    const drop = ['-A', this.chain, '-m', 'mark', '--mark', this.mark, '-j', 'DROP'];
    if (!(await this.rules()).includes(drop.join(' '))) await iptables(...drop);
  }

  /**
   * dropConnections drops every packet, both ways, of each TCP connection whose packets sent by `flow.uid`
   * match `flow` (e.g. `{ uid, toPort }`: the connections that uid's process opened to that port, and the
   * answers sent back on them). `drop({ uid })` drops only what that uid sends: across loopback the far
   * side's packets would still arrive, so a process that only listens on such a connection (an etcd
   * member reading its peers' stream) would not be cut off. The connection is marked (CONNMARK) where the
   * uid's packet is sent, and every packet of a marked connection is dropped where it arrives.
   */
  async dropConnections(flow: Flow & { uid: number }): Promise<void> {
    if (this.closed) throw new Error(`${this.chain} is closed`);
    for (const host of [flow.from, flow.to]) {
      if (host !== undefined && !host.startsWith('127.')) throw new RangeError(`PacketFilter.dropConnections: only loopback addresses may be cut, got ${host}`);
    }
    const match: string[] = ['-p', 'tcp'];
    if (flow.from !== undefined) match.push('-s', flow.from);
    if (flow.to !== undefined) match.push('-d', flow.to);
    if (flow.fromPort !== undefined) match.push('--sport', String(flow.fromPort));
    if (flow.toPort !== undefined) match.push('--dport', String(flow.toPort));
    await iptables('-A', this.markChain, ...match, '-m', 'owner', '--uid-owner', String(flow.uid), '-j', 'CONNMARK', '--set-mark', this.mark);
    const drop = ['-A', this.chain, '-m', 'connmark', '--mark', this.mark, '-j', 'DROP'];
    if (!(await this.rules()).includes(drop.join(' '))) await iptables(...drop);
  }

  /** dropBetween drops both directions between `a` and `b` (an address, and optionally a port, each). */
  async dropBetween(a: { host: string; port?: number }, b: { host: string; port?: number }): Promise<void> {
    await this.drop({ from: a.host, fromPort: a.port, to: b.host, toPort: b.port });
    await this.drop({ from: b.host, fromPort: b.port, to: a.host, toPort: a.port });
  }

  /** isolate drops every TCP packet to and from `port` (a server partitioned from all its clients). */
  async isolate(port: number): Promise<void> {
    await this.drop({ toPort: port });
    await this.drop({ fromPort: port });
  }

  /** rules answers both chains' rules as `iptables -S` prints them. */
  async rules(): Promise<string[]> {
    const out: string[] = [];
    for (const c of [this.chain, this.markChain]) out.push(...(await iptables('-S', c)).split('\n').filter((l) => l.startsWith('-A ')));
    return out;
  }

  /** heal removes every rule: the partition ends (connections in retransmission backoff resume on their next try). */
  async heal(): Promise<void> {
    if (this.closed) return;
    await iptables('-F', this.chain);
    await iptables('-F', this.markChain);
  }

  /** close heals and removes the chains; idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    removeChainSync(this.chain);
    removeChainSync(this.markChain);
    open.delete(this.chain);
  }
}

/** leftoverChains answers the test chains iptables still holds (a test checks it leaves none of its own). */
export async function leftoverChains(pid = process.pid): Promise<string[]> {
  const listing = await iptables('-S');
  return [...listing.matchAll(new RegExp(`^-N (${CHAIN_PREFIX}${pid}-\\d+(?:-M)?)$`, 'gm'))].map((m) => m[1]!);
}

/** DelayProxy forwards TCP from `host:port` to a target, each chunk held `delayMs` in each direction. */
export class DelayProxy {
  /** Milliseconds each chunk waits in each direction (a request and its answer: twice this). */
  delayMs: number;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  private constructor(
    private readonly server: Server,
    readonly host: string,
    readonly port: number,
    delayMs: number,
  ) {
    this.delayMs = delayMs;
  }

  /** start listens on `host` (default 127.0.0.1) on a free port and forwards to `target`. */
  static async start(target: { host: string; port: number }, options: { delayMs: number; host?: string }): Promise<DelayProxy> {
    const host = options.host ?? '127.0.0.1';
    if (!host.startsWith('127.') || !target.host.startsWith('127.')) throw new RangeError('DelayProxy: loopback only');
    let proxy: DelayProxy | undefined;
    const server = createServer((client) => proxy?.pipe(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve());
    });
    const addr = server.address();
    proxy = new DelayProxy(server, host, typeof addr === 'object' && addr !== null ? addr.port : 0, options.delayMs);
    return proxy;
  }

  /** address is `host:port` of the proxy. */
  get address(): string {
    return `${this.host}:${this.port}`;
  }

  private pipe(client: Socket, target: { host: string; port: number }): void {
    const upstream = connect(target.port, target.host);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.setNoDelay(true);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    this.forward(client, upstream);
    this.forward(upstream, client);
  }

  /**
   * forward passes `from`'s chunks (and its end) to `to` after the delay, in order: one queue and one
   * timer per direction. (A timer per chunk did not keep order: two chunks due in the same millisecond
   * from timers of different durations — one held 1 500 ms, one sent 1 300 ms later after `delayMs`
   * dropped to 50 — could fire in either order, so Redis ran a PING before the script call sent ahead
   * of it and the client matched each reply to the other's command.)
   */
  private forward(from: Socket, to: Socket): void {
    let lastDue = 0;
    const queue: { due: number; fn: () => void }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      timer = setTimeout(drain, Math.max(1, queue[0]!.due - Date.now()));
      this.timers.add(timer);
    };
    const drain = () => {
      this.timers.delete(timer!);
      timer = undefined;
      const now = Date.now();
      while (queue.length > 0 && queue[0]!.due <= now) queue.shift()!.fn();
      if (queue.length > 0) arm();
    };
    const later = (fn: () => void) => {
      const due = Math.max(lastDue, Date.now() + this.delayMs);
      lastDue = due;
      queue.push({ due, fn });
      if (timer === undefined) arm();
    };
    from.on('data', (chunk: Buffer) => later(() => to.destroyed || to.write(chunk)));
    from.on('end', () => later(() => to.destroyed || to.end()));
  }

  /** close stops listening and drops every connection. */
  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
