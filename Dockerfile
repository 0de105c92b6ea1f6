# restable: build stage compiles TypeScript and better-sqlite3; the runtime stage holds only
# compiled JavaScript and production dependencies, runs as the non-root `node` user.

FROM node:22-bookworm-slim AS build
# A compiler for better-sqlite3 when no prebuilt binary can be fetched (offline builds).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# swagger-ui-dist pulls in @scarf/scarf, whose install script reports to a third party.
ENV SCARF_ANALYTICS=false
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev --no-audit --no-fund

FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATABASE_PATH=/app/data/app.db \
    SHUTDOWN_TIMEOUT_MS=8000 \
    npm_config_ignore_scripts=true \
    npm_config_update_notifier=false
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY migrations ./migrations
RUN mkdir -p /app/data && chown node:node /app/data
USER node
VOLUME /app/data
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=2", "--heap-growing-percent=20", "--no-concurrent-recompilation", "dist/main.js"]
