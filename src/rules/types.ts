/**
 * The rule model of bulwark/rules (types only): the rule documents an operator writes, the RuleStore
 * that holds them, and how a refused rule is reported. docs/rules.md tells the whole model.
 *
 * A rule is one JSON document at one key, `<scope>/<kind>/<name>`, where the scope is a service
 * (`orders`: every instance of it) or one instance (`orders@i-1`), the kind says what the rule does, and
 * the name is the bound component it is for (a breaker of a client is named `<service>/<instance>`).
 * In etcd the key sits under a prefix: `/bulwark/rules/orders/token-limiter/api`.
 */

/** OptionsRuleKind is a kind whose rule sets options of a component (`set`), applied with its `reconfigure`. */
export type OptionsRuleKind =
  | 'token-limiter'
  | 'keyed-limiter'
  | 'period-limiter'
  | 'redis-token-limiter'
  | 'redis-period-limiter'
  | 'bulkhead'
  | 'adaptive-shedder'
  | 'circuit-breaker'
  | 'sre-breaker'
  | 'timeout'
  | 'retry'
  | 'retry-budget'
  | 'client';

/** RuleKind is every kind of rule: options, the breaker actions, weight overrides and fault injection. */
export type RuleKind = OptionsRuleKind | 'isolate' | 'reset' | 'weights' | 'fault';

/** RuleRef names a rule: where it applies, what it does, and to which component. */
export interface RuleRef {
  /** `<service>` (every instance) or `<service>@<instance>` (one instance). */
  scope: string;
  kind: RuleKind;
  /** The bound component's name; for `weights` and a client's `fault`, the called service; for an HttpGuard's `fault`, the route. */
  name: string;
}

/** OptionsRule sets options of a component: `set` is laid over its built options (instance over service). */
export interface OptionsRule extends RuleRef {
  kind: OptionsRuleKind;
  /** Options of the component's constructor, checked by its own validation. */
  set: Record<string, unknown>;
}

/** IsolateRule holds a breaker open, with a reason reported wherever its state is, until the rule is removed. */
export interface IsolateRule extends RuleRef {
  kind: 'isolate';
  /** Why, shown in stats, metrics, status and the rejection's message. Defaults to "isolated by rule <key>". */
  reason?: string;
}

/** ResetRule closes a breaker now (and clears its window), once per revision it is written at. */
export interface ResetRule extends RuleRef {
  kind: 'reset';
}

/** WeightsRule overrides instance weights of a called service (`name`): instance id → weight, 0 drains. */
export interface WeightsRule extends RuleRef {
  kind: 'weights';
  weights: Record<string, number>;
}

/** FaultRule injects delays and failures into a client's calls to a service, or an HttpGuard route. */
export interface FaultRule extends RuleRef {
  kind: 'fault';
  /** FaultInjector's options (bulwark/policy), checked by its own validation. */
  fault: Record<string, unknown>;
  /** How long the rule lives (the etcd lease's length). Defaults to 600 000 (10 min); at most 86 400 000 (24 h). */
  ttlMs?: number;
}

/** Rule is one rule document. */
export type Rule = OptionsRule | IsolateRule | ResetRule | WeightsRule | FaultRule;

/** ruleLimits are the bounds every rule is checked against. */
export const ruleLimits = Object.freeze({
  /** A rule document's size in bytes (UTF-8). */
  maxBytes: 64 * 1024,
  /** A fault rule's default and longest life. */
  faultTtlMs: 600_000,
  maxFaultTtlMs: 86_400_000,
});

/**
 * RuleRecord is a rule as a store holds it: its key (`<scope>/<kind>/<name>`, without the store's
 * prefix), its text as written (parsed and checked by the reader, so a bad one can be reported), the
 * store revision it was last written at, and, for a rule with a life, when it ends (the store's clock).
 */
export interface RuleRecord {
  key: string;
  value: string;
  revision: number;
  /** True when the store ends the rule by itself (an etcd lease, a MemoryRuleStore timer). */
  leased?: boolean;
  /** When the store ends it, on the store's clock, where the store knows. */
  expiresAt?: number;
}

/** RuleListing is every rule a store holds, as of one revision. */
export interface RuleListing {
  revision: number;
  records: RuleRecord[];
}

/** RulePutOptions: compare-and-swap and a life. */
export interface RulePutOptions {
  /** Write only if the key's revision is this one (0: only if absent); else RuleConflictError. */
  ifRevision?: number;
  /** The rule's life (a lease in etcd); none when undefined. */
  ttlMs?: number;
}

/** RuleRemoveOptions: compare-and-swap. */
export interface RuleRemoveOptions {
  /** Remove only if the key's revision is this one; else RuleConflictError. */
  ifRevision?: number;
}

/**
 * RuleChange is what a store's watch delivers, in revision order: every key changed at one revision
 * together (`value` undefined: deleted or expired), or, when the store cannot replay from where the
 * watch was (compaction), the whole state as of a revision to replace what the watcher had.
 */
export type RuleChange = { type: 'changes'; revision: number; changes: RuleRecordChange[] } | { type: 'resync'; revision: number; records: RuleRecord[] };

/** RuleRecordChange is one key's change at a revision: its new record, or `value` undefined when it was deleted or expired. */
export type RuleRecordChange = Omit<RuleRecord, 'value'> & { value: string | undefined };

/** RuleVersion is one past state of a key: its text at `revision`, or undefined where it was deleted. */
export interface RuleVersion {
  key: string;
  revision: number;
  value: string | undefined;
}

/** RuleWatch is a running watch; `close()` ends it. */
export interface RuleWatch {
  close(): Promise<void>;
}

/**
 * RuleStore holds rules: one key each, revisions increasing with every write. `watch(fromRevision)`
 * delivers every change after `fromRevision` in order (or a resync), resuming by itself after a broken
 * connection; while the store cannot be reached a watcher keeps what it has. `history` is offered by
 * stores that keep past revisions (etcd, until compaction; memory).
 */
export interface RuleStore {
  list(): Promise<RuleListing>;
  get(key: string): Promise<RuleRecord | undefined>;
  /** put writes `value` at `key`; answers the revision written. */
  put(key: string, value: string, options?: RulePutOptions): Promise<number>;
  /** remove deletes `key`; answers the revision of the delete (the store's current one if it was absent). */
  remove(key: string, options?: RuleRemoveOptions): Promise<number>;
  watch(fromRevision: number, listener: (change: RuleChange) => void): RuleWatch;
  history?(key: string): Promise<RuleVersion[]>;
  /** at answers the key's text as of a past revision (undefined: absent then), where the store keeps it. */
  at?(key: string, revision: number): Promise<string | undefined>;
  close(): Promise<void>;
}

/**
 * RuleRefusal reports a rule that was not applied: which (key, revision), the field at fault (the
 * option's name or a path into the document; undefined for the document as a whole), the component's
 * own validation message, and the error's code (`ERR_RULE_INVALID`, or `ERR_RULE_REFUSED` when the
 * running component's `reconfigure` threw).
 */
export interface RuleRefusal {
  key: string;
  revision: number;
  field: string | undefined;
  message: string;
  code: string;
}

/** RuleBindingStatus is what one bound component runs: its rule revision, its isolation, what it refused. */
export interface RuleBindingStatus {
  kind: RuleKind;
  name: string;
  /** The newest store revision applied to this component (0: built options only). */
  revision: number;
  /** The keys of the rules it runs, in precedence order (service, then instance). */
  rules: string[];
  /** The reason of the isolate rule holding it open, if any. */
  isolated: string | undefined;
  refused: RuleRefusal[];
}
