/**
 * P2C is the power of two choices on peak-free EWMA latency × (in-flight + 1), the load balancer of
 * Finagle ("P2C + EWMA"), go-zero (`p2c`) and Kratos: pick two distinct instances at random, send the
 * call to the cheaper. Latency is a time-based EWMA that forgets with a 10 s decay (β = e^(−Δt/τ)).
 *
 * - A failed call counts as at least `failurePenalty` × the instance's current EWMA, so an instance that
 *   fails fast does not look fast.
 * - An instance the other choice beat for longer than `forcePickMs` is picked anyway (go-zero), so a
 *   once-slow instance is measured again instead of being starved forever.
 * - Slow start (Envoy): an instance that joins after the first list starts from the mean EWMA of the
 *   others (not 0, which would flood it), and while it warms up it keeps a pick it won only with a
 *   probability (its weight) that grows linearly from `slowStartMinWeight` to 1 over `slowStartMs`,
 *   so its traffic ramps up from a tenth of its share instead of jumping (or starving).
 *
 * - Weights (`metadata.weight`, or a Balancer's overrides): while the instances' weights differ, each
 *   choice is drawn by weight, independently (with replacement: both may be the same instance, which
 *   then takes the pick), from an alias table (Walker / Vose) rebuilt once after each list change. Two
 *   instances whose latency EWMAs are within `WEIGHTED_ALIKE` of each other tie, and the first draw
 *   wins: each alike instance gets exactly its weight's share, p² + p(1 − p) = p, at any concurrency.
 *   Of a pair that is not alike, the lower latency × (in-flight calls per unit of share + 1) wins
 *   (share = weight × n / total), so a clearly slower instance loses share as in plain P2C. Why not
 *   plain P2C on weighted draws: two distinct draws make a 95/5 pair of instances the same pair every
 *   pick, and the EWMAs of alike instances differ by noise that lasts for the decay time (10 s), which
 *   decides every mixed pair meanwhile (measured: a 5 % canary took 10 %). Why in-flight counts do not
 *   break the tie: compared per share, an idle small instance wins every mixed pair at low concurrency
 *   (a 5 % canary took 5.9 % at 8 calls in flight, about 10 % at 2); with one more call counted, the
 *   big one does (the canary starves). What is given up: among alike instances, while weighted, load is
 *   seen through latency only.
 *
 * `pick` reads the clock at most once every 16 picks (and on every `report`) and draws both choices
 * from one random number (two while weighted), so a pick costs one random number and a few comparisons.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { clockOption, finite, fn, options as checkOptions, type OptionKeys } from '../core/validate.js';
import type { ServiceInstance } from '../registry/types.js';
import type { CallOutcome, ExcludeSet, Picker } from './types.js';
import { allowedCount, instanceWeight, InstanceTable, prepareList, sliceLists, noInstance, nthAllowed, type Entry } from './instance-table.js';
import { Xorshift32 } from './xorshift.js';

/** The keys of P2COptions, all of them: any other is refused (see `options`). */
const P2C_KEYS = {
  decayMs: true,
  initialLatencyMs: true,
  failurePenalty: true,
  forcePickMs: true,
  slowStartMs: true,
  slowStartMinWeight: true,
  clock: true,
  sliceLists: true,
  random: true,
} as const satisfies OptionKeys<P2COptions>;

/** P2COptions configures a P2C picker. */
export interface P2COptions {
  /** Time constant of the latency EWMA, in ms (Finagle, go-zero: 10 s). Defaults to 10 000. */
  decayMs?: number;
  /** Latency assumed for instances before any report, in ms. Defaults to 10. */
  initialLatencyMs?: number;
  /** A failed call counts as at least this multiple of the instance's EWMA. Defaults to 4. */
  failurePenalty?: number;
  /** Pick an instance anyway when it has not been picked for this long, in ms (go-zero). Defaults to 1 000. */
  forcePickMs?: number;
  /** Warm-up window for instances that join later, in ms; 0 turns slow start off. Defaults to 10 000. */
  slowStartMs?: number;
  /** The weight a joining instance starts from, in (0, 1]. Defaults to 0.1. */
  slowStartMinWeight?: number;
  /** Time source. Defaults to `systemClock`. */
  clock?: Clock;
  /** Take a list differing from the last in thousands of instances in in slices on `clock`'s timer turns: until then picks answer from the previous list (an instance may no longer be listed). The Balancer turns it on. Defaults to false. */
  sliceLists?: boolean;
  /** Uniform random numbers in [0, 1). Defaults to a xorshift32 generator inside the picker, seeded from `Math.random` (a call to `Math.random` costs more than the rest of a pick). */
  random?: () => number;
}

/** Defaults for P2COptions. */
export const p2cDefaults = Object.freeze({
  decayMs: 10_000,
  initialLatencyMs: 10,
  failurePenalty: 4,
  forcePickMs: 1_000,
  slowStartMs: 10_000,
  slowStartMinWeight: 0.1,
});

/** The smallest EWMA used in a cost, so in-flight counts still separate instances that report 0 ms. */
const MIN_LATENCY_MS = 0.001;
/** The clock is read once per this many picks. */
const CLOCK_EVERY = 16;
/**
 * While weighted, latency EWMAs within this factor of each other count as equal (their difference is
 * noise that persists for the decay time: on loopback, alike instances' EWMAs differ by tens of percent).
 */
const WEIGHTED_ALIKE = 1.5;
/** Draws per choice of a pick with `exclude` before it falls back to one scan of the list. */
const REDRAWS = 8;

interface P2CEntry extends Entry {
  ewma: number;
  lastReport: number;
  inFlight: number;
  lastPicked: number;
  /** When the instance joined (−∞ for instances of the first list). */
  joined: number;
  /** Its weight (`weightOf`), read when the instance object changes. */
  weight: number;
  /** Its weight × n / total weight (mean 1), set with the alias table while weighted. */
  share: number;
}

/** P2C is a Picker choosing the cheaper of two random instances by EWMA latency × (in-flight + 1). */
export class P2C implements Picker {
  readonly decayMs: number;
  readonly forcePickMs: number;
  readonly slowStartMs: number;
  private readonly initialLatencyMs: number;
  private readonly failurePenalty: number;
  private readonly minWeight: number;
  private readonly clock: Clock;
  private readonly random: (() => number) | undefined;
  /** The source of chance when no `random` was given. */
  private readonly rng = new Xorshift32();
  private readonly table: InstanceTable<P2CEntry>;
  private seeded = false;
  /** Until when some instance is still warming up; after it, slow start costs nothing. */
  private warmUntil = -Infinity;
  /** The EWMA a joining instance starts from: the mean of the instances already known. */
  private prior = 0;
  private now: number;
  private tick = 0;
  private last: P2CEntry | undefined;
  /** Whether the entries' weights differ (then choices are drawn by weight), as of the last sync. */
  private weighted = false;
  /** The alias table is stale: built again at the next weighted pick. */
  private aliasStale = true;
  /** Walker's alias table over the entries: a draw lands on slot i, and keeps it when its fraction is below prob[i], else takes alias[i]. */
  private prob = new Float64Array(0);
  private alias = new Int32Array(0);

  constructor(options?: P2COptions) {
    const o = checkOptions('P2C', options, P2C_KEYS);
    this.decayMs = finite('P2C', 'decayMs', o.decayMs ?? p2cDefaults.decayMs, 1);
    this.initialLatencyMs = finite('P2C', 'initialLatencyMs', o.initialLatencyMs ?? p2cDefaults.initialLatencyMs, 0);
    this.failurePenalty = finite('P2C', 'failurePenalty', o.failurePenalty ?? p2cDefaults.failurePenalty, 1, 1000);
    this.forcePickMs = finite('P2C', 'forcePickMs', o.forcePickMs ?? p2cDefaults.forcePickMs, 0);
    this.slowStartMs = finite('P2C', 'slowStartMs', o.slowStartMs ?? p2cDefaults.slowStartMs, 0);
    this.minWeight = finite('P2C', 'slowStartMinWeight', o.slowStartMinWeight ?? p2cDefaults.slowStartMinWeight, 0.001, 1);
    this.clock = clockOption('P2C', o.clock, systemClock);
    this.random = o.random === undefined ? undefined : fn<() => number>('P2C', 'random', o.random);
    this.now = this.clock.now();
    this.table = new InstanceTable<P2CEntry>(
      (instance, prev) => {
        if (prev !== undefined) {
          prev.instance = instance;
          prev.weight = instanceWeight(instance);
          return prev;
        }
        return this.create(instance);
      },
      { clock: sliceLists('P2C', o.sliceLists) ? this.clock : undefined },
    );
  }

  /**
   * pick returns the cheaper of two distinct random instances; throws NoInstanceError when empty.
   * With `exclude`, both choices are drawn from the instances it lacks (all of them when it has every
   * one), on the same per-instance state: the list is not filtered, so nothing is rebuilt, and while
   * most of the list is allowed a pick costs a few draws, not a scan (see `pickAllowed`).
   */
  pick(instances: readonly ServiceInstance[], _key?: string, exclude?: ExcludeSet): ServiceInstance {
    const t = this.table;
    const entries = instances === t.source ? t.entries : this.sync(instances);
    const n = entries.length;
    if (n <= 1) {
      if (n === 0) throw noInstance();
      return (this.last = entries[0]!).instance;
    }
    if (++this.tick >= CLOCK_EVERY) {
      this.tick = 0;
      this.now = this.clock.now();
    }
    if (this.weighted) return this.pickWeighted(entries, exclude);
    if (exclude !== undefined) return this.pickAllowed(entries, exclude);
    // Both choices from one random number: its integer part over n picks a, the fraction b.
    const u = this.uniform() * n;
    let a = Math.floor(u);
    let b = Math.floor((u - a) * (n - 1));
    if (!(a >= 0 && a < n)) a = 0;
    if (!(b >= 0 && b < n - 1)) b = 0;
    if (b >= a) b++;
    return this.choose(entries[a]!, entries[b]!);
  }

  /**
   * pickAllowed is `pick` over the entries `exclude` lacks, with the same distribution (two distinct
   * choices, uniform among the allowed ones) at a bounded cost: each choice is drawn at random and drawn
   * again while it lands on an excluded (or, for the second, the first) entry, at most `REDRAWS` times.
   * With a fraction f of the list excluded a choice needs 1 / (1 − f) draws on average, and all draws fail
   * with probability f^REDRAWS (under 0.4 % while half the list is in rotation): only then, when most of
   * the list is out, does one indexed scan count and index the allowed entries.
   */
  private pickAllowed(entries: P2CEntry[], exclude: ExcludeSet): ServiceInstance {
    const n = entries.length;
    let a: P2CEntry | undefined;
    for (let t = 0; t < REDRAWS; t++) {
      const e = entries[this.index(n)]!;
      if (!exclude.has(e.instance.id)) {
        a = e;
        break;
      }
    }
    if (a !== undefined) {
      for (let t = 0; t < REDRAWS; t++) {
        const e = entries[this.index(n)]!;
        if (e !== a && !exclude.has(e.instance.id)) return this.choose(a, e);
      }
    }
    return this.scanAllowed(entries, exclude);
  }

  /**
   * pickWeighted is `pick` while weights differ: two independent draws by weight (see the module
   * comment); with `exclude`, each draw is redrawn while it lands on an excluded entry, at most
   * `REDRAWS` times, before one scan picks among the allowed ones as `scanAllowed` does (by count).
   */
  private pickWeighted(entries: P2CEntry[], exclude: ExcludeSet | undefined): ServiceInstance {
    if (this.aliasStale) this.buildAlias(entries);
    const n = entries.length;
    let a = entries[this.draw(n)]!;
    let b = entries[this.draw(n)]!;
    if (exclude !== undefined) {
      for (let t = 1; exclude.has(a.instance.id); t++) {
        if (t >= REDRAWS) return this.scanAllowed(entries, exclude);
        a = entries[this.draw(n)]!;
      }
      for (let t = 1; exclude.has(b.instance.id); t++) {
        if (t >= REDRAWS) return this.scanAllowed(entries, exclude);
        b = entries[this.draw(n)]!;
      }
    }
    if (a !== b) return this.chooseWeighted(a, b);
    a.lastPicked = this.now;
    this.last = a;
    return a.instance;
  }

  /**
   * chooseWeighted is `choose` for a weighted pair: `a`, the first draw, while their latencies are
   * alike, else the lower latency × (in-flight per share + 1); force-pick and slow start as in `choose`.
   */
  private chooseWeighted(a: P2CEntry, b: P2CEntry): ServiceInstance {
    const now = this.now;
    const la = a.ewma > MIN_LATENCY_MS ? a.ewma : MIN_LATENCY_MS;
    const lb = b.ewma > MIN_LATENCY_MS ? b.ewma : MIN_LATENCY_MS;
    const bWins = la <= lb * WEIGHTED_ALIKE && lb <= la * WEIGHTED_ALIKE ? false : lb * (b.inFlight / b.share + 1) < la * (a.inFlight / a.share + 1);
    let win = bWins ? b : a;
    const lose = bWins ? a : b;
    if (now - lose.lastPicked > this.forcePickMs) win = lose;
    else if (now < this.warmUntil && now - win.joined < this.slowStartMs) {
      const weight = Math.max(this.minWeight, (now - win.joined) / this.slowStartMs);
      if (this.uniform() >= weight) win = lose;
    }
    win.lastPicked = now;
    this.last = win;
    return win.instance;
  }

  /** draw answers an index in [0, n) drawn by weight from the alias table. */
  private draw(n: number): number {
    const u = this.uniform() * n;
    let i = Math.floor(u);
    if (!(i >= 0 && i < n)) i = 0;
    return u - i < this.prob[i]! ? i : this.alias[i]!;
  }

  /** buildAlias builds Walker's alias table over the entries' weights (Vose's method, O(n)). */
  private buildAlias(entries: readonly P2CEntry[]): void {
    const n = entries.length;
    if (this.prob.length < n) {
      this.prob = new Float64Array(n);
      this.alias = new Int32Array(n);
    }
    const { prob, alias } = this;
    let total = 0;
    for (let i = 0; i < n; i++) total += entries[i]!.weight;
    // Scaled weights (mean 1); the small ones take their rest from a large one.
    const small = new Int32Array(n);
    const large = new Int32Array(n);
    let ns = 0;
    let nl = 0;
    for (let i = 0; i < n; i++) {
      const p = (prob[i] = entries[i]!.share = (entries[i]!.weight * n) / total);
      alias[i] = i;
      if (p < 1) small[ns++] = i;
      else large[nl++] = i;
    }
    while (ns > 0 && nl > 0) {
      const s = small[--ns]!;
      const l = large[nl - 1]!;
      alias[s] = l;
      const rest = (prob[l] = prob[l]! + prob[s]! - 1);
      if (rest < 1) {
        nl--;
        small[ns++] = l;
      }
    }
    while (nl > 0) prob[large[--nl]!] = 1; // what rounding left: keep the slot
    while (ns > 0) prob[small[--ns]!] = 1;
    this.aliasStale = false;
  }

  /** scanAllowed is `pickAllowed` by one indexed scan: the fallback when most entries are excluded. */
  private scanAllowed(entries: P2CEntry[], exclude: ExcludeSet): ServiceInstance {
    const n = entries.length;
    const m = allowedCount(entries, exclude);
    if (m === 0 || m === n) {
      // Every instance excluded (or none, after all): pick among all of them.
      const a = this.index(n);
      let b = this.index(n - 1);
      if (b >= a) b++;
      return this.choose(entries[a]!, entries[b]!);
    }
    if (m === 1) {
      const e = nthAllowed(entries, exclude, 0);
      e.lastPicked = this.now;
      return (this.last = e).instance;
    }
    const u = this.uniform() * m;
    let a = Math.floor(u);
    let b = Math.floor((u - a) * (m - 1));
    if (!(a >= 0 && a < m)) a = 0;
    if (!(b >= 0 && b < m - 1)) b = 0;
    if (b >= a) b++;
    let ea: P2CEntry | undefined;
    let eb: P2CEntry | undefined;
    for (let i = 0, k = 0; i < n; i++) {
      const e = entries[i]!;
      if (exclude.has(e.instance.id)) continue;
      if (k === a) ea = e;
      if (k === b) eb = e;
      k++;
    }
    return this.choose(ea!, eb!);
  }

  /** index returns a uniform index in [0, n). */
  private index(n: number): number {
    const i = Math.floor(this.uniform() * n);
    return i >= 0 && i < n ? i : 0;
  }

  /** choose returns the cheaper of two entries, or the other when force-pick or slow start says so. */
  private choose(a: P2CEntry, b: P2CEntry): ServiceInstance {
    const now = this.now;
    let win = a;
    let lose = b;
    if (this.cost(lose) < this.cost(win)) {
      win = b;
      lose = a;
    }
    if (now - lose.lastPicked > this.forcePickMs) win = lose;
    else if (now < this.warmUntil && now - win.joined < this.slowStartMs) {
      const weight = Math.max(this.minWeight, (now - win.joined) / this.slowStartMs);
      if (this.uniform() >= weight) win = lose;
    }
    win.lastPicked = now;
    this.last = win;
    return win.instance;
  }

  /** uniform returns a uniform random number in [0, 1): the injected source, or xorshift32. */
  private uniform(): number {
    const r = this.random;
    return r !== undefined ? r() : this.rng.next();
  }

  /** start counts a call in flight to `instance`. */
  start(instance: ServiceInstance): void {
    const last = this.last;
    const e = last !== undefined && last.instance === instance ? last : this.table.get(instance.id);
    if (e !== undefined) e.inFlight++;
  }

  /**
   * report ends a call started with `start` and feeds its latency into the EWMA. Without an outcome
   * (the call was never made) it only ends the in-flight count; a success without a usable latency
   * (NaN, negative, infinite) adds no sample either.
   */
  report(instance: ServiceInstance, outcome?: CallOutcome): void {
    const last = this.last;
    const e = last !== undefined && last.instance === instance ? last : this.table.get(instance.id);
    if (e === undefined) return;
    if (e.inFlight > 0) e.inFlight--;
    if (outcome === undefined) return;
    let sample = outcome.latencyMs;
    const usable = sample >= 0 && sample < Infinity;
    if (!outcome.ok) sample = Math.max(usable ? sample : 0, this.failurePenalty * Math.max(e.ewma, MIN_LATENCY_MS));
    else if (!usable) return;
    const at = outcome.at;
    const now = (this.now = typeof at === 'number' && at === at ? at : this.clock.now()); // a given reading saves one (CallOutcome.at)
    const dt = now - e.lastReport;
    const w = dt > 0 ? Math.exp(-dt / this.decayMs) : 1 - 1 / 16; // same-instant reports still move the average
    e.ewma = e.ewma * w + sample * (1 - w);
    if (!Number.isFinite(e.ewma)) e.ewma = this.initialLatencyMs;
    e.lastReport = now;
  }

  /** ewmaOf returns the current latency EWMA of `id` (for tests and status pages), or undefined. */
  ewmaOf(id: string): number | undefined {
    return this.table.get(id)?.ewma;
  }

  /** inFlightOf returns the calls in flight to `id`, or undefined. */
  inFlightOf(id: string): number | undefined {
    return this.table.get(id)?.inFlight;
  }

  /** prepare takes `instances` in ahead of the first pick, a first list too in slices with `sliceLists` (see `Picker.prepare`). */
  prepare(instances: readonly ServiceInstance[], done: () => void): void {
    prepareList(this.table, instances, (l, first) => this.sync(l, first), done);
  }

  /** stats answers the number of instances, the calls in flight to them and their mean latency EWMA (ms). */
  stats(): { instances: number; inFlight: number; meanEwmaMs: number } {
    let inFlight = 0;
    let sum = 0;
    const entries = this.table.entries;
    for (const e of entries) {
      inFlight += e.inFlight;
      sum += e.ewma;
    }
    return { instances: entries.length, inFlight, meanEwmaMs: entries.length > 0 ? sum / entries.length : 0 };
  }

  private cost(e: P2CEntry): number {
    return (e.ewma > MIN_LATENCY_MS ? e.ewma : MIN_LATENCY_MS) * (e.inFlight + 1);
  }

  private sync(instances: readonly ServiceInstance[], sliceFirst = false): P2CEntry[] {
    this.last = undefined; // it may belong to an instance that leaves
    this.now = this.clock.now();
    this.tick = 0;
    const old = this.table.entries;
    let sum = 0;
    let known = 0;
    for (const e of old) {
      sum += e.ewma;
      known++;
    }
    this.prior = known > 0 ? sum / known : this.initialLatencyMs;
    const entries = this.table.sync(instances, sliceFirst);
    if (entries.length > 0) this.seeded = true;
    let warmUntil = -Infinity;
    let weighted = false;
    const w0 = entries.length > 0 ? entries[0]!.weight : 1;
    for (const e of entries) {
      if (e.joined + this.slowStartMs > warmUntil) warmUntil = e.joined + this.slowStartMs;
      if (e.weight !== w0) weighted = true;
    }
    this.warmUntil = warmUntil;
    this.weighted = weighted;
    this.aliasStale = true;
    return entries;
  }

  private create(instance: ServiceInstance): P2CEntry {
    const now = this.now;
    return {
      instance,
      seen: 0,
      index: 0,
      ewma: this.seeded ? this.prior : this.initialLatencyMs,
      lastReport: now,
      inFlight: 0,
      lastPicked: now,
      joined: this.seeded && this.slowStartMs > 0 ? now : -Infinity,
      weight: instanceWeight(instance),
      share: 1,
    };
  }
}
