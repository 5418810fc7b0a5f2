#!/usr/bin/env bash
# flinkwatch on Kubernetes without the Spark operator: spark-submit in cluster mode, with the
# same image, pod templates and resources as sparkapplication.yaml.
#
#   K8S_API=https://<api-server>:6443 IMAGE=<registry>/flinkwatch:0.1.0 k8s/spark-submit.sh
#
# First `kubectl apply -k k8s/` and create the Spark key and the Slack Secret
# (docs/deployment.md). spark-submit
# 4.2.0 comes with the project's virtualenv (`make setup`); it uses your kubeconfig's
# credentials to create the driver pod, then returns. Nothing restarts a failed driver here
# (the operator does): rerun this script, and the job resumes from its checkpoints.
#
# Environment: K8S_API (required; `kubectl cluster-info` shows it), IMAGE (flinkwatch:0.1.0),
# NAMESPACE (flinkwatch), EXECUTORS (2), SPARK_SUBMIT (<repo>/.venv/bin/spark-submit).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
api=${K8S_API:?set K8S_API to the Kubernetes API server URL, e.g. https://10.0.0.1:6443 (kubectl cluster-info)}
image=${IMAGE:-flinkwatch:0.1.0}
namespace=${NAMESPACE:-flinkwatch}
executors=${EXECUTORS:-2}
spark_submit=${SPARK_SUBMIT:-$here/../.venv/bin/spark-submit}

exec "$spark_submit" \
  --master "k8s://$api" \
  --deploy-mode cluster \
  --name flinkwatch \
  --conf spark.kubernetes.namespace="$namespace" \
  --conf spark.kubernetes.container.image="$image" \
  --conf spark.kubernetes.container.image.pullPolicy=IfNotPresent \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=flinkwatch \
  --conf spark.kubernetes.authenticate.executor.serviceAccountName=flinkwatch-executor \
  --conf spark.kubernetes.driver.podTemplateFile="$here/pod-templates/driver.yaml" \
  --conf spark.kubernetes.executor.podTemplateFile="$here/pod-templates/executor.yaml" \
  --conf spark.kubernetes.submission.waitAppCompletion=false \
  --conf spark.driver.cores=1 \
  --conf spark.driver.memory=2g \
  --conf spark.driver.memoryOverhead=1g \
  --conf spark.executor.instances="$executors" \
  --conf spark.executor.cores=2 \
  --conf spark.executor.memory=2g \
  --conf spark.executor.memoryOverhead=1g \
  --conf spark.authenticate=true \
  --conf spark.authenticate.secret.file=/etc/flinkwatch-spark-auth/secret \
  --conf spark.network.crypto.enabled=true \
  --conf spark.network.crypto.cipher=AES/GCM/NoPadding \
  --conf spark.network.crypto.saslFallback=false \
  --conf spark.io.encryption.enabled=true \
  --conf 'spark.driver.extraClassPath=/opt/flinkwatch/jars/*' \
  --conf 'spark.executor.extraClassPath=/opt/flinkwatch/jars/*' \
  local:///opt/flinkwatch/main.py run --config /etc/flinkwatch/flinkwatch.yaml
