/**
 * The configuration of `bulwark serve`: one table of options, each read from a flag (`--cache-bytes`),
 * an environment variable (`BULWARK_CACHE_BYTES`) or a JSON config file (`"cache-bytes": "64MiB"`),
 * in that order of precedence, then the default. A value means the same wherever it comes from (a bare
 * number of a duration is seconds everywhere), and every value is checked before the node starts: a
 * bad one is a UsageError that names the flag, which main.ts prints on one line and exits 2.
 */
import { readFileSync } from 'node:fs';
import { parseDuration, parseFlags, UsageError, type FlagSpec, type ParsedFlags } from '../args.js';
import { etcdRegistryFlag } from '../registry-flag.js';
import { readEtcdAccess, type EtcdAccess } from '../etcd-access.js';

/** OptionKind is how an option's text is read. */
type OptionKind = 'string' | 'duration' | 'size' | 'integer' | 'number' | 'boolean' | 'list';

/** OptionSpec documents one option: its kind, its default (as written on the command line) and its help line. */
interface OptionSpec {
  readonly kind: OptionKind;
  /** The default as text, or undefined when the option has none (or a computed one, told in `help`). */
  readonly default?: string;
  readonly help: string;
  /** Shown as the value's name in --help. */
  readonly value?: string;
  readonly alias?: string;
  /** Starts a section of --help with this title. */
  readonly section?: string;
  /** How --help shows the default when the bare default would read oddly. */
  readonly defaultText?: string;
}

/** The shortest peer secret taken: 16 characters (an HMAC key much shorter is guessable offline). */
const MIN_SECRET_LENGTH = 16;

/** SERVE_OPTIONS is every option of `bulwark serve`, in --help order. */
export const SERVE_OPTIONS = {
  listen: {
    section: 'Node',
    kind: 'string',
    default: '127.0.0.1:8080',
    value: 'host:port',
    help: 'where the node listens (client API, peer protocol, /metrics, /status)',
  },
  advertise: { kind: 'string', value: 'url', help: 'the URL peers reach this node at (default: http://<listen>; required when listening on 0.0.0.0 or ::)' },
  registry: {
    section: 'Membership',
    kind: 'string',
    default: 'memory',
    value: 'spec',
    help: "'memory' (static --peers) or etcd://host:port[,host:port] (the nodes find each other)",
  },
  peers: { kind: 'list', default: '', value: 'url,url', help: 'the other nodes, with --registry memory (this node is always a member)' },
  'etcd-prefix': { kind: 'string', default: '/bulwark/services', value: 'path', help: 'etcd key prefix of the registry' },
  service: { kind: 'string', default: 'bulwark-cache', value: 'name', help: 'the service the nodes register under' },
  'lease-ttl': { kind: 'duration', default: '15s', value: 'time', help: 'etcd lease TTL: a node that dies leaves the ring after this' },
  'etcd-ca': { kind: 'string', value: 'file', help: "PEM CA of etcd's certificate; turns TLS on (the etcd:// members are reached over https)" },
  'etcd-cert': { kind: 'string', value: 'file', help: "PEM client certificate, for etcd's --client-cert-auth (with --etcd-key)" },
  'etcd-key': { kind: 'string', value: 'file', help: 'PEM key of --etcd-cert' },
  'etcd-server-name': { kind: 'string', value: 'name', help: "the name etcd's certificate carries, when it is not the member's host" },
  'etcd-user': {
    kind: 'string',
    value: 'name',
    help: "etcd user (etcd's auth enable); its password from BULWARK_ETCD_PASSWORD or --etcd-password-file, never a flag (ps shows flags)",
  },
  'etcd-password-file': { kind: 'string', value: 'path', help: "read the etcd user's password from this file (trailing newline dropped)" },
  group: {
    section: 'Cache',
    kind: 'list',
    default: 'default',
    defaultText: 'one group named default',
    value: 'name',
    help: 'a group to serve (repeat, or a comma list); the same on every node',
  },
  'cache-bytes': { kind: 'size', default: '64MiB', value: 'size', help: 'main cache per group (keys this node owns), e.g. 512KiB, 64MiB, 1GiB' },
  'hot-cache-bytes': { kind: 'size', value: 'size', help: 'hot cache per group (popular keys owned elsewhere) (default: cache-bytes / 8)' },
  ttl: { kind: 'duration', default: '0', value: 'time', help: 'how long a loaded value lives, jittered by ±--ttl-jitter; 0 keeps it until evicted' },
  'negative-ttl': {
    kind: 'duration',
    default: '5s',
    value: 'time',
    help: 'how long an origin 404 is remembered, jittered by ±--ttl-jitter; 0 never caches misses',
  },
  'ttl-jitter': {
    kind: 'number',
    default: '0.1',
    value: 'share',
    help: 'each TTL is spread at random by this share, 0–0.99 (0.1 = ±10 %), so values loaded together do not expire together',
  },
  'stale-bytes': {
    kind: 'size',
    value: 'size',
    help: 'per group, last good values kept to answer when the origin fails (default: cache-bytes / 4; 0 turns stale answers off)',
  },
  'stale-max-age': { kind: 'duration', default: '1h', value: 'time', help: 'the oldest stale value served when the origin fails' },
  'peer-secret': {
    section: 'Peers',
    kind: 'string',
    value: 'text',
    help: 'sign peer requests (HMAC-SHA256), at least 16 characters; visible in ps: prefer BULWARK_PEER_SECRET or --peer-secret-file',
  },
  'peer-secret-file': { kind: 'string', value: 'path', help: 'read the peer secret from this file (trailing newline dropped)' },
  'peer-timeout': {
    kind: 'duration',
    value: 'time',
    help: "one peer request's deadline (default: load-timeout + 500ms, so a peer waits out the owner's load)",
  },
  'ring-replicas': {
    kind: 'integer',
    value: 'n',
    help: "virtual nodes per peer on the hash ring (default: the cache library's: 1280, or 50 with --protocol groupcache)",
  },
  owners: {
    kind: 'integer',
    default: '1',
    value: 'n',
    help: 'each key is owned by its first n nodes on the ring (1–8), so a node leaving or joining keeps its keys cached',
  },
  protocol: {
    kind: 'string',
    default: 'bulwark',
    value: 'name',
    help: "peer protocol: 'bulwark' (signing, TTLs, removal) or 'groupcache' (join Go groupcache nodes: /_groupcache/, Go's ring; no secret, owners 1)",
  },
  origin: {
    section: 'Origin',
    kind: 'string',
    value: 'url',
    help: 'the origin, a URL template: {key} (and {group}) are replaced, percent-encoded; 404 → not found',
  },
  getter: { kind: 'string', value: 'path', help: 'a JS module whose default export loads a key: (key, { signal, group }) => value' },
  'origin-timeout': { kind: 'duration', default: '2s', value: 'time', help: 'one origin request, headers and body' },
  'load-timeout': { kind: 'duration', value: 'time', help: 'a whole load: waiting for an origin slot plus the request (default: 2 × origin-timeout)' },
  'origin-rate': { kind: 'number', default: '0', value: 'per second', help: 'origin requests per second (token bucket, burst = rate); 0 for no limit' },
  'origin-concurrency': { kind: 'integer', default: '64', value: 'n', help: 'origin requests at once' },
  'origin-queue': { kind: 'integer', default: '256', value: 'n', help: 'loads waiting for an origin slot; more are refused at once' },
  'request-timeout': {
    section: 'Server and lifecycle',
    kind: 'duration',
    default: '5s',
    value: 'time',
    help: 'the time a client has to send a whole request (slowloris guard)',
  },
  'headers-timeout': { kind: 'duration', default: '5s', value: 'time', help: "the time a client has to send a request's headers" },
  'keep-alive-timeout': { kind: 'duration', default: '5s', value: 'time', help: 'idle keep-alive connections are closed after this' },
  'drain-delay': { kind: 'duration', default: '1s', value: 'time', help: 'at SIGTERM, time between leaving the registry and closing the listener' },
  'shutdown-timeout': { kind: 'duration', default: '10s', value: 'time', help: 'at SIGTERM, the longest drain before the node exits anyway' },
  config: { section: 'Other', kind: 'string', value: 'path', help: 'a JSON file of these options by flag name, e.g. {"cache-bytes": "64MiB"}' },
  quiet: { kind: 'boolean', help: 'print nothing but errors' },
  help: { kind: 'boolean', alias: 'h', help: 'show this help' },
} as const satisfies Record<string, OptionSpec>;

type Name = keyof typeof SERVE_OPTIONS;

/** ServeConfig is the checked configuration of one node. */
export interface ServeConfig {
  listenHost: string;
  listenPort: number;
  advertise: string;
  registry: { kind: 'memory'; peers: string[] } | ({ kind: 'etcd'; prefix: string; leaseTtlMs: number } & EtcdAccess);
  service: string;
  groups: string[];
  cacheBytes: number;
  hotCacheBytes: number;
  ttlMs: number;
  negativeTtlMs: number;
  /** Each TTL's random spread, a share (Group `ttlJitter`). */
  ttlJitter: number;
  staleBytes: number;
  staleMaxAgeMs: number;
  peerSecret: string | undefined;
  peerTimeoutMs: number;
  ringReplicas: number | undefined;
  /** Each key's owners on the ring (HttpPool `owners`). */
  owners: number;
  /** The peer protocol (HttpPool `protocol`). */
  protocol: 'bulwark' | 'groupcache';
  origin: { kind: 'url'; template: string } | { kind: 'module'; path: string };
  originTimeoutMs: number;
  loadTimeoutMs: number;
  originRate: number;
  originConcurrency: number;
  originQueue: number;
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  drainDelayMs: number;
  shutdownTimeoutMs: number;
  quiet: boolean;
}

/** envName is the environment variable of an option: `cache-bytes` → `BULWARK_CACHE_BYTES`. */
export function envName(name: string): string {
  return `BULWARK_${name.toUpperCase().replace(/-/g, '_')}`;
}

/** serveHelp renders `bulwark serve --help` from the option table. */
export function serveHelp(): string {
  const WIDTH = 100;
  const LEFT = 30;
  const lines: string[] = [];
  for (const [name, s] of Object.entries(SERVE_OPTIONS)) {
    const spec = s as OptionSpec;
    if (spec.section !== undefined) lines.push('', `${spec.section}:`);
    const left = `  ${spec.alias === undefined ? '    ' : `-${spec.alias}, `}--${name}${spec.value === undefined ? '' : ` <${spec.value}>`}`;
    const def = spec.defaultText ?? (spec.default === undefined ? undefined : spec.default === '' ? 'none' : spec.default);
    const words = `${spec.help}${def === undefined ? '' : ` (default ${def})`}`.split(' ');
    let line = left.length >= LEFT ? '' : left.padEnd(LEFT);
    if (line === '') lines.push(left);
    for (const w of words) {
      if (line.trim() !== '' && line.length + 1 + w.length > WIDTH && line.length > LEFT) {
        lines.push(line);
        line = '';
      }
      if (line === '') line = ' '.repeat(LEFT) + w;
      else line += (line.length === LEFT ? '' : ' ') + w;
    }
    lines.push(line);
  }
  return `bulwark serve — run one node of a distributed cache in front of a slow origin

Usage: bulwark serve --origin 'http://origin/items/{key}' [options]
       bulwark serve --getter ./getter.js [options]

Every option can also be set by an environment variable (--cache-bytes → BULWARK_CACHE_BYTES)
or in the --config file; a flag wins over the environment, which wins over the file.
Durations: 500ms, 2s, 1m, 1h (a bare number is seconds). Sizes: bytes, or with KiB, MiB, GiB.

Client API:
  GET    /v1/groups/<group>/keys/<key>  the value; x-bulwark-source: main|hot|peer|origin|stale
  DELETE /v1/groups/<group>/keys/<key>  remove the key on every node
  /_bulwark/ or /_groupcache/ (peer protocol)  /metrics  /status  /dashboard/  /healthz  /readyz (ready once membership is known)
${lines.join('\n')}
`;
}

/**
 * readServeConfig reads argv, the environment and the config file, checks every value and answers the
 * config (or `'help'`). A bad value is named where it came from: `--peer-secret` for a flag,
 * `BULWARK_PEER_SECRET` for the environment, `"peer-secret" in <file>` for the config file — an operator
 * who never typed the flag is told what to fix.
 */
export function readServeConfig(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ServeConfig | 'help' {
  const from = new Map<string, string>();
  try {
    return readConfig(argv, env, from);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    const m = /^--([a-z-]+)/.exec(err.message);
    const source = m === null ? undefined : from.get(m[1]!);
    throw source === undefined ? err : new UsageError(source + err.message.slice(m![0].length));
  }
}

/** readConfig is readServeConfig; `from` receives where each option read from the environment or the file came from. */
function readConfig(argv: readonly string[], env: NodeJS.ProcessEnv, from: Map<string, string>): ServeConfig | 'help' {
  const specs: Record<string, FlagSpec> = {};
  for (const [name, s] of Object.entries(SERVE_OPTIONS)) {
    const spec = s as OptionSpec;
    specs[name] = {
      kind: spec.kind === 'boolean' ? 'boolean' : 'string',
      ...(spec.alias === undefined ? {} : { alias: spec.alias }),
      ...(spec.kind === 'list' ? { repeat: true } : {}),
    };
  }
  const flags = parseFlags(argv, specs);
  if (flags.help === true) return 'help';
  const configPath = (flags.config as string | undefined) ?? env[envName('config')];
  const file = configPath === undefined ? {} : readConfigFile(configPath);
  /** text answers an option's text: flag, environment, file, default. */
  const text = (name: Name): string | undefined => {
    const f = flags[name];
    if (f !== undefined) return String(f);
    const e = env[envName(name)];
    if (e !== undefined) {
      from.set(name, envName(name));
      return e;
    }
    if (Object.hasOwn(file, name)) {
      from.set(name, `${JSON.stringify(name)} in ${configPath}`);
      return file[name];
    }
    return (SERVE_OPTIONS[name] as OptionSpec).default;
  };
  const duration = (name: Name): number | undefined => {
    const t = text(name);
    if (t === undefined) return undefined;
    if (/^\s*0+(\.0*)?\s*(ms|s|m|h)?\s*$/.test(t)) return 0;
    return parseDuration(name, t);
  };
  const required = <T>(name: Name, v: T | undefined): T => {
    if (v === undefined) throw new UsageError(`--${name} is required`);
    return v;
  };
  const size = (name: Name): number | undefined => {
    const t = text(name);
    return t === undefined ? undefined : parseSize(name, t);
  };
  const int = (name: Name, min: number, max: number): number | undefined => {
    const t = text(name);
    if (t === undefined) return undefined;
    if (!/^\d+$/.test(t.trim()) || Number(t) < min || Number(t) > max)
      throw new UsageError(`--${name} must be a whole number in ${min}–${max}, got ${JSON.stringify(t)}`);
    return Number(t);
  };
  const num = (name: Name, min: number): number => {
    const t = required(name, text(name));
    const n = Number(t);
    if (t.trim() === '' || !Number.isFinite(n) || n < min) throw new UsageError(`--${name} must be a number ≥ ${min}, got ${JSON.stringify(t)}`);
    return n;
  };
  const list = (name: Name): string[] =>
    (text(name) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');

  const [listenHost, listenPort] = parseListen(required('listen', text('listen')));
  const wildcard = listenHost === '0.0.0.0' || listenHost === '::';
  const adv = text('advertise');
  if (adv === undefined && wildcard) throw new UsageError(`--advertise is required when --listen is ${listenHost} (peers need an address they can reach)`);
  const advertise = peerUrl('advertise', adv ?? `http://${listenHost.includes(':') ? `[${listenHost}]` : listenHost}:${listenPort}`);

  const reg = required('registry', text('registry')).trim();
  const peers = list('peers').map((p) => peerUrl('peers', p));
  let registry: ServeConfig['registry'];
  if (reg === 'memory') registry = { kind: 'memory', peers };
  else if (reg.startsWith('etcd://')) {
    if (peers.length > 0) throw new UsageError('--peers is for --registry memory; with etcd the nodes find each other');
    const hosts = etcdRegistryFlag(reg);
    const prefix = required('etcd-prefix', text('etcd-prefix'));
    if (!/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/.test(prefix))
      throw new UsageError(`--etcd-prefix must be a path like /bulwark/services, got ${JSON.stringify(prefix)}`);
    const leaseTtlMs = required('lease-ttl', duration('lease-ttl'));
    if (leaseTtlMs < 2_000) throw new UsageError(`--lease-ttl must be at least 2s (etcd's minimum lease), got ${leaseTtlMs} ms`);
    const settings = ['etcd-ca', 'etcd-cert', 'etcd-key', 'etcd-server-name', 'etcd-user', 'etcd-password-file'] as const;
    const given: ParsedFlags = {};
    for (const name of settings) {
      const t = text(name);
      if (t !== undefined) given[name] = t;
    }
    // the password only from the environment (or its file): never a flag, nor the config file's text
    const access = readEtcdAccess(hosts, given, env.BULWARK_ETCD_PASSWORD === undefined ? {} : { BULWARK_ETCD_PASSWORD: env.BULWARK_ETCD_PASSWORD });
    registry = { kind: 'etcd', prefix, leaseTtlMs, ...access };
  } else throw new UsageError(`--registry must be memory or etcd://host:port[,host:port], got ${JSON.stringify(reg)}`);

  const service = required('service', text('service'));
  if (!/^[A-Za-z0-9._:-]{1,255}$/.test(service)) throw new UsageError(`--service must be 1–255 characters of [A-Za-z0-9._:-], got ${JSON.stringify(service)}`);
  const groups = list('group');
  if (groups.length === 0) throw new UsageError('--group needs at least one name');
  for (const g of groups)
    if (!/^[A-Za-z0-9._:-]{1,255}$/.test(g)) throw new UsageError(`--group must be 1–255 characters of [A-Za-z0-9._:-], got ${JSON.stringify(g)}`);
  if (new Set(groups).size !== groups.length) throw new UsageError(`--group names a group twice: ${groups.join(',')}`);

  const cacheBytes = required('cache-bytes', size('cache-bytes'));
  if (cacheBytes < 1024) throw new UsageError(`--cache-bytes must be at least 1KiB, got ${cacheBytes}`);
  const hotCacheBytes = size('hot-cache-bytes') ?? Math.floor(cacheBytes / 8);
  if (hotCacheBytes > cacheBytes * 9) throw new UsageError(`--hot-cache-bytes must be at most 9 × --cache-bytes, got ${hotCacheBytes}`);
  const staleBytes = size('stale-bytes') ?? Math.floor(cacheBytes / 4);

  const secretFlag = text('peer-secret');
  const secretFile = text('peer-secret-file');
  if (secretFlag !== undefined && secretFile !== undefined)
    throw new UsageError('--peer-secret and --peer-secret-file are two ways to give one secret: give one');
  let peerSecret = secretFlag;
  if (secretFile !== undefined) {
    try {
      peerSecret = readFileSync(secretFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new UsageError(`--peer-secret-file cannot be read: ${(err as Error).message}`);
    }
  }
  if (peerSecret !== undefined && peerSecret.length < MIN_SECRET_LENGTH) {
    throw new UsageError(
      secretFile === undefined
        ? `--peer-secret must be at least ${MIN_SECRET_LENGTH} characters`
        : `--peer-secret-file must hold a secret of at least ${MIN_SECRET_LENGTH} characters`,
    );
  }

  const originText = text('origin');
  const getterText = text('getter');
  let origin: ServeConfig['origin'];
  if (originText !== undefined && getterText !== undefined) throw new UsageError('--origin and --getter are two ways to load a key: give one');
  if (originText !== undefined) origin = { kind: 'url', template: originTemplate(originText) };
  else if (getterText !== undefined) origin = { kind: 'module', path: getterText };
  else throw new UsageError("--origin (a URL template like 'http://origin/items/{key}') or --getter (a JS module) is required");

  const originTimeoutMs = required('origin-timeout', duration('origin-timeout'));
  if (originTimeoutMs <= 0) throw new UsageError('--origin-timeout must be longer than 0');
  const loadTimeoutMs = duration('load-timeout') ?? 2 * originTimeoutMs;
  if (loadTimeoutMs < originTimeoutMs)
    throw new UsageError(`--load-timeout must be at least --origin-timeout (${originTimeoutMs} ms), got ${loadTimeoutMs} ms`);
  const peerTimeoutMs = duration('peer-timeout') ?? loadTimeoutMs + 500;
  if (peerTimeoutMs <= 0) throw new UsageError('--peer-timeout must be longer than 0');
  const positiveDuration = (name: Name): number => {
    const ms = required(name, duration(name));
    if (ms <= 0) throw new UsageError(`--${name} must be longer than 0`);
    return ms;
  };
  const ttlJitter = num('ttl-jitter', 0);
  if (ttlJitter > 0.99) throw new UsageError(`--ttl-jitter must be a share in 0–0.99, got ${ttlJitter}`);
  const protocolText = required('protocol', text('protocol'));
  if (protocolText !== 'bulwark' && protocolText !== 'groupcache') throw new UsageError(`--protocol must be 'bulwark' or 'groupcache', got '${protocolText}'`);
  const protocol: 'bulwark' | 'groupcache' = protocolText;
  const owners = required('owners', int('owners', 1, 8));
  if (protocol === 'groupcache' && owners !== 1)
    throw new UsageError(`--owners must be 1 with --protocol groupcache (Go nodes have one owner per key), got ${owners}`);
  if (protocol === 'groupcache' && peerSecret !== undefined)
    throw new UsageError('--peer-secret cannot be used with --protocol groupcache (Go groupcache does not sign requests)');
  const requestTimeoutMs = positiveDuration('request-timeout');
  const headersTimeoutMs = positiveDuration('headers-timeout');
  if (headersTimeoutMs > requestTimeoutMs)
    throw new UsageError(`--headers-timeout must be at most --request-timeout (${requestTimeoutMs} ms), got ${headersTimeoutMs} ms`);

  return {
    listenHost,
    listenPort,
    advertise,
    registry,
    service,
    groups,
    cacheBytes,
    hotCacheBytes,
    ttlMs: required('ttl', duration('ttl')),
    negativeTtlMs: required('negative-ttl', duration('negative-ttl')),
    ttlJitter,
    staleBytes,
    staleMaxAgeMs: required('stale-max-age', duration('stale-max-age')),
    peerSecret,
    peerTimeoutMs,
    ringReplicas: int('ring-replicas', 1, 4096),
    owners,
    protocol,
    origin,
    originTimeoutMs,
    loadTimeoutMs,
    originRate: num('origin-rate', 0),
    originConcurrency: required('origin-concurrency', int('origin-concurrency', 1, 100_000)),
    originQueue: required('origin-queue', int('origin-queue', 0, 1_000_000)),
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: positiveDuration('keep-alive-timeout'),
    drainDelayMs: required('drain-delay', duration('drain-delay')),
    shutdownTimeoutMs: positiveDuration('shutdown-timeout'),
    quiet: flags.quiet === true || /^(1|true)$/.test(env[envName('quiet')] ?? String(file.quiet ?? '')),
  };
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kib: 1024, m: 1 << 20, mib: 1 << 20, g: 1 << 30, gib: 1 << 30 };

/** parseSize reads `1048576`, `512KiB`, `64MiB` or `1GiB` (K/M/G are binary too) into bytes. */
export function parseSize(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/.exec(text.trim());
  const unit = m === null ? undefined : SIZE_UNITS[m[2]!.toLowerCase()];
  if (m === null || unit === undefined) throw new UsageError(`--${flag} must be a size like 64MiB, 512KiB or a number of bytes, got ${JSON.stringify(text)}`);
  const n = Math.floor(Number(m[1]) * unit);
  if (!Number.isSafeInteger(n) || n > 16 * 2 ** 30) throw new UsageError(`--${flag} must be at most 16GiB, got ${JSON.stringify(text)}`);
  return n;
}

function parseListen(text: string): [string, number] {
  const m = /^(?:\[([0-9A-Fa-f:]+)\]|([A-Za-z0-9.-]*)):(\d{1,5})$/.exec(text.trim());
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || port > 65_535) throw new UsageError(`--listen must be host:port (e.g. 127.0.0.1:8080, [::1]:8080), got ${JSON.stringify(text)}`);
  const host = m[1] ?? m[2]!;
  return [host === '' ? '0.0.0.0' : host, port];
}

function peerUrl(flag: string, text: string): string {
  let u: URL;
  try {
    u = new URL(text.trim());
  } catch {
    throw new UsageError(`--${flag} must be a URL like http://10.0.0.1:8080, got ${JSON.stringify(text)}`);
  }
  if (
    (u.protocol !== 'http:' && u.protocol !== 'https:') ||
    u.username !== '' ||
    u.search !== '' ||
    u.hash !== '' ||
    (u.pathname !== '/' && u.pathname !== '')
  ) {
    throw new UsageError(`--${flag} must be an http(s) URL with no path, like http://10.0.0.1:8080, got ${JSON.stringify(text)}`);
  }
  return u.origin;
}

function originTemplate(text: string): string {
  if (!text.includes('{key}')) throw new UsageError(`--origin must contain {key}, e.g. 'http://origin/items/{key}', got ${JSON.stringify(text)}`);
  let u: URL;
  try {
    u = new URL(text.replaceAll('{key}', 'k').replaceAll('{group}', 'g'));
  } catch {
    throw new UsageError(`--origin must be a URL template like 'http://origin/items/{key}', got ${JSON.stringify(text)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`--origin must be an http(s) URL, got ${JSON.stringify(text)}`);
  return text;
}

function readConfigFile(path: string): Record<string, string> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config ${JSON.stringify(path)} cannot be read as JSON: ${(err as Error).message}`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new UsageError(`--config ${JSON.stringify(path)} must hold a JSON object of options`);
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (!Object.hasOwn(SERVE_OPTIONS, key) || key === 'config' || key === 'help')
      throw new UsageError(`--config ${JSON.stringify(path)}: unknown option ${JSON.stringify(key)}`);
    if (Array.isArray(value) && (SERVE_OPTIONS[key as Name] as OptionSpec).kind === 'list') out[key] = value.map(String).join(',');
    else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') out[key] = String(value);
    else throw new UsageError(`--config ${JSON.stringify(path)}: option ${JSON.stringify(key)} must be a string or a number`);
  }
  return out;
}
