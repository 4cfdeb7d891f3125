/**
 * `bulwark rules ls | get | set | rm | watch | history | rollback | check`: the operator's side of
 * bulwark/rules, against the fleet's etcd (`--store etcd://host:port[,host:port]`).
 *
 * `set` and `check` validate offline first (the component's own validation, see checkRule): a refused
 * rule is one line naming the rule and the field, exit 2, and nothing is written. `--if-revision N`
 * makes `set`, `rm` and `rollback` compare-and-swap on the key's revision (0: it must be absent); a
 * conflict exits 3. A store that cannot be reached exits 1. Flags are read with `node:util`'s parseArgs.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ETCD_ACCESS_FLAGS, ETCD_ACCESS_HELP, readEtcdAccess } from './etcd-access.js';
import { etcdEndpoints } from '../registry/index.js';
import { UsageError, type ParsedFlags } from './args.js';
import {
  checkRule,
  EtcdRuleStore,
  parseRuleKey,
  RuleConflictError,
  RuleInvalidError,
  ruleKey,
  ruleTtlMs,
  type RuleChange,
  type RuleRecord,
  type RuleStore,
} from '../rules/index.js';

const HELP = `bulwark rules — change a fleet's guards live: limits, breakers, weights, faults

Usage: bulwark rules ls       --store etcd://h:p [--scope <scope>] [--json]
       bulwark rules get      --store etcd://h:p <key> [--json]
       bulwark rules set      --store etcd://h:p <file|-> [--if-revision N]
       bulwark rules rm       --store etcd://h:p <key> [--if-revision N]
       bulwark rules watch    --store etcd://h:p [--json]
       bulwark rules history  --store etcd://h:p <key> [--json]
       bulwark rules rollback --store etcd://h:p <key> --to-revision N [--if-revision N]
       bulwark rules check    <file|->

A key is <scope>/<kind>/<name>: scope a service (orders) or one instance (orders@i-1). A file holds
one rule document, e.g. {"scope":"orders","kind":"token-limiter","name":"api","set":{"rate":50}}.

Options:
      --store <etcd://h:p[,h:p]>  the etcd holding the rules (required but for check)
      --prefix <path>             etcd key prefix (default /bulwark/rules/)
      --scope <scope>             ls: only this scope's rules
      --if-revision <n>           write only if the key is at revision n (0: absent)
      --to-revision <n>           rollback: the revision whose version to write back
      --json                      JSON instead of a table (watch: one object per line)
  -h, --help                      show this help

${ETCD_ACCESS_HELP}
Exit codes: 0 done, 1 the store could not be reached, 2 bad flags or a refused rule, 3 a revision conflict.
`;

const VERBS = new Set(['ls', 'get', 'set', 'rm', 'watch', 'history', 'rollback', 'check']);

/** Usage: a bad command line (exit 2). */
class Usage extends Error {}

/** runRules runs `bulwark rules …`; answers the exit code. */
export async function runRules(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        store: { type: 'string' },
        prefix: { type: 'string' },
        scope: { type: 'string' },
        'if-revision': { type: 'string' },
        'to-revision': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        ...Object.fromEntries(Object.keys(ETCD_ACCESS_FLAGS).map((f) => [f, { type: 'string' as const }])),
      },
    });
  } catch (err) {
    process.stderr.write(`bulwark rules: ${(err as Error).message}\n`);
    return 2;
  }
  const { values: flags, positionals } = parsed;
  const [verb, ...args] = positionals;
  if (flags.help === true || verb === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  try {
    if (verb === undefined) throw new Usage('a subcommand is needed: ls, get, set, rm, watch, history, rollback or check');
    if (!VERBS.has(verb)) throw new Usage(`unknown subcommand ${JSON.stringify(verb)} (want ls, get, set, rm, watch, history, rollback or check)`);
    const wants = verb === 'ls' || verb === 'watch' ? 0 : 1;
    if (args.length !== wants)
      throw new Usage(
        `${verb} takes ${wants === 0 ? 'no argument' : verb === 'set' || verb === 'check' ? 'one file (- for stdin)' : 'one key'}, got ${args.length}`,
      );
    const ifRevision = revisionFlag('--if-revision', flags['if-revision']);
    const toRevision = revisionFlag('--to-revision', flags['to-revision']);
    if (verb === 'rollback' && toRevision === undefined) throw new Usage('rollback needs --to-revision');
    if (verb === 'check') return await check(args[0]!);
    if (flags.store === undefined) throw new Usage('--store etcd://host:port[,host:port] is needed');
    let store: EtcdRuleStore;
    try {
      const access = readEtcdAccess(etcdEndpoints('--store', flags.store), flags as ParsedFlags);
      store = new EtcdRuleStore({
        hosts: access.hosts,
        ...(access.tls === undefined ? {} : { tls: access.tls }),
        ...(access.auth === undefined ? {} : { auth: access.auth }),
        ...(flags.prefix === undefined ? {} : { prefix: flags.prefix }),
      });
    } catch (err) {
      if (err instanceof UsageError) throw new Usage(err.message);
      throw new Usage(`--store: ${(err as Error).message}`);
    }
    try {
      const json = flags.json === true;
      switch (verb) {
        case 'ls':
          return await ls(store, flags.scope, json);
        case 'get':
          return await get(store, key(args[0]!), json);
        case 'set':
          return await set(store, args[0]!, ifRevision);
        case 'rm':
          return await rm(store, key(args[0]!), ifRevision);
        case 'watch':
          return await watch(store, json);
        case 'history':
          return await history(store, key(args[0]!), json);
        default:
          return await rollback(store, key(args[0]!), toRevision!, ifRevision);
      }
    } finally {
      await store.close();
    }
  } catch (err) {
    if (err instanceof Usage) {
      process.stderr.write(`bulwark rules: ${err.message}\n`);
      return 2;
    }
    if (err instanceof RuleInvalidError) {
      process.stderr.write(`${refusalLine(err)}\n`);
      return 2;
    }
    if (err instanceof RuleConflictError) {
      process.stderr.write(`bulwark rules: conflict: ${err.message}\n`);
      return 3;
    }
    process.stderr.write(`bulwark rules: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** refusalLine is the one line a refused rule gets: the rule, the field, the validation message. */
export function refusalLine(err: RuleInvalidError): string {
  return `bulwark rules: refused ${err.key ?? 'the rule'}${err.field === undefined ? '' : ` (${err.field})`}: ${err.message}`;
}

function revisionFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new Usage(`${flag} must be a revision (a whole number ≥ 0), got ${JSON.stringify(value)}`);
  return Number(value);
}

function key(text: string): string {
  return ruleKey(parseRuleKey(text)); // throws RuleInvalidError for a bad key
}

function readDocument(file: string): string {
  try {
    return readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new Usage(`cannot read ${file}: ${(err as Error).message}`);
  }
}

async function check(file: string): Promise<number> {
  const rule = await checkRule(readDocument(file));
  process.stdout.write(`ok ${ruleKey(rule)}\n`);
  return 0;
}

async function set(store: RuleStore, file: string, ifRevision: number | undefined): Promise<number> {
  const rule = await checkRule(readDocument(file));
  const k = ruleKey(rule);
  const ttlMs = ruleTtlMs(rule);
  const revision = await store.put(k, JSON.stringify(rule), { ...(ifRevision === undefined ? {} : { ifRevision }), ...(ttlMs === undefined ? {} : { ttlMs }) });
  process.stdout.write(`set ${k} at revision ${revision}${ttlMs === undefined ? '' : ` (ends in ${Math.ceil(ttlMs / 1000)} s)`}\n`);
  return 0;
}

async function rm(store: RuleStore, k: string, ifRevision: number | undefined): Promise<number> {
  const revision = await store.remove(k, ifRevision === undefined ? undefined : { ifRevision });
  process.stdout.write(`removed ${k} at revision ${revision}\n`);
  return 0;
}

function shown(r: RuleRecord): Record<string, unknown> {
  let rule: unknown;
  try {
    rule = JSON.parse(r.value);
  } catch {
    rule = undefined;
  }
  return { key: r.key, revision: r.revision, leased: r.leased === true, ...(rule === undefined ? { value: r.value } : { rule }) };
}

async function ls(store: RuleStore, scope: string | undefined, json: boolean): Promise<number> {
  const listing = await store.list();
  const records = listing.records.filter((r) => scope === undefined || r.key.startsWith(`${scope}/`));
  if (json) {
    process.stdout.write(`${JSON.stringify({ revision: listing.revision, rules: records.map(shown) }, null, 2)}\n`);
    return 0;
  }
  const rows = [
    ['KEY', 'REVISION', 'LEASE', 'RULE'],
    ...records.map((r) => [r.key, String(r.revision), r.leased === true ? 'yes' : '-', r.value.length > 80 ? `${r.value.slice(0, 77)}...` : r.value]),
  ];
  process.stdout.write(table(rows));
  process.stdout.write(`(${records.length} rule${records.length === 1 ? '' : 's'} at revision ${listing.revision})\n`);
  return 0;
}

async function get(store: RuleStore, k: string, json: boolean): Promise<number> {
  const r = await store.get(k);
  if (r === undefined) {
    process.stderr.write(`bulwark rules: no rule ${k}\n`);
    return 1;
  }
  process.stdout.write(
    json ? `${JSON.stringify(shown(r), null, 2)}\n` : `${r.key} (revision ${r.revision}${r.leased === true ? ', leased' : ''})\n${r.value}\n`,
  );
  return 0;
}

async function history(store: RuleStore, k: string, json: boolean): Promise<number> {
  if (store.history === undefined) throw new Usage('this store keeps no history');
  const versions = await store.history(k);
  if (json) process.stdout.write(`${JSON.stringify(versions, null, 2)}\n`);
  else process.stdout.write(table([['REVISION', 'RULE'], ...versions.map((v) => [String(v.revision), v.value ?? '(deleted)'])]));
  return 0;
}

async function rollback(store: RuleStore, k: string, to: number, ifRevision: number | undefined): Promise<number> {
  if (store.at === undefined) throw new Usage('this store keeps no past revisions');
  const value = await store.at(k, to);
  const current = (await store.get(k))?.revision ?? 0;
  const cas = { ifRevision: ifRevision ?? current };
  if (value === undefined) {
    const revision = await store.remove(k, cas);
    process.stdout.write(`rolled back ${k} to revision ${to} (absent then): removed at revision ${revision}\n`);
    return 0;
  }
  const rule = await checkRule(value, k);
  const ttlMs = ruleTtlMs(rule);
  const revision = await store.put(k, value, { ...cas, ...(ttlMs === undefined ? {} : { ttlMs }) });
  process.stdout.write(`rolled back ${k} to revision ${to}: written at revision ${revision}\n`);
  return 0;
}

async function watch(store: RuleStore, json: boolean): Promise<number> {
  const listing = await store.list();
  const line = (revision: number, type: string, key: string, value: string | undefined) =>
    process.stdout.write(
      json
        ? `${JSON.stringify({ revision, type, key, ...(value === undefined ? {} : { value }) })}\n`
        : `${revision} ${type} ${key}${value === undefined ? '' : ` ${value}`}\n`,
    );
  for (const r of listing.records) line(r.revision, 'put', r.key, r.value);
  const done = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  const w = store.watch(listing.revision, (change: RuleChange) => {
    if (change.type === 'resync') {
      line(change.revision, 'resync', '*', undefined);
      for (const r of change.records) line(r.revision, 'put', r.key, r.value);
    } else for (const c of change.changes) line(c.revision, c.value === undefined ? 'delete' : 'put', c.key, c.value);
  });
  await done;
  await w.close();
  return 0;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}
