/**
 * Redis Cluster's key placement: a key lives in hash slot CRC16(key) mod 16384, where only the hash tag is
 * hashed when the key has one (the part between the first `{` and the first `}` after it, if not empty).
 * Pure: the engine uses it to keep every key of a resource in the resource's slot, and to refuse a
 * multi-resource lock whose resources a cluster would put in different slots.
 */

export const SLOT_COUNT = 16384;

const CRC16_TABLE = (() => {
  // CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis Cluster specifies.
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

/** The hash tag of `key` (what the cluster hashes), or null when the whole key is hashed. */
export function hashTagOf(key: string): string | null {
  const open = key.indexOf("{");
  if (open === -1) return null;
  const close = key.indexOf("}", open + 1);
  if (close === -1 || close === open + 1) return null;
  return key.slice(open + 1, close);
}

/** The cluster hash slot of `key` (0 to 16383), computed over its UTF-8 bytes. */
export function keySlot(key: string): number {
  const hashed = Buffer.from(hashTagOf(key) ?? key, "utf8");
  let crc = 0;
  for (const byte of hashed) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc % SLOT_COUNT;
}

/**
 * The key `prefix` + `resource` placed in the resource's slot: unchanged when the resource has a hash tag
 * of its own (the prefix holds no brace, so the tag stays the first), else with the resource as the tag.
 * Null for a resource no tag can follow: one with a `}` but no hash tag (`a}b`).
 */
export function keyInSlotOf(prefix: string, resource: string): string | null {
  if (hashTagOf(resource) !== null) return prefix + resource;
  if (resource.includes("}")) return null;
  return `${prefix}{${resource}}`;
}
