# syntax=docker/dockerfile:1
# The sluice binary: CLI, controller, executor and API in one image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sluice ./starter

FROM debian:bookworm-slim
# git checks out repositories; tini reaps build processes orphaned by steps.
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 sluice \
    && install -d -o sluice -g sluice /home/sluice/data
# The data directory exists, owned by sluice, so that a named volume mounted
# there starts with that owner (an absent mount point comes up root-owned and
# the services, uid 10001, could not write it).
COPY --from=build /out/sluice /usr/local/bin/sluice
# The Docker CLI, for executors that run builds through the host's Docker
# (SLUICE_EXECUTOR_RUNTIME=docker with the socket mounted; see docker-compose.yml).
COPY --from=docker:27-cli /usr/local/bin/docker /usr/local/bin/docker
USER sluice
WORKDIR /home/sluice
ENV SLUICE_DATA_DIR=/home/sluice/data
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/sluice"]
CMD ["--help"]
