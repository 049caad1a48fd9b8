/**
 * Renews the TTL of every resource, only if all still hold our value on this node (a lock that expired
 * and was taken by someone else must not be extended for them).
 * KEYS: the resources. ARGV[1]: the lock's value. ARGV[2]: the new TTL in ms. Reply: 1 or 0.
 */
export const EXTEND_LUA = `
for _, key in ipairs(KEYS) do
  if redis.pcall("GET", key) ~= ARGV[1] then return 0 end
end
for _, key in ipairs(KEYS) do
  redis.call("PEXPIRE", key, ARGV[2])
end
return 1
`;
