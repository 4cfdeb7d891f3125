/** Small builders the metrics adapters share: family specs and a closed-flag reader. @internal */
import type { MetricFamilySpec } from './types.js';

export type Any = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export const counter = (name: string, help: string, labelNames: string[] = []): MetricFamilySpec => ({ name, type: 'counter', help, labelNames });
export const gauge = (name: string, help: string, labelNames: string[] = []): MetricFamilySpec => ({ name, type: 'gauge', help, labelNames });
export const histogram = (name: string, help: string, labelNames: string[] = []): MetricFamilySpec => ({ name, type: 'histogram', help, labelNames });

/** flag answers a reader of a component's boolean field (its closed or retired flag). */
export const flag = (c: Any, field: string) => (): boolean => c[field] === true;
