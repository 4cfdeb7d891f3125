/**
 * The dashboard's controls: isolate or reset a breaker, change a limit, shift weights, start a
 * fault-injection rehearsal with its expiry. Each is a rule written to the rules store (bulwark/rules'
 * RuleStore), never a private channel to a component: the instances apply it as they apply any rule.
 * A rule is validated by bulwark/rules' own offline check (`checkRule`, what `bulwark rules set` runs:
 * the document's shape, then the options through the component's own constructor), so the page shows
 * the CLI's messages word for word; a refused rule is answered 422 with its field and message, and
 * nothing is written.
 */
import type { IncomingMessage } from 'node:http';
import { RuleInvalidError } from '../core/errors.js';
import { checkRule } from '../rules/check-rule.js';
import { ruleText, ruleTtlMs } from '../rules/parse-rule.js';
import { checkName, checkScope, parseRuleKey, ruleKey } from '../rules/rule-key.js';
import type { RuleStore } from '../rules/types.js';

/** DashboardControls turns the dashboard's controls on. */
export interface DashboardControls {
  /** The rules store the controls write to. */
  store: RuleStore;
  /**
   * The scope a process's dashboard writes its rules for: its service (`orders`, every instance) or
   * itself (`orders@i-1`). A fleet dashboard writes for the instance shown. Required for a process.
   */
  scope?: string;
}

/** isObject tells a plain JSON object. */
function isObject(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}

/** refused answers the 422 of a rule the validation refused, or rethrows anything else. */
function refused(err: unknown): ControlAnswer {
  if (!(err instanceof RuleInvalidError)) throw err;
  return { status: 422, body: { error: err.message, field: err.field, code: err.code } };
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
    let rule;
    try {
      rule = await checkRule(JSON.stringify(body));
    } catch (err) {
      return refused(err);
    }
    const ttlMs = ruleTtlMs(rule);
    const key = ruleKey(rule);
    const revision = await controls.store.put(key, ruleText(rule), ttlMs === undefined ? undefined : { ttlMs });
    return { status: 200, body: { key, revision } };
  }
  if (action === 'remove') {
    if (!isObject(body)) return { status: 422, body: { error: 'remove takes { scope, kind, name }', field: undefined } };
    let key: string;
    try {
      // The parts one by one (a scope holds no '/'), then the key as bulwark/rules reads one.
      key = ruleKey(parseRuleKey(`${checkScope(body.scope)}/${String(body.kind)}/${checkName(body.name)}`));
    } catch (err) {
      return refused(err);
    }
    return { status: 200, body: { key, revision: await controls.store.remove(key) } };
  }
  return { status: 404, body: { error: `no control ${JSON.stringify(action)}: put or remove` } };
}
