/**
 * Why etcd cannot be reached, as soon as it is known. EtcdRegistry rides out an outage: it tries every
 * member until its dial timeout and then says only that none answered. An operator running
 * `bulwark registry ls` against a wrong address wants the cause at once — "connection refused", "name
 * not resolved" — so the command first opens a TCP connection to each member (the same address
 * EtcdRegistry dials), and when every member has failed with a cause it stops there.
 */
import { connect } from 'node:net';

/** The causes read from a socket error's code; any other code is shown as it is. */
const CAUSES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'name not resolved',
  EAI_AGAIN: 'name not resolved',
  EAI_NONAME: 'name not resolved',
  EAI_FAIL: 'name not resolved',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
};

/** MemberReach is what a connection to one member found: `cause` is undefined when it connected or was still trying. */
export interface MemberReach {
  /** host:port, as the operator wrote it. */
  readonly member: string;
  readonly cause: string | undefined;
}

/**
 * reachEtcd connects to each member's endpoint (`http://host:port`) at once and answers, within
 * `timeoutMs`, what each connection found: a member that accepted, or that had not answered by then, has
 * no cause. It never throws.
 */
export function reachEtcd(endpoints: readonly string[], timeoutMs: number): Promise<MemberReach[]> {
  return Promise.all(endpoints.map((endpoint) => reachOne(endpoint, timeoutMs)));
}

function reachOne(endpoint: string, timeoutMs: number): Promise<MemberReach> {
  const url = new URL(endpoint);
  const member = url.host;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (cause: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ member, cause });
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    socket.once('connect', () => done(undefined));
    socket.once('error', (err: NodeJS.ErrnoException) => done(CAUSES[err.code ?? ''] ?? err.code ?? err.message));
  });
}

/** unreachableText answers "a:1 (connection refused), b:2 (name not resolved)" when every member failed with a cause, else undefined. */
export function unreachableText(reach: readonly MemberReach[]): string | undefined {
  if (reach.length === 0 || reach.some((r) => r.cause === undefined)) return undefined;
  if (reach.length === 1) return `${reach[0]!.member}: ${reach[0]!.cause}`;
  return reach.map((r) => `${r.member} (${r.cause})`).join(', ');
}
