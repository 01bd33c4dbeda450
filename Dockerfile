# snoded in a container. The admin RPC must listen on 0.0.0.0 inside the container (only port
# forwarding reaches it) and the host mapping must stay on loopback:
#   docker build -t snoded .
#   docker run -d --name snoded -v snode-data:/data \
#     -p 9230:9230/tcp -p 9232:9232/tcp -p 127.0.0.1:9231:9231/tcp \
#     snoded --service-node-public-ip=YOUR.PUBLIC.IP
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
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . \
    && groupadd --system --gid 10001 snode \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /data snode
USER snode
VOLUME /data
EXPOSE 9230 9231 9232
# Ready: synced, registered, active, with an uptime proof the network accepted (GET /readyz names
# every unmet condition). The first start-up syncs and waits for registration: a long grace.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10m --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9231/readyz', timeout=4)"]
ENTRYPOINT ["snoded", "--service-node", "--non-interactive", "--data-dir=/data", \
            "--rpc-admin=0.0.0.0:9231", "--log-level=2"]
