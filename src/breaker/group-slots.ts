/**
 * The slots a BreakerGroup keeps on each breaker it holds.
 */

/**
 * GROUP_USED and GROUP_PLACED are where a BreakerGroup keeps, on each breaker it holds, when the
 * breaker was last handed out and when it was (re)placed in the group's order. Both breakers declare
 * them, so that grouped and ungrouped breakers share one object shape. @internal
 */
export const GROUP_USED: unique symbol = Symbol('bulwark.breakerGroup.used');
/** See GROUP_USED. @internal */
export const GROUP_PLACED: unique symbol = Symbol('bulwark.breakerGroup.placed');
