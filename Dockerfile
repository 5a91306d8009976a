# The image the TFJob manifests in kubernetes/ run: every example, with the
# packages of requirements.txt.
#   docker build -t distributed-tensorflow-guide:latest .
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
# Not root: the examples write their runs/ folders under /app only.
RUN useradd --uid 1000 --no-create-home trainer && chown -R trainer /app
USER trainer
