/**
 * The forms in which etcd members are named, read in one place: EtcdRegistry's `hosts` and the CLI's
 * `--registry etcd://…` take the same ones.
 */
import { showValue } from '../core/validate.js';

/** host:port (the port optional where `portOptional`), IPv6 hosts in brackets, a port in 1–65535. */
const HOST_PORT = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$/;

/** The forms, as an error message lists them. */
const FORMS = 'etcd://host:port[,host:port], http(s)://host[:port] or host:port';

function hostPort(value: string, portOptional = false): boolean {
  const m = HOST_PORT.exec(value);
  if (m === null) return false;
  if (m[1] === undefined) return portOptional;
  return Number(m[1]) >= 1 && Number(m[1]) <= 65_535;
}

/**
 * etcdEndpoints reads etcd members named in any of these forms, one string or an array of them, and
 * answers each member's endpoint as etcd's client wants it (`http://host:port`, or `https://…` as given):
 * - `etcd://host:port[,host:port]` — the CLI's form: one or more members over plain HTTP;
 * - `http://host[:port]` or `https://host[:port]`;
 * - `host:port` (plain HTTP).
 * Anything else — `etcds://` included (TLS is given as `https://`), a path, a missing port — throws a
 * TypeError naming `owner` and the value, so that a wrong form fails where it is written, not at the
 * first call after the dial timeout.
 */
export function etcdEndpoints(owner: string, hosts: unknown): string[] {
  const list = typeof hosts === 'string' ? [hosts] : hosts;
  const bad = (value: unknown) => new TypeError(`${owner}: hosts must be ${FORMS} (one string or a non-empty array), got ${showValue(value)}`);
  if (!Array.isArray(list) || list.length === 0) throw bad(hosts);
  const out: string[] = [];
  for (const h of list as unknown[]) {
    if (typeof h !== 'string') throw bad(h);
    const text = h.trim();
    if (text.startsWith('etcd://')) {
      const members = text
        .slice('etcd://'.length)
        .split(',')
        .map((m) => m.trim());
      if (!members.every((m) => hostPort(m))) throw bad(h);
      for (const m of members) out.push(`http://${m}`);
    } else if (/^https?:\/\//.test(text)) {
      if (!hostPort(text.slice(text.indexOf('//') + 2).replace(/\/$/, ''), true)) throw bad(h);
      out.push(text.replace(/\/$/, ''));
    } else if (hostPort(text)) out.push(`http://${text}`);
    else throw bad(h);
  }
  return out;
}
