# snoded in a container. The admin RPC must listen on 0.0.0.0 inside the container (only port
# forwarding reaches it) and the host mapping must stay on loopback:
#   docker build -t snoded .
#   docker run -d --name snoded -v snode-data:/data \
#     -p 9230:9230 -p 9232:9232 -p 127.0.0.1:9231:9231 \
#     snoded --service-node-public-ip=YOUR.PUBLIC.IP
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --system --create-home --home-dir /data snode
USER snode
VOLUME /data
EXPOSE 9230 9231 9232
# Ready: synced, registered, active, with an uptime proof the network accepted (GET /readyz names
# every unmet condition). The first start-up syncs and waits for registration: a long grace.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10m --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9231/readyz', timeout=4)"]
ENTRYPOINT ["snoded", "--service-node", "--non-interactive", "--data-dir=/data", \
            "--rpc-admin=0.0.0.0:9231", "--log-level=2"]
