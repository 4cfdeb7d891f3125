/**
 * bulwark/rules: change a fleet's guards live. A rule (a small JSON document in a RuleStore: memory or
 * etcd) sets options of a named component, isolates or resets a breaker, overrides instance weights or
 * injects faults, for every instance of a service or for one; the Rules binder applies them to the
 * components bound to it. Effective options = built ⊕ service rule ⊕ instance rule. See docs/rules.md.
 */
export * from './types.js';
export { ruleKinds, ruleKey, parseRuleKey, scopeOf, isRuleKind } from './rule-key.js';
export { parseRule, ruleTtlMs, ruleText } from './parse-rule.js';
export { checkRule, checkRuleOptions } from './check-rule.js';
export { MemoryRuleStore, memoryRuleStoreDefaults, type MemoryRuleStoreOptions } from './memory-rule-store.js';
export { Rules, rulesDefaults, type BindKind, type RuleTarget, type RulesOptions, type RulesStats } from './rules.js';
export { RuleInvalidError, RuleRefusedError, RuleConflictError, ClosedError, BulwarkError } from '../core/errors.js';
export type { RulesAppliedMessage, RulesRefusedMessage } from '../core/diagnostics.js';
export { EtcdRuleStore, etcdRuleStoreDefaults, type EtcdRuleStoreOptions } from './etcd-rule-store.js';
