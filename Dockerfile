# Warren's server (cmd/warren) in a container. Build from the repository root:
#   docker build -t warren .
#   docker run -p 5672:5672 -p 15672:15672 -v warren-data:/var/lib/warren \
#     -e RABBITMQ_DEFAULT_USER=admin -e RABBITMQ_DEFAULT_PASS=change-me warren
# Settings: flags after the image name, WARREN_* and RABBITMQ_* variables,
# or a rabbitmq.conf mounted and named by RABBITMQ_CONFIG_FILE
# (docs/configuration.md). packaging/packaging_test.go checks this file.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/warren ./cmd/warren
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/warren /usr/local/bin/warren
# The data directory, owned by the image's nonroot user (65532).
COPY --from=build --chown=65532:65532 /out/data /var/lib/warren
ENV WARREN_ADDR=0.0.0.0:5672 \
    WARREN_HTTP=0.0.0.0:15672 \
    WARREN_DATA=/var/lib/warren
VOLUME /var/lib/warren
EXPOSE 5672 5671 15672
USER nonroot
ENTRYPOINT ["/usr/local/bin/warren"]
