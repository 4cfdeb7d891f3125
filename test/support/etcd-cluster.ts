/**
 * Starts a real 3-member etcd cluster (three `etcd` processes joined with `--initial-cluster`) on free
 * loopback ports, each with its data dir in one temp folder, and waits until a leader is elected and every
 * member answers. Members are killed (SIGKILL) and restarted by PID, with the same ports and data dir.
 *
 * etcd's own defaults for heartbeat (100 ms) and election timeout (1 000 ms) are kept: an election after
 * a leader's death takes what it takes in production.
 */
import { chmodSync, chownSync, mkdirSync } from 'node:fs';
import { Etcd3 } from 'etcd3';
import { canConnect, freePort, ServerProcess, tempDir, waitFor } from './servers.js';
import { etcdBinary } from './etcd.js';

/** EtcdMember is one member of a test cluster. */
export interface EtcdMember {
  readonly name: string;
  /** e.g. `http://127.0.0.1:23790` */
  readonly endpoint: string;
  /** The port its peers talk to it on (127.0.0.1). */
  readonly peerPort: number;
  /** The uid it runs as (`options.uids`), else undefined (ours). */
  readonly uid: number | undefined;
  readonly process: ServerProcess;
  /** alive is false between `kill()` and `restart()`. */
  readonly alive: boolean;
  /** kill SIGKILLs the member (data dir kept) and waits for it to exit. */
  kill(): Promise<void>;
  /** restart starts the member again on the same ports and data dir; resolves once it answers a status call. */
  restart(): Promise<void>;
}

/** EtcdCluster is a running cluster a test owns. */
export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** endpoints of every member, in member order. */
  readonly endpoints: string[];
  /** leader answers the member the live members agree is the leader (waits for one, up to `timeoutMs`). */
  leader(timeoutMs?: number): Promise<EtcdMember>;
  /** followers answers the live members that are not the leader. */
  followers(): Promise<EtcdMember[]>;
  /** stop kills every member and deletes the data dirs. */
  stop(): Promise<void>;
}

/** EtcdClusterOptions configures a test cluster. */
export interface EtcdClusterOptions {
  /**
   * The uid each member runs as (by member index; undefined: ours), so that an iptables owner match can
   * tell one member's packets from the others' (test/support/netfault.ts). Needs root. Defaults to ours for all.
   */
  uids?: ReadonlyArray<number | undefined>;
}

/** startEtcdCluster starts `size` members (default 3) and waits until the cluster has a leader. */
export async function startEtcdCluster(size = 3, options: EtcdClusterOptions = {}): Promise<EtcdCluster> {
  if (etcdBinary === undefined) throw new Error('etcd is not installed');
  const dir = tempDir('etcd-cluster');
  const uids = options.uids ?? [];
  if (uids.some((u) => u !== undefined)) {
    // members of other uids must reach their own data dir: the folder is opened to all, each data dir is theirs alone
    chmodSync(dir.path, 0o755);
    for (let i = 0; i < size; i++) {
      const uid = uids[i];
      if (uid === undefined) continue;
      const data = `${dir.path}/m${i}`;
      mkdirSync(data, { mode: 0o700 });
      chownSync(data, uid, uid);
    }
  }
  const ports = await Promise.all(Array.from({ length: size }, async () => ({ client: await freePort(), peer: await freePort() })));
  const names = ports.map((_, i) => `m${i}`);
  const initial = ports.map((p, i) => `${names[i]}=http://127.0.0.1:${p.peer}`).join(',');
  const probes = new Map<string, Etcd3>();
  const probe = (endpoint: string) => {
    let c = probes.get(endpoint);
    if (c === undefined) {
      c = new Etcd3({ hosts: endpoint, faultHandling: { host: () => once as never, global: once as never } });
      probes.set(endpoint, c);
    }
    return c;
  };
  /** status of one member, or undefined when it does not answer within 500 ms. */
  const status = async (endpoint: string) => {
    try {
      return await probe(endpoint).maintenance.status({ deadline: new Date(Date.now() + 500) });
    } catch {
      return undefined;
    }
  };
  const members = ports.map((p, i) => {
    const endpoint = `http://127.0.0.1:${p.client}`;
    const args = [
      '--name',
      names[i]!,
      '--data-dir',
      `${dir.path}/${names[i]}`,
      '--listen-client-urls',
      endpoint,
      '--advertise-client-urls',
      endpoint,
      '--listen-peer-urls',
      `http://127.0.0.1:${p.peer}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${p.peer}`,
      '--initial-cluster',
      initial,
      '--initial-cluster-token',
      `bulwark-test-${process.pid}`,
      '--initial-cluster-state',
      'new',
      '--log-level',
      'error',
    ];
    const proc = new ServerProcess(`etcd ${names[i]}`, etcdBinary!, args, dir.path, uids[i]);
    let alive = false;
    const member: EtcdMember = {
      name: names[i]!,
      endpoint,
      peerPort: p.peer,
      uid: uids[i],
      process: proc,
      get alive() {
        return alive;
      },
      kill: async () => {
        alive = false;
        await proc.kill('SIGKILL');
      },
      restart: async () => {
        await proc.start(() => canConnect(p.client));
        alive = true;
        await waitFor(`${names[i]} to answer after its restart`, async () => (await status(endpoint))?.leader !== undefined, 15_000);
      },
    };
    return {
      member,
      start: async () => {
        await proc.start(() => canConnect(p.client));
        alive = true;
      },
    };
  });
  const cluster: EtcdCluster = {
    members: members.map((m) => m.member),
    endpoints: members.map((m) => m.member.endpoint),
    async leader(timeoutMs = 15_000) {
      let found: EtcdMember | undefined;
      await waitFor(
        'the cluster to agree on a leader',
        async () => {
          const live = cluster.members.filter((m) => m.alive);
          const answers = await Promise.all(live.map(async (m) => ({ m, s: await status(m.endpoint) })));
          const ids = new Set(answers.map((a) => a.s?.leader ?? 'none'));
          if (ids.size !== 1 || ids.has('none') || ids.has('0')) return false;
          found = answers.find((a) => a.s!.header.member_id === a.s!.leader)?.m;
          return found !== undefined;
        },
        timeoutMs,
      );
      return found!;
    },
    async followers() {
      const leader = await cluster.leader();
      return cluster.members.filter((m) => m.alive && m !== leader);
    },
    async stop() {
      for (const c of probes.values()) c.close();
      await Promise.all(cluster.members.map((m) => m.kill()));
      dir.remove();
    },
  };
  try {
    await Promise.all(members.map((m) => m.start()));
    await cluster.leader();
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

/** A fault-handling policy that runs the call once: a probe must say what one member answers. */
const once = {
  execute: <T>(fn: (ctx: { signal: AbortSignal; attempt: number }) => PromiseLike<T> | T) =>
    Promise.resolve().then(() => fn({ signal: new AbortController().signal, attempt: 1 })),
};
