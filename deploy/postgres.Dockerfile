# PostgreSQL 15 from Debian bookworm for compose.postgres.yaml, with the official postgres image's interface
# (POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB on first start, PGDATA, `postgres -c …`), built without any registry.
# On the restable image's base, so the three images share its layers and a machine with no registry builds it from
# the node:22-bookworm-slim stand-in of ../shared/tools/docker-offline; only Debian's archive is needed.
ARG BASE=node:22-bookworm-slim
FROM ${BASE}
ENV PG_MAJOR=15 \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
# No Debian "main" cluster: the entrypoint creates the one cluster in PGDATA (a volume) on first start.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main-cluster.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && if [ -d /etc/postgresql/15/main ]; then pg_dropcluster 15 main; fi \
 && mkdir -p "$PGDATA" /var/run/postgresql \
 && chown postgres:postgres "$PGDATA" /var/run/postgresql \
 && chmod 700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
# A new named volume takes this directory's owner (postgres), so the server never needs root.
USER postgres
VOLUME /var/lib/postgresql/data
EXPOSE 5432
# SIGINT is PostgreSQL's "fast" shutdown: sessions are ended, and the data is checkpointed before exit.
STOPSIGNAL SIGINT
ENTRYPOINT ["postgres-entrypoint.sh"]
CMD ["postgres"]
