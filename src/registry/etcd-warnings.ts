/**
 * The warnings EtcdRegistry gives for the values it skips: each bad value once, bounded.
 */
import type { IKeyValue } from 'etcd3';

/** Warner reports each bad value once (per key and revision), bounded. */
export class Warner {
  private readonly seen = new Set<string>();
  constructor(private readonly sink: (message: string) => void) {}

  warn(kv: IKeyValue, message: string): void {
    const id = `${kv.key.toString()}@${kv.mod_revision}`;
    if (this.seen.has(id)) return;
    if (this.seen.size >= 4096) this.seen.clear();
    this.seen.add(id);
    try {
      this.sink(`bulwark EtcdRegistry: skipped ${message}`);
    } catch {
      // a throwing warning sink must not break the registry
    }
  }
}

/** defaultWarning emits a process warning. */
export function defaultWarning(message: string): void {
  process.emitWarning(message, { code: 'BULWARK_REGISTRY_BAD_VALUE' });
}
