/**
 * How the CLI reaches a secured etcd: TLS and authentication for every command that takes
 * `--registry etcd://…`. Each setting is a flag or an environment variable (the flag wins):
 *
 * | flag                  | environment                  | meaning                                         |
 * |-----------------------|------------------------------|-------------------------------------------------|
 * | `--etcd-ca`           | `BULWARK_ETCD_CA`            | PEM file of the CA that signed etcd's certificate |
 * | `--etcd-cert`         | `BULWARK_ETCD_CERT`          | PEM file of this client's certificate (mutual TLS) |
 * | `--etcd-key`          | `BULWARK_ETCD_KEY`           | PEM file of that certificate's key              |
 * | `--etcd-server-name`  | `BULWARK_ETCD_SERVER_NAME`   | the name etcd's certificate must carry          |
 * | `--etcd-user`         | `BULWARK_ETCD_USER`          | the etcd user                                   |
 * | `--etcd-password-file`| `BULWARK_ETCD_PASSWORD_FILE` | a file holding the user's password              |
 * |                       | `BULWARK_ETCD_PASSWORD`      | the user's password                             |
 *
 * Any TLS setting makes the `etcd://` members `https://`. A password is never a flag's value, which
 * every user of the machine reads in `ps`: `--etcd-password` is refused, saying where to put it.
 */
import { readFileSync } from 'node:fs';
import { etcdConnection, type EtcdAuthOptions, type EtcdTlsOptions } from '../registry/index.js';
import { UsageError, type FlagSpec, type ParsedFlags } from './args.js';

/** EtcdAccess is what EtcdRegistry (and the other etcd clients) get from the command line. */
export interface EtcdAccess {
  /** The members, `https://` when TLS is on. */
  readonly hosts: string[];
  readonly tls?: EtcdTlsOptions;
  readonly auth?: EtcdAuthOptions;
}

/** The settings: flag name → its option in EtcdConnectionOptions. */
const SETTINGS = {
  'etcd-ca': 'tls.ca',
  'etcd-cert': 'tls.cert',
  'etcd-key': 'tls.key',
  'etcd-server-name': 'tls.serverName',
  'etcd-user': 'auth.username',
  'etcd-password-file': 'auth.password',
} as const;
type Setting = keyof typeof SETTINGS;

/** ETCD_ACCESS_FLAGS are the flags of the settings, for a command's parseFlags table (`--etcd-password` only to refuse it). */
export const ETCD_ACCESS_FLAGS: Readonly<Record<string, FlagSpec>> = {
  'etcd-ca': { kind: 'string' },
  'etcd-cert': { kind: 'string' },
  'etcd-key': { kind: 'string' },
  'etcd-server-name': { kind: 'string' },
  'etcd-user': { kind: 'string' },
  'etcd-password-file': { kind: 'string' },
  'etcd-password': { kind: 'string' },
};

/** ETCD_ACCESS_HELP is the settings' part of a command's --help. */
export const ETCD_ACCESS_HELP = `Secured etcd (each also an environment variable: --etcd-ca → BULWARK_ETCD_CA):
      --etcd-ca <file>        PEM CA of etcd's certificate (turns TLS on: etcd:// members are https://)
      --etcd-cert <file>      PEM client certificate, for etcd's --client-cert-auth (with --etcd-key)
      --etcd-key <file>       PEM key of --etcd-cert
      --etcd-server-name <n>  the name etcd's certificate carries, when not the member's host
      --etcd-user <name>      etcd user (etcd's auth enable); the password from BULWARK_ETCD_PASSWORD
      --etcd-password-file <file>  or from this file (never a flag: ps shows flags to every user)
`;

/** envOf names a setting's environment variable: `etcd-ca` → `BULWARK_ETCD_CA`. */
function envOf(name: string): string {
  return `BULWARK_${name.toUpperCase().replace(/-/g, '_')}`;
}

/**
 * readEtcdAccess reads the settings for the members `endpoints` (`http://…`, from `--registry etcd://…`)
 * from `flags`, then `env`, and checks them as the library does; a mistake is a UsageError naming the
 * flag or variable it came from (and never the password).
 */
export function readEtcdAccess(endpoints: readonly string[], flags: ParsedFlags, env: NodeJS.ProcessEnv = process.env): EtcdAccess {
  if (flags['etcd-password'] !== undefined) {
    throw new UsageError('--etcd-password would show the password to every user of the machine (ps): set BULWARK_ETCD_PASSWORD or give --etcd-password-file');
  }
  const from = new Map<string, string>();
  const read = (name: Setting): string | undefined => {
    const f = flags[name];
    if (f !== undefined) {
      from.set(SETTINGS[name], `--${name}`);
      return String(f);
    }
    const e = env[envOf(name)];
    if (e === undefined || e === '') return undefined;
    from.set(SETTINGS[name], envOf(name));
    return e;
  };
  const ca = read('etcd-ca');
  const cert = read('etcd-cert');
  const key = read('etcd-key');
  const serverName = read('etcd-server-name');
  const username = read('etcd-user');
  const passwordFile = read('etcd-password-file');
  const envPassword = env.BULWARK_ETCD_PASSWORD;
  let password: string | undefined;
  if (passwordFile !== undefined && envPassword !== undefined)
    throw new UsageError(`BULWARK_ETCD_PASSWORD and ${from.get('auth.password')} are two ways to give one password: give one`);
  if (passwordFile !== undefined) {
    try {
      password = readFileSync(passwordFile, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new UsageError(`${from.get('auth.password')} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  } else if (envPassword !== undefined) {
    password = envPassword;
    from.set('auth.password', 'BULWARK_ETCD_PASSWORD');
  }
  if (password !== undefined && username === undefined) throw new UsageError(`${from.get('auth.password')} gives a password without a user: set --etcd-user`);
  if (username !== undefined && password === undefined)
    throw new UsageError(`--etcd-user ${JSON.stringify(username)} needs a password: set BULWARK_ETCD_PASSWORD or give --etcd-password-file`);
  const secure = ca !== undefined || cert !== undefined || key !== undefined || serverName !== undefined;
  const hosts = secure ? endpoints.map((e) => e.replace(/^http:\/\//, 'https://')) : [...endpoints];
  const tls: EtcdTlsOptions | undefined = secure
    ? {
        ...(ca === undefined ? {} : { ca }),
        ...(cert === undefined ? {} : { cert }),
        ...(key === undefined ? {} : { key }),
        ...(serverName === undefined ? {} : { serverName }),
      }
    : undefined;
  const auth = username === undefined ? undefined : { username, password: password! };
  try {
    etcdConnection('--registry', { hosts, ...(tls === undefined ? {} : { tls }), ...(auth === undefined ? {} : { auth }) });
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    // "--registry: tls.ca could not be read from …" → "--etcd-ca could not be read from …" (or the variable it came from)
    const flagOf = (option: string) => `--${Object.entries(SETTINGS).find(([, o]) => o === option)?.[0] ?? option}`;
    throw new UsageError(err.message.replace(/^--registry: /, '').replace(/\b(?:tls|auth)\.\w+/g, (option) => from.get(option) ?? flagOf(option)));
  }
  return { hosts, ...(tls === undefined ? {} : { tls }), ...(auth === undefined ? {} : { auth }) };
}
