// @ts-check
/** @type {import("next").NextConfig} */
const nextConfig = {
  reactStrictMode: true,
  poweredByHeader: false,
  // `.next/standalone`: a server folder with only the node_modules it needs, for the container image
  // (`npm run build` adds the static assets and the compiled launcher to it).
  output: "standalone",
  // Trace from this folder, never from a lockfile further up.
  outputFileTracingRoot: __dirname,
  // `npm test` type-checks the whole tree with `tsc` as its own step; the build does not repeat it.
  typescript: { ignoreBuildErrors: true },
  // ioredis and pino are Node-only and must not be bundled into route chunks.
  serverExternalPackages: ["ioredis", "pino", "prom-client"],
  // The console shows no optimized image (its one icon is an SVG served as a file): `/_next/image` answers 404.
  // Left on, the optimizer fetched its source internally without a Host header, which the host rules refuse,
  // and passed their 421 on to a user who had sent the right host name.
  images: { unoptimized: true },
  // No rewrites: they buffer Server-Sent Events (vercel/next.js#66263).
};
module.exports = nextConfig;
