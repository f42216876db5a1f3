# The service with its workers as one container: `docker compose --profile app up -d`
# (docker-compose.yml). PostgreSQL and Redis come from outside (DATABASE_URL, REDIS_URL).
FROM node:20-bookworm-slim
WORKDIR /app
# Dependencies first, so a code change does not reinstall them. postinstall generates the
# Prisma client from the schema, hence the schema before the install.
COPY package.json package-lock.json prisma.config.ts ./
COPY scripts scripts
COPY prisma prisma
# `npm install`, not `npm ci`: see .ci/run (the lock lacks some platforms' optional builds).
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
COPY src src
COPY views views
# svc's Odoo addons: setup_odoo ships this folder to each Odoo host.
COPY odoo-addons odoo-addons
# The master key file lives in /app/data: mount a volume there, or it dies with the container
# and every stored secret with it.
RUN mkdir -p data && chown node:node data
USER node
ENV NODE_ENV=production
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "--import", "tsx", "src/main.ts"]
