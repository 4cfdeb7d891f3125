/**
 * The key of a rule, `<scope>/<kind>/<name>`: the one place it is written and read. A scope is a service
 * (`orders`) or one instance of it (`orders@i-1`); service and instance hold neither `/` nor `@`, the
 * name may hold `/` (a client's instance breaker is `<service>/<instance>`).
 */
import { RuleInvalidError } from '../core/errors.js';
import type { RuleKind, RuleRef } from './types.js';

/** Every kind of rule, in the order the docs list them. */
export const ruleKinds: readonly RuleKind[] = Object.freeze([
  'token-limiter',
  'keyed-limiter',
  'period-limiter',
  'redis-token-limiter',
  'redis-period-limiter',
  'bulkhead',
  'adaptive-shedder',
  'circuit-breaker',
  'sre-breaker',
  'timeout',
  'retry',
  'retry-budget',
  'client',
  'isolate',
  'reset',
  'weights',
  'fault',
] as const);

const KINDS: ReadonlySet<string> = new Set(ruleKinds);
/** A service name or an instance id: no `/`, `@`, whitespace or control characters, at most 253 characters. */
const PART = /^[^/@\s\x00-\x1f\x7f]{1,253}$/;

/** isRuleKind tells whether `kind` names a kind of rule. */
export function isRuleKind(kind: unknown): kind is RuleKind {
  return typeof kind === 'string' && KINDS.has(kind);
}

/** ruleKey answers the key of a rule. */
export function ruleKey(ref: RuleRef): string {
  return `${ref.scope}/${ref.kind}/${ref.name}`;
}

/** scopeOf answers the scope of a service (`instance` undefined) or of one of its instances. */
export function scopeOf(service: string, instance?: string): string {
  return instance === undefined ? service : `${service}@${instance}`;
}

/** checkScope throws RuleInvalidError unless `scope` is `<service>` or `<service>@<instance>`. */
export function checkScope(scope: unknown, key?: string): string {
  const parts = typeof scope === 'string' ? scope.split('@') : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((p) => PART.test(p))) {
    throw new RuleInvalidError(`scope must be <service> or <service>@<instance>, got ${JSON.stringify(scope)}`, { key, field: 'scope' });
  }
  return scope as string;
}

/** parseRuleKey reads `<scope>/<kind>/<name>`; throws RuleInvalidError for any other shape. */
export function parseRuleKey(key: string): RuleRef {
  const first = key.indexOf('/');
  const second = first < 0 ? -1 : key.indexOf('/', first + 1);
  if (second < 0 || second === key.length - 1)
    throw new RuleInvalidError(`a rule key is <scope>/<kind>/<name>, got ${JSON.stringify(key)}`, { key, field: 'key' });
  const scope = checkScope(key.slice(0, first), key);
  const kind = key.slice(first + 1, second);
  if (!isRuleKind(kind)) throw new RuleInvalidError(`unknown kind ${JSON.stringify(kind)}; the kinds are ${ruleKinds.join(', ')}`, { key, field: 'kind' });
  const name = key.slice(second + 1);
  checkName(name, key);
  return { scope, kind, name };
}

/** checkName throws RuleInvalidError for an empty name, one over 512 characters, or one with whitespace or control characters. */
export function checkName(name: unknown, key?: string): string {
  if (typeof name !== 'string' || !/^[^\s\x00-\x1f\x7f]{1,512}$/.test(name) || name.startsWith('/') || name.endsWith('/')) {
    throw new RuleInvalidError(`name must be 1–512 characters without whitespace, not starting or ending in '/', got ${JSON.stringify(name)}`, {
      key,
      field: 'name',
    });
  }
  return name;
}
