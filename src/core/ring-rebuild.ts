/**
 * The sliced rebuild behind `HashRing.rebuild`: a new ring's state is built beside the old ring's in
 * steps of bounded work, so that a large change need not block the event loop while the old ring keeps
 * answering lookups. The steps: read the changes; claim the members (the new ring starts from the old
 * one's slots, so kept points keep their owners); filter the kept points in ring order; hash the new
 * points (ring-points.ts), radix-sort them, order hash ties by member name, and merge from the back.
 * The ring it builds owns every key as one built by `HashRing.update` would.
 *
 * Internal to src/core: HashRing hands its state in and takes the built state back; nothing here is
 * part of the package's API.
 */
import { hash32, type HashFn } from './hash.js';
import { integer } from './validate.js';
import {
  MAX_MEMBERS,
  MAX_POINTS_PER_MEMBER,
  PointHasher,
  RadixSort,
  checkMember,
  defaultPointName,
  hashRange,
  keepPoints,
  mergeBack,
  orderTies,
  type MergeState,
  type Points,
} from './ring-points.js';

/** Below this many new points a rebuild sorts them natively (packed doubles); from it on, by radix. */
export const RADIX_FROM = 1 << 15;
/** A rebuild gives an array of this many points or more a step of its own to be allocated in. */
const BIG_ARRAY = 1 << 18;

/**
 * RingState is a ring's whole state: its members (slot per name, names and counts per slot, free
 * slots) and its sorted points (hash, owner slot, rank) in [0, length), capacity beyond.
 * @internal
 */
export interface RingState {
  slots: Map<string, number>;
  names: string[];
  counts: number[];
  free: number[];
  points: Uint32Array<ArrayBuffer>;
  owners: Uint32Array<ArrayBuffer>;
  ranks: Uint32Array<ArrayBuffer>;
  length: number;
}

/** Claim is what a rebuild's membership pass found: points kept per old slot, (slot, from, to) to add, slots freed. */
interface Claim {
  keepOf: Uint32Array;
  /** 1 for each slot the pass has seen. */
  claimed: Uint8Array;
  grow: number[];
  gone: number[];
  added: number;
}

/**
 * rebuildSteps is `HashRing.rebuild`'s work, yielding whenever `stepSize` units are spent, and
 * answering the new ring's state. `source` gives the source ring's state (read at the first step) and
 * `versionOf` its change count: a step that finds it changed throws.
 * @internal
 */
export function* rebuildSteps(
  source: () => Readonly<RingState>,
  versionOf: () => number,
  hash: HashFn,
  pointName: (member: string, index: number) => string,
  changes: Iterator<readonly [string, number]>,
  stepSize: number,
): Generator<void, RingState, void> {
  const dst: RingState = {
    slots: new Map(),
    names: [],
    counts: [],
    free: [],
    points: new Uint32Array(0),
    owners: new Uint32Array(0),
    ranks: new Uint32Array(0),
    length: 0,
  };
  const old = source();
  const version = versionOf();
  const unchanged = () => {
    if (versionOf() !== version) throw new Error('HashRing.rebuild: the ring changed while a rebuild of it ran');
  };
  let budget = stepSize;
  // 0. Read (and check) the changes.
  let list: [string, number][] = [];
  for (let more = true; more;) {
    const max = room(budget / 32);
    const read = readChanges(changes, list, max);
    more = read === max;
    budget -= 32 * read;
    if (budget <= 0) {
      yield;
      unchanged();
      budget = stepSize;
    }
  }
  // 1. Members: the new ring starts from the old one's slots, so the points it keeps keep their owners.
  // A member listed twice is found by its slot being claimed already: the list is then made unique
  // (the last count wins) and the pass starts again.
  let claim: Claim;
  for (;;) {
    dst.slots = new Map();
    for (let slot = 0; slot < old.names.length;) {
      const end = Math.min(old.names.length, slot + room(budget / 64));
      copySlots(old.names, slot, end, dst.slots);
      budget -= 64 * (end - slot);
      slot = end;
      if (budget <= 0) {
        yield;
        unchanged();
        budget = stepSize;
      }
    }
    dst.names = old.names.slice();
    dst.counts = old.counts.slice();
    dst.free = old.free.slice();
    claim = {
      keepOf: new Uint32Array(old.names.length).fill(MAX_POINTS_PER_MEMBER),
      claimed: new Uint8Array(old.names.length + list.length),
      grow: [],
      gone: [],
      added: 0,
    };
    let unique = true;
    for (let i = 0; i < list.length && unique;) {
      const end = Math.min(list.length, i + room(budget / 256));
      unique = claimMembers(dst, list, i, end, claim);
      budget -= 256 * (end - i);
      i = end;
      if (budget <= 0) {
        yield;
        unchanged();
        budget = stepSize;
      }
    }
    if (unique) break;
    list = [...new Map(list)];
  }
  const { keepOf, grow, added } = claim;
  for (const slot of claim.gone) {
    dst.slots.delete(dst.names[slot]!);
    dst.names[slot] = '';
    dst.free.push(slot);
  }
  // Big arrays are zero-filled in steps after they are allocated: a first touch of fresh memory
  // faults its pages in, which would land on whichever step first writes all over the array.
  const fresh = function* (length: number): Generator<void, Uint32Array<ArrayBuffer>, void> {
    const a = new Uint32Array(length);
    if (length < BIG_ARRAY) return a;
    for (let i = 0; i < length;) {
      const end = Math.min(length, i + room(budget / 3));
      a.fill(0, i, end);
      budget -= 3 * (end - i);
      i = end;
      if (budget <= 0) {
        yield;
        budget = stepSize;
      }
    }
    return a;
  };
  const n = old.length;
  const capacity = Math.max(64, n + added);
  const points = yield* fresh(capacity);
  const owners = yield* fresh(capacity);
  const ranks = yield* fresh(capacity);
  unchanged();
  const into: Points = { hashes: points, owners, ranks };
  // 2. Keep: the old ring's points whose rank stays below their member's new count, in ring order, at
  // the front of the new arrays.
  const src: Points = { hashes: old.points, owners: old.owners, ranks: old.ranks };
  let kept = 0;
  for (let i = 0; i < n;) {
    const end = Math.min(n, i + room(budget));
    kept = keepPoints(src, i, end, keepOf, into, kept);
    budget -= end - i;
    i = end;
    if (budget <= 0) {
      yield;
      unchanged();
      budget = stepSize;
    }
  }
  // 3. Hash the new points: with no point kept, straight into the new arrays; else beside them.
  const alone = kept === 0;
  const fresh3 = alone ? into : { hashes: yield* fresh(added), owners: yield* fresh(added), ranks: yield* fresh(added) };
  const names = dst.names;
  const hasher = hash === hash32 && pointName === defaultPointName ? new PointHasher() : undefined;
  let p = 0;
  for (let g = 0; g < grow.length; g += 3) {
    const slot = grow[g]!;
    const name = names[slot]!;
    for (let r = grow[g + 1]!, to = grow[g + 2]!; r < to;) {
      const end = Math.min(to, r + room(budget / 8));
      hashRange(fresh3, p, slot, name, r, end, hasher, hash, pointName);
      budget -= 8 * (end - r);
      p += end - r;
      r = end;
      if (budget <= 0) {
        yield;
        budget = stepSize;
      }
    }
  }
  // 4. Sort them by hash, stably, in place (owner and rank carried along).
  const { hashes, owners: ownerOf, ranks: rankOf } = fresh3;
  if (added < RADIX_FROM) {
    const packed = new Float64Array(added);
    for (let i = 0; i < added; i++) packed[i] = hashes[i]! * RADIX_FROM + i;
    packed.sort();
    const o = ownerOf.slice(0, added);
    const r = rankOf.slice(0, added);
    for (let i = 0; i < added; i++) {
      const at = packed[i]! % RADIX_FROM;
      hashes[i] = (packed[i]! - at) / RADIX_FROM;
      ownerOf[i] = o[at]!;
      rankOf[i] = r[at]!;
    }
    budget -= 4 * added;
  } else {
    // The sort's scratch arrays are written before they are read: the last rebuild's serve if still
    // alive (no fresh memory to fault in, no garbage for the collector), else fresh ones.
    let full = takeScratch(added);
    if (full === undefined) {
      full = [];
      for (let t = 0; t < 3; t++) full.push(yield* fresh(added));
    }
    const tmp = full.map((a) => a.subarray(0, added));
    const sort = new RadixSort(hashes.subarray(0, added), ownerOf.subarray(0, added), rankOf.subarray(0, added), tmp[0]!, tmp[1]!, tmp[2]!);
    for (let d = -1; d < 4; d++) {
      if (d === 0) sort.prefix();
      for (let i = 0; i < added;) {
        const end = Math.min(added, i + room(budget / 2));
        if (d < 0) sort.count(i, end);
        else sort.pass(d, i, end);
        budget -= 2 * (end - i);
        i = end;
        if (budget <= 0) {
          yield;
          budget = stepSize;
        }
      }
    }
    const kept = scratch?.deref();
    if (kept === undefined || kept[0]!.length <= full[0]!.length) scratch = new WeakRef(full);
  }
  // 5. Equal hashes among the new points go by member name (as `update` orders them), then rank.
  for (let i = 1; i < added;) {
    const end = Math.min(added, i + room(budget));
    orderTies(fresh3, names, i, end);
    budget -= end - i;
    i = end;
    if (budget <= 0) {
      yield;
      budget = stepSize;
    }
  }
  // 6. Merge from the back: the kept points [0, kept) and the new ones fill [0, kept + added).
  if (!alone) {
    const state: MergeState = { i: kept - 1, j: added - 1, w: kept + added - 1 };
    while (state.j >= 0) {
      budget -= mergeBack(into, fresh3, names, state, room(budget));
      if (state.j >= 0) {
        yield;
        budget = stepSize;
      }
    }
  }
  dst.points = points;
  dst.owners = owners;
  dst.ranks = ranks;
  dst.length = kept + added;
  return dst;
}

/**
 * claimMembers is a rebuild's membership work on the ring state being built, for list[from … to): each
 * member gets its count (a slot when new); `c` collects what moves. Answers false at a member listed twice.
 */
function claimMembers(r: RingState, list: readonly [string, number][], from: number, to: number, c: Claim): boolean {
  for (let i = from; i < to; i++) {
    const [m, count] = list[i]!;
    let slot = r.slots.get(m);
    if (slot !== undefined && c.claimed[slot] === 1) return false;
    const had = slot === undefined ? 0 : r.counts[slot]!;
    if (count === had) {
      if (slot !== undefined) c.claimed[slot] = 1;
      continue;
    }
    if (slot === undefined) {
      if (r.slots.size >= MAX_MEMBERS) throw new RangeError(`HashRing: at most ${MAX_MEMBERS} members`);
      slot = r.free.pop() ?? r.names.length;
      r.slots.set(m, slot);
      r.names[slot] = m;
    }
    c.claimed[slot] = 1;
    r.counts[slot] = count;
    if (count < had) {
      c.keepOf[slot] = count;
      if (count === 0) c.gone.push(slot);
    } else {
      c.grow.push(slot, had, count);
      c.added += count - had;
    }
  }
  return true;
}

/** readChanges moves up to `max` checked `[member, count]` pairs from `from` to `into`; answers how many (fewer: `from` is done). */
function readChanges(from: Iterator<readonly [string, number]>, into: [string, number][], max: number): number {
  for (let k = 0; k < max; k++) {
    const r = from.next();
    if (r.done === true) return k;
    const [m, c] = r.value;
    checkMember('HashRing.rebuild', m);
    into.push([m, integer('HashRing.rebuild', 'count', c, 0, MAX_POINTS_PER_MEMBER)]);
  }
  return max;
}

/** copySlots sets `into` (member → slot) for the slots [from, to) of `names` that hold a member. */
function copySlots(names: readonly string[], from: number, to: number, into: Map<string, number>): void {
  for (let slot = from; slot < to; slot++) {
    const m = names[slot]!;
    if (m !== '') into.set(m, slot);
  }
}

/**
 * The radix sort's scratch arrays, held weakly: a rebuild takes the last one's while the collector
 * has not (a process that rebuilds big rings keeps them; one that stopped gives them back). Taken
 * arrays are the taker's alone until it gives them back, so rebuilds running at once never share them.
 */
let scratch: WeakRef<Uint32Array<ArrayBuffer>[]> | undefined;

/** takeScratch answers the kept scratch arrays if they hold `length` elements, and forgets them. */
function takeScratch(length: number): Uint32Array<ArrayBuffer>[] | undefined {
  const kept = scratch?.deref();
  if (kept === undefined || kept[0]!.length < length) return undefined;
  scratch = undefined;
  return kept;
}

/** room is how many units of work fit in `budget` (at least one, so that every step progresses). */
function room(budget: number): number {
  return budget >= 1 ? Math.ceil(budget) : 1;
}
