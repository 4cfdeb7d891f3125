/**
 * EtcdLayout is how EtcdRegistry maps an instance to an etcd key and value and back: the key it is
 * written under, the bytes of the value, what the layout can carry (its capabilities) and how leases are
 * held. Three layouts, so that a Node service finds and is found by a Go fleet on the same etcd:
 *
 * - `bulwark`: `<prefix>/<name>/<id>` → the instance's JSON; one lease per TTL. Carries everything.
 * - `go-zero` (core/discov at zeromicro/go-zero 11f21098ddd95a58f801920fea4f0543d4d01586):
 *   `<Key>/<lease id in decimal>` → the plain `host:port` string (publisher.go:185-200, clients.go:39-41,
 *   zrpc/internal/rpcpubserver.go:32). The key names the lease, so each instance holds a lease of its own
 *   (publisher.go:186). The value carries the address only: no version, no metadata, and no id of the
 *   instance's own — a lease id changes whenever a lost lease is replaced — so an instance's identity is
 *   its address, and keys holding one address count once, as go-zero's subscriber keeps its values by
 *   address (subscriber.go:140-172). The service name is the `Key`; with no prefix the keys share no
 *   common start, so listing or watching every service needs a prefix.
 * - `go-micro` (registry/etcd at go-micro v5.30.0, 307b94aab716ced1f3f6ad8673221dea4ce868e8):
 *   `/micro/registry/<service>/<node id>` (etcd.go:26, 141-145) → the JSON of a `registry.Service` with
 *   exactly one node (etcd.go:246-252, 274), encoded as Go's encoding/json does: struct fields in
 *   declaration order (registry/registry.go:29-41), map keys sorted, `<`, `>`, `&`, U+2028 and U+2029
 *   escaped. The instance's version is the service's; its metadata is the node's (go-micro servers put
 *   `transport`, `broker`, `server`, `registry` and `protocol` there: server/rpc_server.go:670-680).
 *   Service-level metadata and endpoints are not read; bulwark writes `"metadata":null,"endpoints":[]`.
 *
 * The codecs run once per key read or written, never per lookup: a RegistryCache answers lookups from
 * the instances they produced.
 */
import type { IKeyValue } from 'etcd3';
import type { ServiceInstance } from './types.js';
import { checkAddress, checkInstance, checkName } from './validate.js';

/** EtcdLayoutName names one of the layouts EtcdRegistry reads and writes. */
export type EtcdLayoutName = 'bulwark' | 'go-zero' | 'go-micro';

/** LayoutCapabilities says what of a ServiceInstance a layout carries: what it cannot is absent when read back. */
export interface LayoutCapabilities {
  /** `version` is stored and read back. */
  readonly version: boolean;
  /** `metadata` is stored and read back. */
  readonly metadata: boolean;
  /** `id` is read back as registered; false: the id read is the address's (`addressId`). */
  readonly stringIds: boolean;
}

/** EtcdLayout maps instances to keys and values; see the module comment. */
export interface EtcdLayout {
  readonly name: EtcdLayoutName;
  readonly capabilities: LayoutCapabilities;
  /** The key prefix when the registry is given none (`''`: keys start with the service name). */
  readonly defaultPrefix: string;
  /** Each instance holds a lease of its own (the key names it) instead of one lease per TTL. */
  readonly leasePerInstance: boolean;
  /** Keys holding instances of one id (one address) count as one instance. */
  readonly collapseDuplicates: boolean;
  /** key is the key of `instance` written under lease `leaseId` (decimal); `root` is the prefix and `/`, or `''`. */
  key(root: string, instance: ServiceInstance, leaseId: string): string;
  /** encode is the value written for `instance`. */
  encode(instance: ServiceInstance): Buffer;
  /** decode reads one key of the layout back; a key or value of the wrong shape answers `error`. */
  decode(root: string, kv: IKeyValue): Decoded;
}

/** addressId is the id of an instance known only by its address: the address, IPv6 brackets dropped (`[::1]:80` → `::1:80`). */
export function addressId(address: string): string {
  return address.charCodeAt(0) === 0x5b ? address.replace(/[[\]]/g, '') : address;
}

const DECIMAL_ID = /^[1-9][0-9]{0,18}$/;

/** splitKey answers `[name, last segment]` of `<root><name>/<last>`, or undefined. */
function splitKey(root: string, key: string): [string, string] | undefined {
  if (!key.startsWith(root)) return undefined;
  const rest = key.slice(root.length);
  const slash = rest.indexOf('/');
  if (slash <= 0 || slash !== rest.lastIndexOf('/') || slash === rest.length - 1) return undefined;
  return [rest.slice(0, slash), rest.slice(slash + 1)];
}

const bulwark: EtcdLayout = Object.freeze({
  name: 'bulwark' as const,
  capabilities: Object.freeze({ version: true, metadata: true, stringIds: true }),
  defaultPrefix: '/bulwark/services',
  leasePerInstance: false,
  collapseDuplicates: false,
  key: (root: string, i: ServiceInstance) => `${root}${i.name}/${i.id}`,
  encode: (i: ServiceInstance) => Buffer.from(JSON.stringify(i)),
  decode: decodeBulwark,
});

const goZero: EtcdLayout = Object.freeze({
  name: 'go-zero' as const,
  capabilities: Object.freeze({ version: false, metadata: false, stringIds: false }),
  defaultPrefix: '',
  leasePerInstance: true,
  collapseDuplicates: true,
  // makeEtcdKey: fmt.Sprintf("%s%c%d", key, '/', id) (core/discov/clients.go:39-41)
  key: (root: string, i: ServiceInstance, leaseId: string) => `${root}${i.name}/${leaseId}`,
  encode: (i: ServiceInstance) => Buffer.from(i.address),
  decode(root: string, kv: IKeyValue): Decoded {
    const key = kv.key.toString();
    const parts = splitKey(root, key);
    if (parts === undefined || !DECIMAL_ID.test(parts[1])) return { error: `key ${key} is not ${root}<name>/<lease id>` };
    const value = kv.value.toString();
    try {
      const name = checkName('etcd key', 'name', parts[0]);
      const address = checkAddress('etcd value', 'address', value);
      const instance: { id: string; name: string; address: string } = {} as never;
      instance.id = addressId(address);
      instance.name = name;
      instance.address = address;
      return { instance: Object.freeze(instance) };
    } catch (err) {
      return { error: `value of ${key} is not a go-zero instance: ${(err as Error).message}` };
    }
  },
});

/** go-micro's registry.Node, as it decodes. */
interface MicroNode {
  id?: unknown;
  address?: unknown;
  metadata?: unknown;
}

const goMicro: EtcdLayout = Object.freeze({
  name: 'go-micro' as const,
  capabilities: Object.freeze({ version: true, metadata: true, stringIds: true }),
  defaultPrefix: '/micro/registry',
  leasePerInstance: false,
  collapseDuplicates: false,
  key: (root: string, i: ServiceInstance) => `${root}${i.name}/${i.id}`,
  encode: (i: ServiceInstance) => Buffer.from(encodeMicroService(i)),
  decode(root: string, kv: IKeyValue): Decoded {
    const key = kv.key.toString();
    const parts = splitKey(root, key);
    if (parts === undefined) return { error: `key ${key} is not ${root}<service>/<node id>` };
    let value: { name?: unknown; version?: unknown; nodes?: unknown } | null;
    try {
      value = JSON.parse(kv.value.toString()) as typeof value;
    } catch (err) {
      return { error: `value of ${key} is not JSON: ${(err as Error).message}` };
    }
    if (value === null || typeof value !== 'object' || !Array.isArray(value.nodes)) return { error: `value of ${key} is not a go-micro service` };
    const nodes = value.nodes as MicroNode[];
    const node = nodes.find((n) => n !== null && typeof n === 'object' && n.id === parts[1]) ?? (nodes.length === 1 ? nodes[0] : undefined);
    if (node === undefined || node === null || typeof node !== 'object') return { error: `value of ${key} holds no node ${parts[1]}` };
    const md = node.metadata;
    const candidate = {
      id: node.id,
      name: value.name,
      address: node.address,
      version: value.version === '' || value.version === null ? undefined : value.version,
      metadata: md === null || (typeof md === 'object' && Object.keys(md as object).length === 0) ? undefined : md,
    };
    try {
      const instance = checkInstance('etcd value', candidate);
      if (instance.name !== parts[0] || instance.id !== parts[1]) return { error: `value of ${key} names ${instance.name}/${instance.id}` };
      return { instance };
    } catch (err) {
      return { error: `value of ${key} is not a go-micro service: ${(err as Error).message}` };
    }
  },
});

const LAYOUTS: Readonly<Record<EtcdLayoutName, EtcdLayout>> = Object.freeze({ bulwark, 'go-zero': goZero, 'go-micro': goMicro });

/** etcdLayout answers the layout of a name; TypeError naming `owner` for any other value. */
export function etcdLayout(owner: string, name: unknown): EtcdLayout {
  if (typeof name === 'string' && Object.prototype.hasOwnProperty.call(LAYOUTS, name)) return LAYOUTS[name as EtcdLayoutName];
  throw new TypeError(
    `${owner}: layout must be one of ${Object.keys(LAYOUTS)
      .map((n) => `"${n}"`)
      .join(', ')}, got ${JSON.stringify(name)}`,
  );
}

/**
 * encodeMicroService is the JSON go-micro's `encode` (json.Marshal of a registry.Service, etcd.go:130-133)
 * writes for an instance: fields in struct order, map keys sorted by bytes, Go's HTML escaping.
 */
export function encodeMicroService(i: ServiceInstance): string {
  return (
    `{"name":${goString(i.name)},"version":${goString(i.version ?? '')},"metadata":null,"endpoints":[],` +
    `"nodes":[{"metadata":${goStringMap(i.metadata)},"id":${goString(i.id)},"address":${goString(i.address)}}]}`
  );
}

/** Go escapes these beyond what JSON.stringify does (encoding/json's HTML-safe default, and the JS line separators). */
const GO_EXTRA_ESCAPES = /[<>&\u2028\u2029]/g;

/**
 * goString is a string as Go's encoding/json writes it. JSON.stringify already writes `"`, `\`, `\n`, `\r`,
 * `\t`, `\b`, `\f` short and other control characters as `\u00XX`, as Go ≥ 1.22 does (older Go writes
 * `\b` and `\f` as `\u0008` and `\u000c`).
 */
export function goString(s: string): string {
  const json = JSON.stringify(s);
  GO_EXTRA_ESCAPES.lastIndex = 0;
  if (!GO_EXTRA_ESCAPES.test(json)) return json;
  return json.replace(GO_EXTRA_ESCAPES, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** goStringMap is a map[string]string as Go writes it: keys sorted by their UTF-8 bytes; `{}` when empty or absent. */
function goStringMap(m: Readonly<Record<string, string>> | undefined): string {
  if (m === undefined) return '{}';
  const keys = Object.keys(m).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  let out = '{';
  for (let k = 0; k < keys.length; k++) out += `${k === 0 ? '' : ','}${goString(keys[k]!)}:${goString(m[keys[k]!]!)}`;
  return `${out}}`;
}

/** rangeEnd is the end of the key range holding every key that starts with `prefix`. */
export function rangeEnd(prefix: string): Buffer {
  const b = Buffer.from(prefix);
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i]! < 0xff) {
      const out = Buffer.from(b.subarray(0, i + 1));
      out[i]!++;
      return out;
    }
  }
  return Buffer.from([0]);
}

/** Decoded is one key from etcd: the instance, or why the value was skipped. */
export type Decoded = { instance: ServiceInstance; error?: undefined } | { instance?: undefined; error: string };

/** decodeBulwark reads `<prefix>/<name>/<id>` → JSON ServiceInstance; a value of the wrong shape answers `error`. */
function decodeBulwark(prefix: string, kv: IKeyValue): Decoded {
  const key = kv.key.toString();
  const rest = key.startsWith(prefix) ? key.slice(prefix.length) : '';
  const parts = rest.split('/');
  if (parts.length !== 2) return { error: `key ${key} is not ${prefix}<name>/<id>` };
  let value: unknown;
  try {
    value = JSON.parse(kv.value.toString());
  } catch (err) {
    return { error: `value of ${key} is not JSON: ${(err as Error).message}` };
  }
  try {
    const instance = checkInstance('etcd value', value);
    if (instance.name !== parts[0] || instance.id !== parts[1]) return { error: `value of ${key} names ${instance.name}/${instance.id}` };
    return { instance };
  } catch (err) {
    return { error: `value of ${key} is not a service instance: ${(err as Error).message}` };
  }
}
