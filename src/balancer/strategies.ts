/**
 * createPicker turns a strategy option (a name, a Picker, or a factory) into a Picker for one service.
 */
import type { Clock } from '../core/clock.js';
import type { Picker, StrategyName } from './types.js';
import { LeastRequest } from './least-request.js';
import { P2C } from './p2c.js';
import { Random } from './random.js';
import { RingHash } from './ring-hash.js';
import { RoundRobin } from './round-robin.js';
import { SmoothWeightedRoundRobin } from './smooth-weighted.js';

/** StrategyOption is a built-in strategy's name, a Picker, or a function making one. */
export type StrategyOption = StrategyName | Picker | (() => Picker);

const names: readonly StrategyName[] = ['round-robin', 'random', 'weighted-round-robin', 'ring-hash', 'p2c', 'least-request'];

/** createPicker builds the Picker `strategy` names, passing `clock`, `random` and `sliceLists` to the ones that use them. */
export function createPicker(strategy: StrategyOption, deps: { clock?: Clock; random?: () => number; sliceLists?: boolean; owner?: string } = {}): Picker {
  const owner = deps.owner ?? 'createPicker';
  if (typeof strategy === 'function') {
    const p = strategy();
    if (p === null || typeof p !== 'object' || typeof p.pick !== 'function')
      throw new TypeError(`${owner}: strategy: the factory must return a Picker (an object with pick())`);
    return p;
  }
  if (strategy !== null && typeof strategy === 'object') {
    if (typeof strategy.pick !== 'function') throw new TypeError(`${owner}: strategy: a Picker must have a pick() method`);
    return strategy;
  }
  const random = deps.random;
  const { clock, sliceLists } = deps;
  switch (strategy) {
    case 'round-robin':
      return new RoundRobin({ random, clock, sliceLists });
    case 'random':
      return new Random({ random, clock, sliceLists });
    case 'weighted-round-robin':
      return new SmoothWeightedRoundRobin({ clock, sliceLists });
    case 'ring-hash':
      return new RingHash({ clock, random, sliceLists });
    case 'p2c':
      return new P2C({ clock, random, sliceLists });
    case 'least-request':
      return new LeastRequest({ random, clock, sliceLists });
    default:
      throw new RangeError(
        `${owner}: strategy must be one of ${names.map((n) => `'${n}'`).join(', ')}, a Picker or a factory, got ${JSON.stringify(strategy)}`,
      );
  }
}
