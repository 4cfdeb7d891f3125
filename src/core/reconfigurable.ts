/**
 * The live-reconfiguration protocol (types only): what bulwark/rules needs of a component whose options
 * an operator may change while it runs. Each component documents, next to its `reconfigure`, what it
 * keeps across a change (tokens, window counts, breaker state).
 */

/**
 * Reconfigurable is a component whose options can change while it runs.
 *
 * `reconfigure(partial)` lays `partial` over the options the component runs now and validates the result
 * with the constructor's own validation (the same TypeError / RangeError text, unknown keys refused the
 * same way); it applies all of it or, when it throws, none of it. A key that cannot change on a running
 * component (its clock, a callback, its name) is refused with a TypeError saying so. It adds no check to
 * the component's hot path: it swaps state.
 *
 * `options()` answers the reconfigurable options the component runs now, as fresh plain JSON data, so a
 * caller that kept the options a component was built with can return to them with
 * `reconfigure(built)`.
 */
export interface Reconfigurable<O extends object = Record<string, unknown>> {
  reconfigure(partial: Partial<O>): void;
  options(): Partial<O>;
}

/**
 * Isolatable is a breaker an operator can hold open, with a reason reported everywhere the breaker's
 * state is (stats, metrics, status, the rejection's message), and reset.
 *
 * `isolate(reason)` forces it open until `reset()`; an isolate beats every other view of the breaker
 * (its own evidence, its fleet's, a client's ejection cap and panic rule). `reset()` closes it now and
 * clears its local window; it trips again if failures continue.
 */
export interface Isolatable {
  isolate(reason?: string): void;
  reset(): void;
}
