/**
 * `--registry etcd://host:port[,host:port]`, as `bulwark serve` and `bulwark registry` read it: the hosts
 * are read by the library's own `etcdEndpoints`, so the CLI and `EtcdRegistry` take the same forms.
 */
import { etcdEndpoints } from '../registry/index.js';
import { UsageError } from './args.js';

/** etcdRegistryFlag answers the members' endpoints (`http://host:port`) of an `etcd://…` value. */
export function etcdRegistryFlag(value: string): string[] {
  try {
    return etcdEndpoints('--registry', value);
  } catch {
    throw new UsageError(`--registry must be memory or etcd://host:port[,host:port], got ${JSON.stringify(value)}`);
  }
}
