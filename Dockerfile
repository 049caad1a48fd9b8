# syntax=docker/dockerfile:1
# Lockscope's container image, in the Next.js standalone style: dependencies and the build in their own
# stages, and a final stage holding only `.next/standalone` (the server with the node_modules it needs, the
# static assets and the compiled launcher `start.mjs`). Nothing is downloaded or built when it starts.
#   docker build -t lockscope .
#   docker run -p 127.0.0.1:3000:3000 --stop-timeout 20 -e REDIS_URLS=redis://… -e LOCKSCOPE_OPERATOR_TOKEN=… -e LOCKSCOPE_SESSION_SECRET=… lockscope

FROM node:20-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

FROM node:20-bookworm-slim AS build
WORKDIR /app
ENV NEXT_TELEMETRY_DISABLED=1
COPY --from=deps /app/node_modules ./node_modules
COPY . .
RUN npm run build

FROM node:20-bookworm-slim AS runner
WORKDIR /app
ENV NODE_ENV=production \
    NEXT_TELEMETRY_DISABLED=1 \
    HOST=0.0.0.0 \
    PORT=3000 \
    LOCKSCOPE_DATA_DIR=/data
# An unprivileged user; it owns only its data folder (audit file, generated secrets).
RUN groupadd --system --gid 1001 lockscope \
 && useradd --system --uid 1001 --gid lockscope --home-dir /data --no-create-home lockscope \
 && mkdir -p /data && chown lockscope:lockscope /data
COPY --from=build --chown=root:root /app/.next/standalone ./
USER lockscope
VOLUME ["/data"]
EXPOSE 3000
# /api/health answers 200 whenever the process serves (node state is in its body), within about a second whatever
# LOCKSCOPE_NODE_TIMEOUT_MS (it waits at most 1 s for a node); node has fetch built in.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/api/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The launcher, not server.js: it adds the request-line guard, the client address and the graceful shutdown.
CMD ["node", "--v8-pool-size=2", "start.mjs"]
