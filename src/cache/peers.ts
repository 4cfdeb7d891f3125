/**
 * The seams between a Group and the network (groupcache `peers.go`): a Group asks its `PeerPicker`
 * which peer owns a key and fetches through that peer's `PeerGetter`; a pool serves other nodes'
 * requests by calling the Group's `GroupServer` side. `noPeers` is the null picker: every key is ours.
 */
import type { GetResponse } from './codec.js';

export type { GetResponse } from './codec.js';

/** PeerGetter fetches from, and removes at, one other node. */
export interface PeerGetter {
  /** The peer's base URL (or any name that identifies it). */
  readonly url: string;
  /** get asks the peer for `key` of `group`; a miss at the origin is an answer (`notFound`), not an error. */
  get(group: string, key: string, signal?: AbortSignal): Promise<GetResponse>;
  /** remove deletes `key` of `group` from the peer's caches; answers whether the peer held it. */
  remove(group: string, key: string, signal?: AbortSignal): Promise<boolean>;
}

/** GroupServer is what a pool's handler calls on a Group to serve a peer's request locally. */
export interface GroupServer {
  readonly name: string;
  /** serveGet answers `key` from this node alone: its caches or its getter, never another peer. */
  serveGet(key: string, signal?: AbortSignal): Promise<GetResponse>;
  /** serveRemove deletes `key` from this node's caches (and keeps a load in flight from storing it). */
  serveRemove(key: string): boolean;
}

/** PeerPicker names the owner of a key and lists the other nodes. */
export interface PeerPicker {
  /** pickPeer returns the peer that owns `key`, or undefined when this node owns it (or knows no peers). */
  pickPeer(key: string): PeerGetter | undefined;
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
