/**
 * announce() in a real process: at SIGTERM / SIGINT it deregisters first, then resolves `shutdown`,
 * and the process drains and ends by itself. With MemoryRegistry (the child watches its own registry)
 * and with EtcdRegistry on a real etcd (this process watches the instance leave).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EtcdRegistry } from '../src/registry/etcd-registry.js';
import type { RegistryEvent } from '../src/registry/types.js';
import { etcdBinary, startEtcd, type EtcdServer } from './support/etcd.js';
import { skipReason, waitFor } from './support/servers.js';
import { tsNodeArgs } from './support/ts-node.js';

const CHILD = fileURLToPath(new URL('./support/announce-child.ts', import.meta.url));

interface Child {
  proc: ChildProcess;
  lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startChild(...args: string[]): Child {
  const proc = spawn(process.execPath, tsNodeArgs(CHILD, ...args), { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => {
      if (code !== 0 && signal === null) process.stderr.write(err);
      resolve({ code, signal });
    }),
  );
  return { proc, lines, exited };
}

async function withDeadline<T>(what: string, p: Promise<T>, ms = 20_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}

describe('announce() with signals (child processes)', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`MemoryRegistry: at ${signal} deregisters first, then resolves shutdown, and the process ends by itself after draining`, async () => {
      const child = startChild('memory');
      try {
        await waitFor('child ready', () => child.lines.includes('ready'), 20_000);
        assert.deepEqual(child.lines, ['event create true', 'ready']);
        child.proc.kill(signal);
        const { code, signal: killedBy } = await withDeadline('child exit', child.exited);
        assert.equal(killedBy, null, 'not killed by the signal: announce handled it');
        assert.equal(code, 0);
        assert.deepEqual(child.lines, ['event create true', 'ready', 'event delete true', `shutdown ${signal} gone=true`, 'drained']);
      } finally {
        child.proc.kill('SIGKILL');
      }
    });
  }

  it('a second signal ends a process whose drain is stuck', async () => {
    const child = startChild('memory', '', '', 'stuck');
    try {
      await waitFor('child ready', () => child.lines.includes('ready'), 20_000);
      child.proc.kill('SIGTERM');
      await waitFor('shutdown', () => child.lines.some((l) => l.startsWith('shutdown')), 20_000);
      child.proc.kill('SIGTERM');
      const { signal } = await withDeadline('child exit', child.exited);
      assert.equal(signal, 'SIGTERM');
    } finally {
      child.proc.kill('SIGKILL');
    }
  });

  describe('EtcdRegistry on a real etcd', { skip: skipReason(etcdBinary, 'etcd') }, () => {
    let etcd: EtcdServer;
    before(async () => {
      etcd = await startEtcd();
    });
    after(async () => {
      await etcd?.stop();
    });

    it('at SIGTERM the instance leaves etcd (a watcher sees the delete) before shutdown resolves, and the process ends by itself', async () => {
      const prefix = `/bulwark-announce/${process.pid}`;
      const observer = new EtcdRegistry({ hosts: etcd.endpoint, prefix });
      const ac = new AbortController();
      const events: RegistryEvent[] = [];
      let ready!: () => void;
      const established = new Promise<void>((r) => (ready = r));
      const watching = (async () => {
        for await (const e of observer.watch({ service: 'announced', signal: ac.signal, onReady: ready })) events.push(e);
      })();
      await established; // changes made from here on are delivered: the child's create among them
      const child = startChild('etcd', etcd.endpoint, prefix);
      try {
        await waitFor('child ready', () => child.lines.includes('ready'), 20_000);
        assert.equal((await observer.getService('announced')).length, 1);
        child.proc.kill('SIGTERM');
        const { code, signal } = await withDeadline('child exit', child.exited);
        assert.deepEqual([code, signal], [0, null]);
        assert.deepEqual(child.lines, ['ready', 'shutdown SIGTERM gone=true', 'drained']);
        await waitFor('delete seen', () => events.some((e) => e.type === 'delete'));
        assert.deepEqual(
          events.map((e) => e.type),
          ['create', 'delete'],
        );
      } finally {
        child.proc.kill('SIGKILL');
        ac.abort();
        await watching;
        await observer.close();
      }
    });
  });
});
