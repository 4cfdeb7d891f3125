/**
 * The dashboard's controls: isolate or reset a breaker, change a limit, shift weights, start a
 * fault-injection rehearsal with its expiry. Each is a rule written to the rules store (bulwark/rules'
 * RuleStore), never a private channel to a component: the instances apply it as they apply any rule.
 * A rule the checks refuse is answered 422 with the field at fault and the message, and nothing is
 * written.
 */
import type { IncomingMessage } from 'node:http';
import { CircuitBreaker } from '../breaker/index.js';
import { KeyedLimiter, TokenLimiter } from '../limit/index.js';
import { Bulkhead, RetryBudget, Timeout } from '../policy/index.js';
import { ruleLimits, type Rule, type RuleKind, type RuleStore } from '../rules/types.js';

/** RuleCheck is a refused rule's field (undefined: the document as a whole) and message. */
export interface RuleCheck {
  readonly field: string | undefined;
  readonly message: string;
}

/** DashboardControls turns the dashboard's controls on. */
export interface DashboardControls {
  /** The rules store the controls write to. */
  store: RuleStore;
  /**
   * The scope a process's dashboard writes its rules for: its service (`orders`, every instance) or
   * itself (`orders@i-1`). A fleet dashboard writes for the instance shown. Required for a process.
   */
  scope?: string;
  /**
   * check answers why a rule is refused, or undefined: pass the rules module's own validation here.
   * It runs after the dashboard's checks (the document's shape, and the options of the limits, breakers
   * and policies through their own constructors). Defaults to none.
   */
  check?: (rule: Rule) => RuleCheck | undefined;
}

const KINDS: ReadonlySet<string> = new Set<RuleKind>([
  'token-limiter', 'keyed-limiter', 'period-limiter', 'redis-token-limiter', 'redis-period-limiter', 'bulkhead', 'adaptive-shedder',
  'circuit-breaker', 'sre-breaker', 'timeout', 'retry', 'retry-budget', 'client', 'isolate', 'reset', 'weights', 'fault',
]);
const SCOPE_RE = /^[A-Za-z0-9._:-]{1,255}(@[A-Za-z0-9._:-]{1,255})?$/;
const NAME_RE = /^[A-Za-z0-9._:@/ -]{1,255}$/;

/** Each options kind's own validation: its constructor, given the set laid over what a bare one needs. */
const BUILDERS: Partial<Record<RuleKind, (set: Record<string, unknown>) => unknown>> = {
  'token-limiter': (set) => new TokenLimiter({ rate: 1, ...set } as never),
  'keyed-limiter': (set) => new KeyedLimiter({ rate: 1, ...set } as never),
  bulkhead: (set) => new Bulkhead(set as never),
  'retry-budget': (set) => new RetryBudget(set as never),
  timeout: (set) => new Timeout(set as never),
  'circuit-breaker': (set) => new CircuitBreaker(set as never),
};

/** ruleKey answers a rule's key, `<scope>/<kind>/<name>`. */
export function ruleKey(r: { scope: string; kind: string; name: string }): string {
  return `${r.scope}/${r.kind}/${r.name}`;
}

const refuse = (field: string | undefined, message: string): RuleCheck => ({ field, message });

/** isObject tells a plain JSON object. */
function isObject(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}

/** checkRef checks the parts of a key. */
export function checkRef(doc: Record<string, unknown>): RuleCheck | undefined {
  const { scope, kind, name } = doc;
  if (typeof scope !== 'string' || !SCOPE_RE.test(scope)) return refuse('scope', `scope must be <service> or <service>@<instance> ([A-Za-z0-9._:-]), got ${JSON.stringify(scope)}`);
  if (typeof kind !== 'string' || !KINDS.has(kind)) return refuse('kind', `kind must be one of ${[...KINDS].join(', ')}, got ${JSON.stringify(kind)}`);
  if (typeof name !== 'string' || !NAME_RE.test(name) || name.split('/').includes('..')) return refuse('name', `name must be a component's name (1–255 of [A-Za-z0-9._:@/ -]), got ${JSON.stringify(name)}`);
  return undefined;
}

/** checkRule answers why the dashboard refuses a rule document, or undefined. */
export function checkRule(doc: unknown): RuleCheck | undefined {
  if (!isObject(doc)) return refuse(undefined, 'a rule must be a JSON object');
  const ref = checkRef(doc);
  if (ref !== undefined) return ref;
  if (Buffer.byteLength(JSON.stringify(doc)) > ruleLimits.maxBytes) return refuse(undefined, `a rule must be at most ${ruleLimits.maxBytes} bytes`);
  const kind = doc.kind as RuleKind;
  switch (kind) {
    case 'isolate':
      if (doc.reason !== undefined && (typeof doc.reason !== 'string' || doc.reason.length > 256)) return refuse('reason', 'reason must be text of at most 256 characters');
      return undefined;
    case 'reset':
      return undefined;
    case 'weights': {
      if (!isObject(doc.weights) || Object.keys(doc.weights).length === 0) return refuse('weights', 'weights must be an object of instance id → weight');
      for (const [id, w] of Object.entries(doc.weights)) {
        if (typeof w !== 'number' || !Number.isFinite(w) || w < 0 || w > 1_000_000) return refuse(`weights.${id}`, `weight must be a number in [0, 1000000] (0 drains the instance), got ${JSON.stringify(w)}`);
      }
      return undefined;
    }
    case 'fault': {
      if (!isObject(doc.fault)) return refuse('fault', `fault must be an object of FaultInjector options, got ${JSON.stringify(doc.fault)}`);
      const ttl = doc.ttlMs;
      if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 1_000 || ttl > ruleLimits.maxFaultTtlMs)) {
        return refuse('ttlMs', `ttlMs must be an integer in [1000, ${ruleLimits.maxFaultTtlMs}] (a rehearsal ends by itself), got ${JSON.stringify(ttl)}`);
      }
      return undefined;
    }
    default: {
      if (!isObject(doc.set)) return refuse('set', `set must be an object of ${kind} options, got ${JSON.stringify(doc.set)}`);
      const build = BUILDERS[kind];
      if (build === undefined) return undefined;
      let made: unknown;
      try {
        made = build(doc.set);
      } catch (err) {
        if (!(err instanceof TypeError || err instanceof RangeError)) throw err;
        // "TokenLimiter: rate must be …": the field is the option named after the owner.
        const m = /^[A-Za-z]+: ([A-Za-z0-9_.]+) /.exec(err.message);
        const field = m !== null && Object.hasOwn(doc.set, m[1]!.split('.')[0]!) ? `set.${m[1]}` : 'set';
        return refuse(field, err.message);
      }
      void (made as { close?: () => Promise<void> }).close?.();
      return undefined;
    }
  }
}

/** ControlAnswer is what a control request is answered: a status and a JSON body. */
export interface ControlAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** readJson reads a request's JSON body (at most `max` bytes), or the body Express's json parser left. */
export function readJson(req: IncomingMessage, max: number): Promise<unknown> {
  const parsed = (req as { body?: unknown }).body;
  if (parsed !== undefined) return Promise.resolve(parsed);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        reject(Object.assign(new Error(`a control request's body must be at most ${max} bytes`), { status: 413 }));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch {
        reject(Object.assign(new Error('a control request takes a JSON body'), { status: 400 }));
      }
    });
    req.on('error', reject);
  });
}

/** control runs one control request (`put` a rule or `remove` one) against the store. */
export async function control(controls: DashboardControls, action: string, body: unknown): Promise<ControlAnswer> {
  if (action === 'put') {
    const refused = checkRule(body) ?? controls.check?.(body as Rule);
    if (refused !== undefined) return { status: 422, body: { error: refused.message, field: refused.field } };
    const rule = body as Rule;
    const key = ruleKey(rule);
    const ttlMs = rule.kind === 'fault' ? (rule.ttlMs ?? ruleLimits.faultTtlMs) : undefined;
    const revision = await controls.store.put(key, JSON.stringify(rule), ttlMs === undefined ? undefined : { ttlMs });
    return { status: 200, body: { key, revision } };
  }
  if (action === 'remove') {
    if (!isObject(body)) return { status: 422, body: { error: 'remove takes { scope, kind, name }', field: undefined } };
    const refused = checkRef(body);
    if (refused !== undefined) return { status: 422, body: { error: refused.message, field: refused.field } };
    const key = ruleKey(body as { scope: string; kind: string; name: string });
    return { status: 200, body: { key, revision: await controls.store.remove(key) } };
  }
  return { status: 404, body: { error: `no control ${JSON.stringify(action)}: put or remove` } };
}
