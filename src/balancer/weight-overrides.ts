/**
 * Weight overrides: an operator's per-instance weights for one service (instance id → weight), laid
 * over the weight each instance announces in `metadata.weight` (traffic shifting: 5 % to a canary;
 * draining an instance before removing it). An override of 0 drains: the Balancer hands the instance to
 * no strategy, so it takes no new picks while its calls in flight finish.
 */
import { finite, showValue } from '../core/validate.js';
import { MAX_WEIGHT } from './instance-table.js';

/** WeightOverrides are weights by instance id: each finite, in [0, 1 000 000] (0 drains the instance). */
export type WeightOverrides = Readonly<Record<string, number>>;

/**
 * checkWeightOverrides validates `value` as WeightOverrides for `owner` and answers them as a map, or
 * undefined for none (`undefined`, or an object with no keys). Throws a TypeError for a value that is
 * not a plain object of numbers or for an empty id, a RangeError for a weight that is not finite or is
 * outside [0, 1 000 000] (`Balancer: weights.canary-1 must be a finite number in [0, 1000000], got -1`).
 */
export function checkWeightOverrides(owner: string, value: unknown): ReadonlyMap<string, number> | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${owner}: weights must be an object of instance id → weight, or undefined, got ${showValue(value)}`);
  }
  const map = new Map<string, number>();
  for (const id of Object.keys(value)) {
    if (id.length === 0) throw new TypeError(`${owner}: weights: an instance id must be a non-empty string`);
    map.set(id, finite(owner, `weights.${id}`, (value as Record<string, unknown>)[id], 0, MAX_WEIGHT));
  }
  return map.size === 0 ? undefined : map;
}
