/**
 * `bulwark registry ls | watch`: what a registry holds, for operators.
 *
 * - `--registry etcd://host:port[,host:port]` reads etcd itself (`--etcd-prefix`, as the nodes use it), in
 *   bulwark's layout or, with `--layout go-zero | go-micro`, in a Go fleet's (go-zero keys share no
 *   common start: there `--service` or `--etcd-prefix` is needed).
 * - `--registry memory` is a registry inside one process: `--node http://host:port` names a running
 *   `bulwark serve` node, and its membership is read from its `GET /v1/registry`.
 *
 * `ls` prints a table (or `--json`) and exits 0; `watch` prints the current list, then one line per
 * change (create / update / delete; `--json`: one JSON object per line) until SIGINT / SIGTERM. A node
 * has no watch to offer, so `watch --node` polls it every `--interval`. Exit codes as for `serve`: 2 for
 * a bad flag, 1 when the registry or the node cannot be read.
 */
import { parseFlags, UsageError, type FlagSpec } from './args.js';
import { etcdRegistryFlag } from './registry-flag.js';
import { reachEtcd, unreachableText, type MemberReach } from './etcd-reach.js';
import { ETCD_ACCESS_FLAGS, ETCD_ACCESS_HELP, readEtcdAccess } from './etcd-access.js';
import { delay } from '../core/index.js';
import { EtcdRegistry, type Registry, type RegistryEvent, type ServiceInstance } from '../registry/index.js';

const HELP = `bulwark registry — list or follow the services and instances of a registry

Usage: bulwark registry ls    [--registry etcd://host:port[,host:port] | --node url] [options]
       bulwark registry watch [--registry etcd://host:port[,host:port] | --node url] [options]

Options:
      --registry <memory|etcd://h:p[,h:p]>  where to read (default memory, which needs --node)
      --node <url>            a running 'bulwark serve' node: its membership (with --registry memory)
      --layout <name>         how etcd holds instances: bulwark, go-zero or go-micro (default bulwark)
      --etcd-prefix <path>    etcd key prefix (default the layout's: /bulwark/services, none for
                              go-zero, /micro/registry for go-micro)
      --service <name>        only this service (default every service)
      --json                  JSON instead of a table (watch: one object per line)
      --interval <time>       watch --node: how often to poll the node (default 1s)
      --timeout <time>        how long to wait for the registry or node (default 5s)
  -h, --help                  show this help

${ETCD_ACCESS_HELP}
Exit codes: 0 done, 1 the registry or node could not be read, 2 bad flags.
`;

/** REGISTRY_FLAGS are the flags of `bulwark registry ls | watch`. */
const REGISTRY_FLAGS: Readonly<Record<string, FlagSpec>> = {
  registry: { kind: 'string' },
  node: { kind: 'string' },
  'etcd-prefix': { kind: 'string' },
  layout: { kind: 'string' },
  service: { kind: 'string' },
  json: { kind: 'boolean' },
  interval: { kind: 'duration' },
  timeout: { kind: 'duration' },
  help: { kind: 'boolean', alias: 'h' },
  ...ETCD_ACCESS_FLAGS,
};

interface Service {
  name: string;
  instances: { id: string; address: string; version?: string; metadata?: Readonly<Record<string, string>> }[];
}

/** Source reads a registry's services (and, for watch, follows them). */
interface Source {
  list(): Promise<Service[]>;
  close(): Promise<void>;
}

/** runRegistry runs `bulwark registry …`; answers the exit code. */
export async function runRegistry(argv: string[]): Promise<number> {
  const [verb, ...rest] = argv;
  if (verb === undefined || verb === 'help' || verb === '--help' || verb === '-h') {
    process.stdout.write(HELP);
    return verb === undefined ? 2 : 0;
  }
  let flags;
  try {
    if (verb !== 'ls' && verb !== 'watch') throw new UsageError(`unknown subcommand ${JSON.stringify(verb)} (want ls or watch)`);
    flags = parseFlags(rest, REGISTRY_FLAGS);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bulwark registry: ${err.message}\n`);
    return 2;
  }
  if (flags.help === true) {
    process.stdout.write(HELP);
    return 0;
  }
  let source: Source;
  let etcd: EtcdRegistry | undefined;
  let endpoints: string[] = [];
  const timeoutMs = (flags.timeout as number | undefined) ?? 5_000;
  const service = flags.service as string | undefined;
  try {
    const reg = ((flags.registry as string | undefined) ?? 'memory').trim();
    const node = flags.node as string | undefined;
    if (reg === 'memory') {
      if (flags.layout !== undefined) throw new UsageError('--layout is how etcd holds instances; it needs --registry etcd://…');
      const etcdFlag = Object.keys(ETCD_ACCESS_FLAGS).find((f) => flags[f] !== undefined);
      if (etcdFlag !== undefined) throw new UsageError(`--${etcdFlag} is how to reach a secured etcd; it needs --registry etcd://…`);
      if (node === undefined) throw new UsageError('--registry memory lives inside a node: give --node http://host:port of a running bulwark serve');
      source = nodeSource(nodeUrl(node), timeoutMs);
    } else if (reg.startsWith('etcd://')) {
      if (node !== undefined) throw new UsageError('--node reads a memory registry; with --registry etcd://… leave it out');
      const access = readEtcdAccess(etcdRegistryFlag(reg), flags);
      endpoints = access.hosts;
      const layout = (flags.layout as string | undefined) ?? 'bulwark';
      if (layout !== 'bulwark' && layout !== 'go-zero' && layout !== 'go-micro')
        throw new UsageError(`--layout must be bulwark, go-zero or go-micro, got ${JSON.stringify(layout)}`);
      const prefix = flags['etcd-prefix'] as string | undefined;
      if (layout === 'go-zero' && prefix === undefined && service === undefined) {
        throw new UsageError('go-zero keys start with the service name itself (its Key): give --service <name>, or --etcd-prefix when the Keys share one');
      }
      // a value that is not an instance is skipped: say so, as the library does, rather than hide it
      const onWarning = (message: string) => void process.stderr.write(`${message}\n`);
      etcd = new EtcdRegistry({
        hosts: endpoints,
        ...(access.tls === undefined ? {} : { tls: access.tls }),
        ...(access.auth === undefined ? {} : { auth: access.auth }),
        layout,
        ...(prefix === undefined ? {} : { prefix }),
        dialTimeoutMs: timeoutMs,
        onWarning,
      });
      source = etcdSource(etcd, service);
    } else throw new UsageError(`--registry must be memory or etcd://host:port[,host:port], got ${JSON.stringify(reg)}`);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bulwark registry: ${err.message}\n`);
    return 2;
  }
  const json = flags.json === true;
  const only = (list: Service[]) => (service === undefined ? list : list.filter((s) => s.name === service));
  const printList = (list: Service[]) =>
    process.stdout.write(
      json && verb === 'ls'
        ? `${JSON.stringify({ services: list }, null, 2)}\n`
        : json
          ? `${JSON.stringify({ type: 'list', services: list })}\n`
          : table(list, service),
    );
  // Beside the first listing, a connection to each member: if every one fails with a cause, say it at once.
  let reach: Promise<MemberReach[]> = Promise.resolve([]);
  /** unreachable rejects once every member failed with a known cause; it never settles otherwise. */
  const unreachable = (): Promise<never> => {
    reach = reachEtcd(endpoints, timeoutMs);
    return reach.then((r) => {
      const why = unreachableText(r);
      if (why === undefined) return new Promise<never>(() => {});
      throw new Error(`cannot reach etcd at ${why}`);
    });
  };
  try {
    if (verb === 'ls') {
      const listed = source.list();
      listed.catch(() => {}); // awaited below, or abandoned when no member can be reached
      printList(only(etcd === undefined ? await listed : await Promise.race([listed, unreachable()])));
      return 0;
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      const print = (type: RegistryEvent['type'], name: string, inst: Service['instances'][number]) =>
        process.stdout.write(
          json
            ? `${JSON.stringify({ type, service: name, instance: inst })}\n`
            : `${new Date().toISOString()}  ${type.padEnd(6)}  ${name}  ${inst.id}  ${inst.address}${metaText(inst.metadata)}\n`,
        );
      if (etcd !== undefined) await Promise.race([followEtcd(etcd, service, stop.signal, printList, print), unreachable()]);
      else {
        const first = only(await source.list());
        printList(first);
        await pollNode(source, first, only, (flags.interval as number | undefined) ?? 1_000, stop.signal, print);
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return 0;
  } catch (err) {
    const e = err as Error & { code?: string };
    let why = e.message;
    if (e.code === 'ERR_REGISTRY_UNAVAILABLE' && etcd !== undefined) {
      const causes = (await reach).filter((r) => r.cause !== undefined).map((r) => `${r.member}: ${r.cause}`);
      why = `cannot reach etcd at ${String(flags.registry).slice('etcd://'.length)} within ${timeoutMs} ms${causes.length === 0 ? '' : ` (${causes.join('; ')})`}`;
    }
    process.stderr.write(`bulwark registry: ${why}\n`);
    return 1;
  } finally {
    await source.close();
  }
}

function nodeUrl(text: string): string {
  try {
    const u = new URL(text);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.origin;
  } catch {
    // below
  }
  throw new UsageError(`--node must be a URL like http://127.0.0.1:8080, got ${JSON.stringify(text)}`);
}

function nodeSource(url: string, timeoutMs: number): Source {
  return {
    async list() {
      let res;
      try {
        res = await fetch(`${url}/v1/registry`, { signal: AbortSignal.timeout(timeoutMs) });
      } catch (err) {
        const cause = (err as { cause?: { code?: string } }).cause?.code;
        throw new Error(`cannot read the node at ${url}: ${cause ?? (err as Error).message}`);
      }
      if (res.status !== 200) throw new Error(`the node at ${url} answered ${res.status} to /v1/registry`);
      const body = (await res.json()) as { services?: Service[] };
      if (!Array.isArray(body.services)) throw new Error(`the node at ${url} answered something that is not a registry view`);
      return body.services.map((s) => ({
        name: s.name,
        instances: s.instances.map((i) => ({ id: i.id, address: i.address, metadata: { url: (i as { url?: string }).url ?? '' } })),
      }));
    },
    close: () => Promise.resolve(),
  };
}

/** etcdSource lists every service, or only `service` (without listing every service: go-zero keys have no common start). */
function etcdSource(registry: Registry, service: string | undefined): Source {
  return {
    async list() {
      const names = service !== undefined ? [service] : (await registry.listServices()).sort();
      const out: Service[] = [];
      for (const name of names) {
        const instances = await registry.getService(name).catch((err: unknown) => {
          if ((err as { code?: string }).code === 'ERR_NOT_FOUND') return [] as readonly ServiceInstance[];
          throw err;
        });
        if (instances.length > 0) out.push({ name, instances: [...instances].sort((a, b) => a.id.localeCompare(b.id)).map(plain) });
      }
      return out;
    },
    close: () => registry.close(),
  };
}

function plain(i: ServiceInstance): Service['instances'][number] {
  return {
    id: i.id,
    address: i.address,
    ...(i.version === undefined ? {} : { version: i.version }),
    ...(i.metadata === undefined ? {} : { metadata: i.metadata }),
  };
}

type Print = (type: RegistryEvent['type'], name: string, inst: Service['instances'][number]) => void;

/**
 * followEtcd prints the list, then etcd's changes until `signal` aborts, as the library follows a
 * registry: the watch is opened first, the services are listed once it is established (`onReady`), and
 * an event is printed only when it is newer than the listing of its service (its revision above the
 * listing's), so a change is neither lost between the listing and the watch nor printed twice. A watch
 * that fails (the watcher fell behind, or etcd refused) is opened again after a pause and the services
 * listed again: what changed meanwhile is printed as the changes between the two listings. A first
 * listing that fails ends the command (exit 1).
 */
async function followEtcd(
  registry: EtcdRegistry,
  service: string | undefined,
  signal: AbortSignal,
  printList: (list: Service[]) => void,
  print: Print,
): Promise<void> {
  const key = (name: string, id: string) => `${name}\u0000${id}`;
  let view: Map<string, { name: string; inst: Service['instances'][number] }> | undefined;
  while (!signal.aborted) {
    const attempt = new AbortController();
    const onAbort = () => attempt.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      let ready!: () => void;
      const established = new Promise<void>((r) => (ready = r));
      const it = registry.watch({ ...(service === undefined ? {} : { service }), signal: attempt.signal, onReady: ready })[Symbol.asyncIterator]();
      const first = it.next();
      first.catch(() => {}); // observed below; a failure before onReady must not go unhandled meanwhile
      await Promise.race([established, first]);
      if (signal.aborted) return;
      const { services, revisions } = await listWithRevisions(registry, service);
      const now = new Map(services.flatMap((s) => s.instances.map((i) => [key(s.name, i.id), { name: s.name, inst: i }] as const)));
      if (view === undefined) printList(services);
      else {
        for (const [k, v] of now) {
          const was = view.get(k);
          if (was === undefined) print('create', v.name, v.inst);
          else if (JSON.stringify(was.inst) !== JSON.stringify(v.inst)) print('update', v.name, v.inst);
        }
        for (const [k, v] of view) if (!now.has(k)) print('delete', v.name, v.inst);
      }
      view = now;
      for (let r = await first; !r.done; r = await it.next()) {
        const e = r.value;
        // already in the listing of its service: printed as part of it
        if (e.revision !== undefined && e.revision <= (revisions.get(e.instance.name) ?? 0)) continue;
        const inst = plain(e.instance);
        if (e.type === 'delete') view.delete(key(e.instance.name, inst.id));
        else view.set(key(e.instance.name, inst.id), { name: e.instance.name, inst });
        print(e.type, e.instance.name, inst);
      }
    } catch (err) {
      if (signal.aborted) return;
      if (view === undefined) throw err;
      process.stderr.write(`bulwark registry: watch: ${(err as Error).message}; watching again\n`);
    } finally {
      signal.removeEventListener('abort', onAbort);
      attempt.abort();
    }
    await delay(1_000, signal).catch(() => {});
  }
}

/** listWithRevisions lists every service (or one) and the revision each was read at. */
async function listWithRevisions(registry: EtcdRegistry, service: string | undefined): Promise<{ services: Service[]; revisions: Map<string, number> }> {
  const names = service === undefined ? (await registry.listServices()).sort() : [service];
  const services: Service[] = [];
  const revisions = new Map<string, number>();
  for (const name of names) {
    const listing = await registry.getServiceListing(name);
    revisions.set(name, listing.revision);
    if (listing.instances.length > 0) services.push({ name, instances: [...listing.instances].sort((a, b) => a.id.localeCompare(b.id)).map(plain) });
  }
  return { services, revisions };
}

/** pollNode reads the node every `intervalMs` and prints what changed. */
async function pollNode(
  source: Source,
  first: Service[],
  only: (l: Service[]) => Service[],
  intervalMs: number,
  signal: AbortSignal,
  print: (type: RegistryEvent['type'], name: string, inst: Service['instances'][number]) => void,
): Promise<void> {
  const key = (s: string, id: string) => `${s}\u0000${id}`;
  const index = (list: Service[]) => new Map(list.flatMap((s) => s.instances.map((i) => [key(s.name, i.id), { name: s.name, inst: i }] as const)));
  let last = index(first);
  while (!signal.aborted) {
    await delay(intervalMs, signal).catch(() => {});
    if (signal.aborted) return;
    let now;
    try {
      now = index(only(await source.list()));
    } catch (err) {
      process.stderr.write(`bulwark registry: ${(err as Error).message}; trying again\n`);
      continue;
    }
    for (const [k, v] of now) {
      const was = last.get(k);
      if (was === undefined) print('create', v.name, v.inst);
      else if (JSON.stringify(was.inst) !== JSON.stringify(v.inst)) print('update', v.name, v.inst);
    }
    for (const [k, v] of last) if (!now.has(k)) print('delete', v.name, v.inst);
    last = now;
  }
}

function metaText(m: Readonly<Record<string, string>> | undefined): string {
  if (m === undefined) return '';
  const parts = Object.entries(m).map(([k, v]) => `${k}=${v}`);
  return parts.length === 0 ? '' : `  ${parts.join(' ')}`;
}

function table(services: Service[], service: string | undefined): string {
  if (services.length === 0) return service === undefined ? 'no services registered\n' : `no instances of ${service} registered\n`;
  const rows = [['SERVICE', 'ID', 'ADDRESS', 'VERSION', 'METADATA']];
  for (const s of services) for (const i of s.instances) rows.push([s.name, i.id, i.address, i.version ?? '-', metaText(i.metadata).trim() || '-']);
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const total = services.reduce((n, s) => n + s.instances.length, 0);
  return `${rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ')).join('\n')}\n${services.length} service${services.length === 1 ? '' : 's'}, ${total} instance${total === 1 ? '' : 's'}\n`;
}
