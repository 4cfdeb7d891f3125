/**
 * What the Redis limiters need to know of a Redis Cluster (internal): which slot a key hashes to (the
 * Cluster spec's CRC16 of the key's hash tag), which master owns a slot in the client's slot map, and
 * that master's connection. A single Redis is one part: slot 0, node ''.
 */
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './types.js';

/** SLOTS is the number of hash slots of a Redis Cluster (the Cluster spec). */
export const SLOTS = 16_384;

/** CRC16-CCITT (XMODEM), the checksum the Cluster spec hashes keys with, one table entry per byte value. */
const table = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let c = i << 8;
  for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  table[i] = c;
}

/** isCluster tells whether `client` is an ioredis Cluster (it lists nodes and keeps a slot map). */
export function isCluster(client: RedisClient): client is Cluster {
  return 'nodes' in client && typeof client.nodes === 'function';
}

/**
 * keySlot answers the hash slot of a Redis key: CRC16 of the part between the first `{` and the next
 * `}` when that part is not empty (a hash tag), else of the whole key, modulo 16 384.
 */
export function keySlot(key: string): number {
  let start = 0;
  let end = key.length;
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    const c = key.charCodeAt(i);
    if (c >= 0x80) return slotOfBytes(Buffer.from(key.slice(start, end), 'utf8'));
    crc = ((crc << 8) & 0xffff) ^ table[((crc >> 8) ^ c) & 0xff]!;
  }
  return crc & (SLOTS - 1);
}

function slotOfBytes(bytes: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ table[((crc >> 8) ^ bytes[i]!) & 0xff]!;
  return crc & (SLOTS - 1);
}

/** ownerOf answers the key (`host:port`) of the master that owns `slot` in the client's slot map, or '' when unknown. */
export function ownerOf(cluster: Cluster, slot: number): string {
  return cluster.slots[slot]?.[0] ?? '';
}

/** masterNamed answers the client's connection to the master `host:port`, or undefined when it has none. */
export function masterNamed(cluster: Cluster, key: string): Redis | undefined {
  for (const node of cluster.nodes('master')) {
    if (`${node.options.host}:${node.options.port}` === key) return node;
  }
  return undefined;
}

/** nodesOf answers the connections to load scripts on: the client itself, or every master of a Cluster. */
export function nodesOf(redis: RedisClient): Redis[] {
  return isCluster(redis) ? redis.nodes('master') : [redis];
}
