/**
 * bulwark/rules: change a fleet's guards live. A rule (a small JSON document in a RuleStore: memory or
 * etcd) sets options of a named component, isolates or resets a breaker, overrides instance weights or
 * injects faults, for every instance of a service or for one; the Rules binder applies them to the
 * components bound to it. Effective options = built ⊕ service rule ⊕ instance rule. See docs/rules.md.
 */
export * from './types.js';
