# The collector image. The agent is not containerised: it runs on the GPU host as a zipapp.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openssh-client \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY agent ./agent
COPY collector ./collector
COPY migrations ./migrations
COPY templates ./templates
RUN pip install --no-cache-dir . && useradd --system --home /var/lib/freezewatch freezewatch \
    && mkdir -p /var/lib/freezewatch/data && chown -R freezewatch /var/lib/freezewatch
USER freezewatch
ENV FREEZEWATCH_BIND=0.0.0.0 FREEZEWATCH_PORT=8080 FREEZEWATCH_DATA_DIR=/var/lib/freezewatch/data
EXPOSE 8080 6666/udp
CMD ["freezewatch-collector", "serve"]
