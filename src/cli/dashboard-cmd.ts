/**
 * `bulwark dashboard --registry etcd://…`: the fleet's dashboard. It lists the registry's services,
 * follows every instance that announces its dashboard's event stream in its metadata (the
 * `bulwark.status` key: a path, fetched from the instance's registered address only), and serves one
 * page that shows them per service and per instance, merged once per tick whatever the number of
 * viewers. Instances that leave the registry are shown as gone. With `--rules etcd://… --controls`
 * the page's controls write rules to that store (an EtcdRuleStore), for the instance shown. Its flags
 * are read with node:util's parseArgs.
 */
import { parseArgs } from 'node:util';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dashboardHandler, FleetFeed, STATUS_PATH_KEY } from '../dashboard/index.js';
import { EtcdRegistry } from '../registry/index.js';
import { EtcdRuleStore } from '../rules/index.js';
import { parseDuration, UsageError } from './args.js';
import { etcdEndpoints } from '../registry/index.js';
import { etcdRegistryFlag } from './registry-flag.js';

const HELP = `bulwark dashboard — one page for the fleet: every instance that publishes its dashboard

Usage: bulwark dashboard --registry etcd://host:port[,host:port] [options]

Follows every instance of every service in the registry whose metadata announces the path of its
dashboard's event stream under the key "${STATUS_PATH_KEY}" (e.g. /dashboard/events: what
dashboardHandler serves under /dashboard). Only that path is fetched, from the address the instance
registered. The page shows each service's instances: up, unreachable (with the reason) or gone.

Options:
      --registry <spec>       etcd://host:port[,host:port] (required)
      --etcd-prefix <path>    etcd key prefix of the registry (default /bulwark/services)
      --listen <host:port>    where the page is served (default 127.0.0.1:9090)
      --path <path>           the page's path (default /)
      --token <text>          the token a viewer beyond loopback must give (?token= or Authorization:
                              Bearer); required when --listen is not a loopback address. Prefer
                              BULWARK_DASHBOARD_TOKEN: a flag is visible in ps
      --rules <spec>          etcd://host:port[,host:port]: the rules store (bulwark/rules) the page's
                              controls write to — isolate / reset a breaker, change a limit, shift a
                              weight, start a fault rehearsal — for the instance shown
      --rules-prefix <path>   etcd key prefix of the rules (default /bulwark/rules/)
      --controls              turn the controls on (needs --rules); without it the page is read-only.
                              Beyond loopback they need the token; another origin is refused
      --instance-token <text> the token sent to the instances (theirs, for instances beyond loopback);
                              or BULWARK_INSTANCE_TOKEN
      --tick <time>           how often the page is updated (default 1s)
      --refresh <time>        how often the registry is listed (default 2s)
  -h, --help                  show this help
`;

/** runDashboard runs the fleet dashboard until SIGINT / SIGTERM; answers the exit code. */
export async function runDashboard(argv: string[]): Promise<number> {
  let o;
  try {
    o = read(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`bulwark dashboard: ${err.message}\n\n${HELP}`);
    return 2;
  }
  if (o === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  const registry = new EtcdRegistry({
    hosts: o.hosts,
    ...(o.prefix === undefined ? {} : { prefix: o.prefix }),
    onWarning: (m) => void process.stderr.write(`${m}\n`),
  });
  const feed = new FleetFeed(registry, {
    tickMs: o.tickMs,
    refreshMs: o.refreshMs,
    ...(o.instanceToken === undefined ? {} : { token: o.instanceToken }),
    onWarning: (m) => void process.stderr.write(`${m}\n`),
  });
  const rules = o.rules === undefined ? undefined : new EtcdRuleStore({ hosts: o.rules, ...(o.rulesPrefix === undefined ? {} : { prefix: o.rulesPrefix }) });
  const handler = dashboardHandler(feed, {
    path: o.path,
    title: 'bulwark fleet',
    ...(o.token === undefined ? {} : { token: o.token }),
    ...(rules === undefined ? {} : { controls: { store: rules } }),
  });
  const server = createServer(handler);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port, o.host, () => resolve());
    });
  } catch (err) {
    await Promise.all([handler.close(), feed.close(), registry.close(), rules?.close()]);
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`bulwark dashboard: --listen ${o.host}:${o.port}: ${e.code ?? e.message}\n`);
    return 2;
  }
  const a = server.address() as AddressInfo;
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  const writes = rules === undefined ? '' : `; controls on, writing rules to ${o.rules!.join(', ')}`;
  process.stdout.write(
    `bulwark dashboard: http://${host}:${a.port}${handler.path === '/' ? '/' : `${handler.path}/`} (following ${o.hosts.join(', ')}${writes})\n`,
  );
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  process.stdout.write(`bulwark dashboard: ${signal}: stopping\n`);
  await handler.close();
  await feed.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await registry.close();
  await rules?.close();
  return 0;
}

interface DashboardConfig {
  hosts: string[];
  prefix: string | undefined;
  host: string;
  port: number;
  path: string;
  token: string | undefined;
  instanceToken: string | undefined;
  /** The rules store's members, when the controls are on. */
  rules: string[] | undefined;
  rulesPrefix: string | undefined;
  tickMs: number;
  refreshMs: number;
}

function read(argv: string[]): DashboardConfig | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        registry: { type: 'string' },
        'etcd-prefix': { type: 'string' },
        listen: { type: 'string', default: '127.0.0.1:9090' },
        path: { type: 'string', default: '/' },
        token: { type: 'string' },
        'instance-token': { type: 'string' },
        rules: { type: 'string' },
        'rules-prefix': { type: 'string' },
        controls: { type: 'boolean' },
        tick: { type: 'string', default: '1s' },
        refresh: { type: 'string', default: '2s' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help === true) return 'help';
  if (values.registry === undefined) throw new UsageError('--registry etcd://host:port is required');
  if (!values.registry.startsWith('etcd://')) throw new UsageError(`--registry must be etcd://host:port[,host:port], got ${JSON.stringify(values.registry)}`);
  const hosts = etcdRegistryFlag(values.registry);
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:]+)):(\d{1,5})$/.exec(values.listen);
  if (m === null || Number(m[3]) > 65_535) throw new UsageError(`--listen must be host:port, got ${JSON.stringify(values.listen)}`);
  const host = m[1] ?? m[2]!;
  const token = values.token ?? process.env.BULWARK_DASHBOARD_TOKEN;
  if (token !== undefined && token.length < 8) throw new UsageError('--token must be at least 8 characters');
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host);
  if (!loopback && token === undefined) throw new UsageError(`--listen ${values.listen} is beyond loopback: give --token (or BULWARK_DASHBOARD_TOKEN)`);
  if (values.controls === true && values.rules === undefined) throw new UsageError('--controls writes rules: give --rules etcd://host:port');
  if (values.rules !== undefined && values.controls !== true)
    throw new UsageError('--rules is the store the controls write to: give --controls as well (without both the page is read-only)');
  if (values.rules !== undefined && !values.rules.startsWith('etcd://'))
    throw new UsageError(`--rules must be etcd://host:port[,host:port], got ${JSON.stringify(values.rules)}`);
  if (values['rules-prefix'] !== undefined && !values['rules-prefix'].endsWith('/'))
    throw new UsageError(`--rules-prefix must end in /, got ${JSON.stringify(values['rules-prefix'])}`);
  let rules: string[] | undefined;
  try {
    rules = values.rules === undefined ? undefined : etcdEndpoints('--rules', values.rules);
  } catch {
    throw new UsageError(`--rules must be etcd://host:port[,host:port], got ${JSON.stringify(values.rules)}`);
  }
  if (!values.path.startsWith('/')) throw new UsageError(`--path must start with /, got ${JSON.stringify(values.path)}`);
  const tickMs = parseDuration('--tick', values.tick);
  const refreshMs = parseDuration('--refresh', values.refresh);
  if (tickMs < 100) throw new UsageError(`--tick must be at least 100ms, got ${values.tick}`);
  if (refreshMs < 100) throw new UsageError(`--refresh must be at least 100ms, got ${values.refresh}`);
  return {
    hosts,
    prefix: values['etcd-prefix'],
    host,
    port: Number(m[3]),
    path: values.path,
    token,
    instanceToken: values['instance-token'] ?? process.env.BULWARK_INSTANCE_TOKEN,
    rules,
    rulesPrefix: values['rules-prefix'],
    tickMs,
    refreshMs,
  };
}
