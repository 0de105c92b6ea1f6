# haproxy 2.6 from Debian bookworm for compose.postgres.yaml, with the official haproxy image's interface
# (configuration at /usr/local/etc/haproxy/haproxy.cfg, SIGUSR1 stops it gracefully), built without any registry
# on the restable image's base (locally the node:22-bookworm-slim stand-in of ../shared/tools/docker-offline).
ARG BASE=node:22-bookworm-slim
FROM ${BASE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy
USER haproxy
EXPOSE 8080
# SIGUSR1: stop accepting, finish the requests in flight, then exit.
STOPSIGNAL SIGUSR1
# -W master-worker, -db in the foreground with logs on stderr.
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
