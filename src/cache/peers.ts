/**
 * The seams between a Group and the network (groupcache `peers.go`): a Group asks its `PeerPicker`
 * which peer owns a key and fetches through that peer's `PeerGetter`; a pool serves other nodes'
 * requests by calling the Group's `GroupServer` side. `noPeers` is the null picker: every key is ours.
 */
import type { GetResponse, PeerMode } from './codec.js';

export type { GetResponse, PeerMode } from './codec.js';

/** PeerGetter fetches from, and removes at, one other node. */
export interface PeerGetter {
  /** The peer's base URL (or any name that identifies it). */
  readonly url: string;
  /**
   * get asks the peer for `key` of `group`; a miss at the origin is an answer (`notFound`), not an
   * error. `mode` says how far the peer may go (PeerMode); it defaults to `normal`.
   */
  get(group: string, key: string, signal?: AbortSignal, mode?: PeerMode): Promise<GetResponse>;
  /** healthy tells whether the peer answered lately; a picker asks healthy owners first. Absent: always healthy. */
  healthy?(): boolean;
  /** remove deletes `key` of `group` from the peer's caches; answers whether the peer held it. */
  remove(group: string, key: string, signal?: AbortSignal): Promise<boolean>;
}

/** GroupServer is what a pool's handler calls on a Group to serve a peer's request locally. */
export interface GroupServer {
  readonly name: string;
  /** How long the group's getter may run, in ms: a peer asking this group waits a little longer. Absent: 10 000. */
  readonly timeoutMs?: number;
  /**
   * serveGet answers a peer's request for `key`: `local` from this node alone (its caches or its
   * getter), `peek` from its caches only, `normal` like `local` except that an owner of a replicated
   * key may first ask a co-owner. Defaults to `normal`.
   */
  serveGet(key: string, signal?: AbortSignal, mode?: PeerMode): Promise<GetResponse>;
  /** serveRemove deletes `key` from this node's caches (and keeps a load in flight from storing it). */
  serveRemove(key: string): boolean;
}

/**
 * OwnerPick is where a replicated key lives (`PeerPicker.pickOwners`): whether this node is one of its
 * owners and, if so, the first healthy one; and the other owners, healthy ones first, in ring order.
 */
export interface OwnerPick {
  /** This node is one of the key's owners. */
  readonly self: boolean;
  /** This node is the key's first healthy owner: the one that runs the getter. */
  readonly primary: boolean;
  /** The other owners, healthy ones first, each group in ring order. */
  readonly peers: readonly PeerGetter[];
}

/** PeerPicker names the owner of a key and lists the other nodes. */
export interface PeerPicker {
  /** pickPeer returns the peer that owns `key`, or undefined when this node owns it (or knows no peers). */
  pickPeer(key: string): PeerGetter | undefined;
  /**
   * pickOwners answers the owners of `key` when keys have several (replicated ownership), or undefined
   * when each key has one owner (then `pickPeer` decides). Absent: one owner per key.
   */
  pickOwners?(key: string): OwnerPick | undefined;
  /** peers lists every other node (for `remove`, which must reach them all). */
  peers(): readonly PeerGetter[];
  /** register lets the picker's server find `group` by name; the returned function unregisters it. */
  register?(group: GroupServer): () => void;
}

/** noPeers is the PeerPicker of a single node: every key is local. */
export const noPeers: PeerPicker = Object.freeze({
  pickPeer: () => undefined,
  peers: () => [],
});
