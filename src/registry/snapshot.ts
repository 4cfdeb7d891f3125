/**
 * The RegistryCache snapshot: the last-known-good view on disk, so a process that starts while the
 * registry is down can still find its peers (served as stale). Written atomically (temp file + rename);
 * a corrupt or foreign file is ignored with a warning, never trusted and never a crash.
 */
import { readFileSync } from 'node:fs';
import { rename, writeFile, unlink } from 'node:fs/promises';
import type { Clock, TimerHandle } from '../core/clock.js';
import type { ServiceInstance } from './types.js';
import { checkInstance, checkName } from './validate.js';

/** The format tag that marks a file as ours. */
const FORMAT = 'bulwark-registry-snapshot';
const VERSION = 1;
/** A snapshot larger than this is not ours (or not sane): 64 MiB. */
const MAX_BYTES = 64 * 1024 * 1024;

/** readSnapshot answers the services in the file at `path`; a missing file answers empty, a bad one warns. */
export function readSnapshot(path: string, warn: (message: string) => void): Map<string, ServiceInstance[]> {
  const out = new Map<string, ServiceInstance[]>();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') warn(`RegistryCache: cannot read snapshot ${path}: ${(err as Error).message}`);
    return out;
  }
  try {
    if (text.length > MAX_BYTES) throw new Error('file too large');
    const doc = JSON.parse(text) as { format?: unknown; version?: unknown; services?: unknown };
    if (doc === null || typeof doc !== 'object' || doc.format !== FORMAT || doc.version !== VERSION) throw new Error('not a bulwark registry snapshot');
    const services = doc.services;
    if (services === null || typeof services !== 'object' || Array.isArray(services)) throw new Error('services is not an object');
    for (const [name, list] of Object.entries(services)) {
      checkName('snapshot', 'service name', name);
      if (!Array.isArray(list)) throw new Error(`services.${name} is not an array`);
      const instances = list.map((v) => checkInstance('snapshot', v));
      if (instances.some((i) => i.name !== name)) throw new Error(`services.${name} holds another service's instance`);
      if (instances.length > 0) out.set(name, instances);
    }
  } catch (err) {
    warn(`RegistryCache: ignoring snapshot ${path}: ${(err as Error).message}`);
    out.clear();
  }
  return out;
}

/** writeSnapshot writes `services` to `path` atomically: a temp file beside it, then rename. */
export async function writeSnapshot(path: string, services: Iterable<[string, readonly ServiceInstance[]]>): Promise<void> {
  const doc = { format: FORMAT, version: VERSION, savedAt: new Date().toISOString(), services: Object.fromEntries(services) };
  const tmp = `${path}.${process.pid}.${Date.now().toString(36)}.tmp`;
  try {
    await writeFile(tmp, JSON.stringify(doc), { mode: 0o600 });
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
}

/**
 * SnapshotWriter debounces snapshot writes: `changed()` schedules one write `debounceMs` later (an
 * unref'd timer on the cache's clock), writes never overlap, and `flush()` writes a pending change at once and waits.
 */
export class SnapshotWriter {
  private timer: TimerHandle | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly path: string,
    private readonly debounceMs: number,
    private readonly collect: () => Iterable<[string, readonly ServiceInstance[]]>,
    private readonly warn: (message: string) => void,
    private readonly clock: Clock,
  ) {}

  /** changed schedules a write unless one is already scheduled. */
  changed(): void {
    if (this.timer !== undefined) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.write();
    }, this.debounceMs);
    this.timer.unref();
  }

  /** flush writes a scheduled change now, and resolves when every write has ended. */
  async flush(): Promise<void> {
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      this.write();
    }
    await this.writing;
  }

  private write(): void {
    const services = [...this.collect()];
    this.writing = this.writing
      .then(() => writeSnapshot(this.path, services))
      .catch((err: unknown) => this.warn(`RegistryCache: cannot write snapshot ${this.path}: ${(err as Error).message}`));
  }
}
