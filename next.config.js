// @ts-check
/** @type {import("next").NextConfig} */
const nextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  // `npm test` type-checks the whole tree with `tsc` as its own step; the build does not repeat it.
  typescript: { ignoreBuildErrors: true },
  // ioredis and pino are Node-only and must not be bundled into route chunks.
  serverExternalPackages: ["ioredis", "pino", "prom-client"],
  // No rewrites: they buffer Server-Sent Events (vercel/next.js#66263).
};
module.exports = nextConfig;
