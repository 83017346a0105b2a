# Worker image for data_prep.beam_pretraining_data: Beam's Python SDK image,
# data_prep, albert_toolkit and their three dependencies; no TensorFlow. Build from the repo root:
#   docker build -f data_prep/beam_worker.Dockerfile -t IMAGE .
# Dataflow: --sdk_container_image=IMAGE; Flink/Spark (portable runner):
# --environment_type=DOCKER --environment_config=IMAGE. See docs/data_prep.md.
FROM apache/beam_python3.11_sdk:2.77.0
COPY data_prep/beam_worker_requirements.txt /tmp/beam_worker_requirements.txt
RUN pip install --no-cache-dir -r /tmp/beam_worker_requirements.txt
COPY data_prep /opt/albert_tf/data_prep
COPY albert_toolkit /opt/albert_tf/albert_toolkit
ENV PYTHONPATH=/opt/albert_tf
