/**
 * parseRule reads a rule document and checks its shape: size, JSON, kind, the keys each kind has, the
 * types of its values and the fault rule's life. Whether the options in it suit the component is for
 * the component's own validation (check-rule.ts offline, `reconfigure` in a running process).
 */
import { RuleInvalidError } from '../core/errors.js';
import { checkName, checkScope, isRuleKind, parseRuleKey, ruleKey, ruleKinds } from './rule-key.js';
import { ruleLimits, type OptionsRuleKind, type Rule, type RuleKind, type RuleRef } from './types.js';

/** The keys each kind of document has besides scope, kind and name. */
const BODY_KEYS: Readonly<Record<'options' | 'isolate' | 'reset' | 'weights' | 'fault', readonly string[]>> = {
  options: ['set'],
  isolate: ['reason'],
  reset: [],
  weights: ['weights'],
  fault: ['fault', 'ttlMs'],
};

/** The longest isolate reason, in characters. */
const MAX_REASON = 1024;

function bodyOf(kind: RuleKind): keyof typeof BODY_KEYS {
  return kind === 'isolate' || kind === 'reset' || kind === 'weights' || kind === 'fault' ? kind : 'options';
}

/**
 * parseRule reads `text` as a rule document; with `key`, the document's scope, kind and name may be left
 * out (they are the key's) and must match it when given. Throws RuleInvalidError naming the field.
 */
export function parseRule(text: string, key?: string): Rule {
  // A UTF-16 unit is at most 3 bytes of UTF-8: a short text is not counted.
  const bytes = text.length * 3 <= ruleLimits.maxBytes ? 0 : Buffer.byteLength(text, 'utf8');
  if (bytes > ruleLimits.maxBytes) throw new RuleInvalidError(`a rule is at most ${ruleLimits.maxBytes} bytes, got ${bytes}`, { key, field: undefined });
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new RuleInvalidError(`not JSON: ${(err as Error).message}`, { key, field: undefined });
  }
  return checkRuleShape(doc, key === undefined ? undefined : parseRuleKey(key));
}

/** checkRuleShape checks a parsed document (see parseRule); `ref`, when given, is its key's. */
export function checkRuleShape(doc: unknown, ref?: RuleRef): Rule {
  const at = ref === undefined ? undefined : ruleKey(ref);
  const bad = (field: string | undefined, message: string) => new RuleInvalidError(message, { key: at, field });
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw bad(undefined, `a rule is a JSON object, got ${doc === null ? 'null' : Array.isArray(doc) ? 'an array' : typeof doc}`);
  const d = doc as Record<string, unknown>;
  const kind = d.kind ?? ref?.kind;
  if (!isRuleKind(kind)) throw bad('kind', `unknown kind ${JSON.stringify(kind)}; the kinds are ${ruleKinds.join(', ')}`);
  // The key's parts were checked when it was read (parseRuleKey): only what the document names itself is checked here.
  const scope = d.scope === undefined && ref !== undefined ? ref.scope : checkScope(d.scope, at);
  const name = d.name === undefined && ref !== undefined ? ref.name : checkName(d.name, at);
  const key = ruleKey({ scope, kind, name });
  if (ref !== undefined && key !== at) throw bad('key', `the document names ${key} but sits at ${at}`);
  const bodyKeys = BODY_KEYS[bodyOf(kind)];
  for (const k of Object.keys(d)) {
    if (k !== 'scope' && k !== 'kind' && k !== 'name' && !bodyKeys.includes(k)) {
      throw new RuleInvalidError(`${k} is not a key of a ${kind} rule; its keys are scope, kind, name${bodyKeys.map((b) => `, ${b}`).join('')}`, {
        key,
        field: k,
      });
    }
  }
  const invalid = (field: string, message: string) => new RuleInvalidError(message, { key, field });
  switch (bodyOf(kind)) {
    case 'options': {
      const set = d.set;
      if (set === null || typeof set !== 'object' || Array.isArray(set)) throw invalid('set', `set must be an object of options, got ${JSON.stringify(set)}`);
      return { scope, kind: kind as OptionsRuleKind, name, set: set as Record<string, unknown> };
    }
    case 'isolate': {
      const reason = d.reason;
      if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_REASON))
        throw invalid('reason', `reason must be a string of at most ${MAX_REASON} characters, got ${JSON.stringify(reason)?.slice(0, 80)}`);
      return reason === undefined ? { scope, kind: 'isolate', name } : { scope, kind: 'isolate', name, reason };
    }
    case 'reset':
      return { scope, kind: 'reset', name };
    case 'weights': {
      const w = d.weights;
      if (w === null || typeof w !== 'object' || Array.isArray(w))
        throw invalid('weights', `weights must be an object of instance id → weight, got ${JSON.stringify(w)}`);
      const weights: Record<string, number> = {};
      for (const [id, v] of Object.entries(w as Record<string, unknown>)) {
        if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
          throw invalid(`weights.${id}`, `weights.${id} must be a finite number ≥ 0 (0 drains), got ${JSON.stringify(v)}`);
        weights[id] = v;
      }
      return { scope, kind: 'weights', name, weights };
    }
    case 'fault': {
      const fault = d.fault;
      if (fault === null || typeof fault !== 'object' || Array.isArray(fault))
        throw invalid('fault', `fault must be an object of FaultInjector options, got ${JSON.stringify(fault)}`);
      const ttlMs = d.ttlMs;
      if (ttlMs !== undefined && (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1000 || ttlMs > ruleLimits.maxFaultTtlMs)) {
        throw invalid('ttlMs', `ttlMs must be an integer in 1000–${ruleLimits.maxFaultTtlMs} (24 h), got ${JSON.stringify(ttlMs)}`);
      }
      return ttlMs === undefined
        ? { scope, kind: 'fault', name, fault: fault as Record<string, unknown> }
        : { scope, kind: 'fault', name, fault: fault as Record<string, unknown>, ttlMs };
    }
  }
}

/** ruleTtlMs answers the life a rule is written with: a fault rule's `ttlMs` (default 10 min), none for the others. */
export function ruleTtlMs(rule: Rule): number | undefined {
  return rule.kind === 'fault' ? (rule.ttlMs ?? ruleLimits.faultTtlMs) : undefined;
}

/** ruleText answers the document as it is written to a store: compact JSON. */
export function ruleText(rule: Rule): string {
  return JSON.stringify(rule);
}
