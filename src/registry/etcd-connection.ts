/**
 * How a client reaches etcd — its members, TLS and authentication — read and checked in one place, so
 * that everything talking to etcd (EtcdRegistry, the fleet's EtcdFleetStore, the rule store) takes the
 * same options with the same meaning and the same errors.
 *
 * - `https://` endpoints mean TLS; `tls` says which CA to trust (else Node's roots), which client
 *   certificate to show (etcd's `--client-cert-auth`) and which name to check etcd's certificate against.
 *   `tls` with `http://` (or `etcd://`) endpoints is refused: it would be silently unused.
 * - `auth` is an etcd user and password (etcd's `auth enable`); the client trades them for a token.
 * - Files are read once, at construction: one that cannot be read throws a TypeError naming the owner,
 *   the option and the path, not an error at the first call after the dial timeout.
 * - The password is never shown: not in errors, stats or messages (`<hidden>` stands for it).
 */
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import type { IOptions } from 'etcd3';
import { options as optionsObject, showValue, type OptionKeys } from '../core/validate.js';
import { etcdEndpoints } from './etcd-endpoints.js';

/** EtcdTlsOptions: how to reach etcd over TLS (with `https://` endpoints). */
export interface EtcdTlsOptions {
  /** The CA that signed etcd's server certificate: a PEM file's path, or its contents. Defaults to Node's root CAs. */
  ca?: string | Buffer;
  /** This client's certificate, for etcd's `--client-cert-auth` (mutual TLS): a PEM file's path or contents; needs `key`. Defaults to none. */
  cert?: string | Buffer;
  /** The private key of `cert`: a PEM file's path or contents; needs `cert`. Defaults to none. */
  key?: string | Buffer;
  /** The name etcd's certificate must carry, when it differs from the endpoint's host. Defaults to the endpoint's host. */
  serverName?: string;
}

/** EtcdAuthOptions: an etcd user (etcd's `auth enable`); the client trades them for a token at its first call. */
export interface EtcdAuthOptions {
  /** The etcd user's name. Required. */
  username: string;
  /** The user's password; never shown in errors or stats. Required. */
  password: string;
}

/** EtcdConnectionOptions are the options of everything that talks to etcd: where it is, and how to get in. */
export interface EtcdConnectionOptions {
  /**
   * etcd's members (every member of the cluster): `etcd://host:port[,host:port]` (the CLI's form),
   * `http(s)://host[:port]` or `host:port`, one string or an array (see `etcdEndpoints`). Required.
   */
  hosts: string | string[];
  /** TLS settings; `https://` endpoints use TLS with or without them. Defaults to none (Node's root CAs over `https://`). */
  tls?: EtcdTlsOptions;
  /** An etcd user and password. Defaults to none (etcd without authentication). */
  auth?: EtcdAuthOptions;
}

/** EtcdConnection is a checked connection: the files read, ready for each member's client. */
export interface EtcdConnection {
  /** Present when the endpoints are `https://`. */
  readonly tls?: { readonly ca?: Buffer; readonly cert?: Buffer; readonly key?: Buffer; readonly serverName?: string };
  readonly auth?: EtcdAuthOptions;
}

/** What a password is shown as. */
export const HIDDEN = '<hidden>';

const TLS_KEYS = { ca: true, cert: true, key: true, serverName: true } as const satisfies OptionKeys<EtcdTlsOptions>;
const AUTH_KEYS = { username: true, password: true } as const satisfies OptionKeys<EtcdAuthOptions>;

/**
 * etcdConnection checks `hosts`, `tls` and `auth` of `owner`'s options (see the module comment) and
 * answers each member's endpoint and the connection every member's client is built with.
 */
export function etcdConnection(owner: string, o: Partial<EtcdConnectionOptions>): { endpoints: string[]; connection: EtcdConnection } {
  const endpoints = etcdEndpoints(owner, o.hosts);
  const secure = endpoints.filter((e) => e.startsWith('https://')).length;
  if (secure !== 0 && secure !== endpoints.length) {
    throw new TypeError(`${owner}: hosts must be all https:// or all plain, got ${JSON.stringify(endpoints)}`);
  }
  let tls: EtcdConnection['tls'];
  if (o.tls !== undefined) {
    const t = optionsObject(`${owner}.tls`, o.tls, TLS_KEYS);
    if (secure === 0) throw new TypeError(`${owner}: tls needs https:// hosts, got ${showValue(o.hosts)}`);
    if ((t.cert === undefined) !== (t.key === undefined)) {
      throw new TypeError(`${owner}: tls.cert and tls.key go together, got ${t.cert === undefined ? 'tls.key alone' : 'tls.cert alone'}`);
    }
    if (t.serverName !== undefined && (typeof t.serverName !== 'string' || t.serverName === '')) {
      throw new TypeError(`${owner}: tls.serverName must be a non-empty string, got ${showValue(t.serverName)}`);
    }
    tls = {
      ...(t.ca === undefined ? {} : { ca: pem(owner, 'tls.ca', t.ca) }),
      ...(t.cert === undefined ? {} : { cert: pem(owner, 'tls.cert', t.cert) }),
      ...(t.key === undefined ? {} : { key: pem(owner, 'tls.key', t.key) }),
      ...(t.serverName === undefined ? {} : { serverName: t.serverName }),
    };
    // Parse them now, as gRPC will: a file that is not PEM, or a key not of the certificate, fails here
    if (tls.ca !== undefined) parsed(owner, 'tls.ca', t.ca, () => new X509Certificate(tls!.ca!)); // createSecureContext skips a CA that is not PEM
    if (tls.cert !== undefined) parsed(owner, 'tls.cert and tls.key', t.cert, () => createSecureContext({ cert: tls!.cert, key: tls!.key }));
  } else if (secure !== 0) tls = {};
  let auth: EtcdAuthOptions | undefined;
  if (o.auth !== undefined) {
    const a = optionsObject(`${owner}.auth`, o.auth, AUTH_KEYS);
    if (typeof a.username !== 'string' || a.username === '')
      throw new TypeError(`${owner}: auth.username must be a non-empty string, got ${showValue(a.username)}`);
    if (typeof a.password !== 'string' || a.password === '') {
      // never the value: a password in the wrong place is still a password
      throw new TypeError(
        `${owner}: auth.password must be a non-empty string for user ${JSON.stringify(a.username)}, got ${a.password === undefined ? 'none' : a.password === '' ? '""' : HIDDEN}`,
      );
    }
    auth = { username: a.username, password: a.password };
  }
  return { endpoints, connection: { ...(tls === undefined ? {} : { tls }), ...(auth === undefined ? {} : { auth }) } };
}

/** pem reads a PEM option: a Buffer is its contents, a string a file's path (read now). */
function pem(owner: string, name: string, value: unknown): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value !== 'string' || value === '') throw new TypeError(`${owner}: ${name} must be a PEM file's path or a Buffer, got ${showValue(value)}`);
  try {
    return readFileSync(value);
  } catch (err) {
    throw new TypeError(`${owner}: ${name} could not be read from ${JSON.stringify(value)} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
}

/** parsed runs `parse`, turning its error into a TypeError naming the option and where it came from. */
function parsed(owner: string, name: string, from: unknown, parse: () => unknown): void {
  try {
    parse();
  } catch (err) {
    const source = typeof from === 'string' ? ` from ${JSON.stringify(from)}` : '';
    throw new TypeError(`${owner}: ${name}${source} could not be used: ${(err as Error).message}`);
  }
}

/**
 * etcd3Options answers the parts of etcd3's options that carry `connection` (credentials, auth and the
 * server name), merged over `base`. `authTimeoutMs` bounds the token exchange (etcd3 gives it no deadline).
 */
export function etcd3Options(base: IOptions, connection: EtcdConnection, authTimeoutMs: number): IOptions {
  const out: IOptions = { ...base };
  const tls = connection.tls;
  if (tls !== undefined) {
    // grpc-js's createSsl takes null for "Node's root CAs"; etcd3's type insists on a Buffer
    out.credentials = { rootCertificate: (tls.ca ?? null) as Buffer, ...(tls.key === undefined ? {} : { privateKey: tls.key, certChain: tls.cert! }) };
    if (tls.serverName !== undefined)
      out.grpcOptions = { ...base.grpcOptions, 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName };
  }
  if (connection.auth !== undefined) {
    out.auth = {
      username: connection.auth.username,
      password: connection.auth.password,
      callOptions: () => ({ deadline: new Date(Date.now() + authTimeoutMs) }),
    };
  }
  return out;
}
