# coding-agent-bot: the daemon in a small image. Build: docker build -t coding-agent-bot .
# Run:   docker run -d --init -v bot-data:/data -v $PWD/config.yaml:/config/config.yaml:ro \
#          -e GITHUB_TOKEN=... coding-agent-bot
# With `jail.enabled: true` the container must allow user namespaces and mounts inside them
# (README, "Running commands"): e.g. --security-opt seccomp=unconfined --security-opt
# apparmor=unconfined, or a seccomp profile that permits unshare, clone3, setns and mount;
# networked setup (setup_network: true) also needs --device /dev/net/tun for slirp4netns.
FROM python:3.11.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scripts ./scripts
COPY bot ./bot
COPY bot_sandbox ./bot_sandbox
# The same install script as `make` (and so CI) uses.
RUN sh scripts/install-venv /opt/venv .

FROM python:3.11.11-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini bubblewrap slirp4netns \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 bot \
    && useradd --system --uid 10001 --gid bot --home-dir /data --shell /usr/sbin/nologin bot \
    && mkdir -p /data /config \
    && chown bot:bot /data
COPY --from=build /opt/venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
VOLUME ["/data"]
WORKDIR /data
# state_dir in /config/config.yaml should be /data (see config.example.yaml).
HEALTHCHECK --interval=60s --timeout=10s --start-period=60s --retries=3 \
    CMD ["bot", "healthcheck", "-c", "/config/config.yaml"]
# tini is PID 1: SIGTERM reaches the daemon, which checkpoints running tasks and exits 0.
ENTRYPOINT ["/usr/bin/tini", "--", "bot"]
CMD ["run", "-c", "/config/config.yaml"]
STOPSIGNAL SIGTERM
