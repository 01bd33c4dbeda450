# snoded in a container. The admin RPC must listen on 0.0.0.0 inside the container (only port
# forwarding reaches it) and the host mapping must stay on loopback:
#   docker build -t snoded .
#   docker run -d --name snoded -v snode-data:/data \
#     -p 9230:9230/tcp -p 9232:9232/tcp -p 127.0.0.1:9231:9231/tcp \
#     snoded --service-node-public-ip=YOUR.PUBLIC.IP
#
# Calling the admin RPC from the host: on a bind other than loopback (0.0.0.0 here) it requires
# the cookie the daemon writes to /data/rpc.cookie (one line `__cookie__:<hex>`, mode 0600) as
# HTTP Basic auth; as root on the host:
#   curl -u "$(docker exec snoded cat /data/rpc.cookie)" -H 'Content-Type: application/json' \
#     -d '{"jsonrpc":"2.0","id":1,"method":"get_info"}' http://127.0.0.1:9231/json_rpc
# or give snode-cli the data dir (`--data-dir` on the volume's host path) so it reads the cookie.
# The specification's plain curl with no credential is an explicit choice: append --rpc-no-login
# to `docker run` (one warning line at start). Only with the mapping on 127.0.0.1 as above: the
# cookie is what keeps other containers on the bridge network from stopping the node.
#
# Ports: P2P (9230) and quorumnet (9232) are both TCP. Quorumnet is ZeroMQ over TCP with CurveZMQ;
# the specification's note that quorumnet is "UDP when mapped through container port forwarding"
# does not apply to snode: map 9232/tcp. A UDP-only mapping leaves the node unreachable to its
# quorum, which tests reachability with a CurveZMQ handshake and decommissions it `unreachable`.
# The public OMQ port (--omq-public, 9233) is TCP too, when enabled.
#
# The daemon runs as the non-root user `snode`, uid and gid 10001, and keeps everything in /data:
# - a named volume (`-v snode-data:/data`, above) works as is: Docker fills it from the image, owned
#   by snode;
# - a bind-mounted host directory must be writable by uid 10001: `sudo install -d -o 10001 -g 10001
#   /srv/snode` before `-v /srv/snode:/data`; or run as your own user with
#   `--user "$(id -u):$(id -g)"` on a directory you own. A directory it cannot write stops the
#   daemon at start with one line naming it (`--data-dir: /data is not writable by this user`).
# The key in /data/key is the service node's identity: back it up (docs: README, "Operating").
#
# BASE: the official slim Python image, pinned by digest (refresh with `docker buildx imagetools
# inspect python:3.11-slim-bookworm`). Any Debian-like image with python3 and its venv module
# works: `make container-test` builds on a Debian root made locally (.ci/rootfs). Dependencies
# come from requirements.lock, every file checked against its hash.
ARG BASE=python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b
FROM ${BASE}
# PIP_CERT: a CA bundle for pip when the package index is reached through a TLS-inspecting proxy
# (pass it with --build-arg and mount the file with --volume; make container-test does).
ARG PIP_CERT
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY src ./src
RUN python3 -m venv /opt/snode/venv \
    && /opt/snode/venv/bin/pip install --no-cache-dir --disable-pip-version-check --require-hashes \
        --no-deps -r requirements.lock \
    && /opt/snode/venv/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps . \
    && groupadd --system --gid 10001 snode \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /data snode
COPY contrib/healthcheck.py /opt/snode/healthcheck.py
ENV PATH=/opt/snode/venv/bin:$PATH
WORKDIR /data
USER 10001:10001
VOLUME /data
EXPOSE 9230 9231 9232
# Descriptors: snoded raises its soft RLIMIT_NOFILE to the hard limit (at most 65536) at start and
# logs the figure; a Dockerfile cannot set a limit, so where the runtime's hard limit is low give
# one at run time: `docker run --ulimit nofile=65536:65536 ...` (compose: `ulimits: nofile: 65536`).
# Alive: the admin port answers /healthz (contrib/healthcheck.py says why not /readyz).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "/opt/snode/healthcheck.py"]
ENTRYPOINT ["snoded", "--service-node", "--non-interactive", "--data-dir=/data", \
            "--rpc-admin=0.0.0.0:9231", "--log-level=2"]
