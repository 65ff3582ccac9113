"""The Job templates that tests share, one place for all (CONTRIBUTING.md, "The tests").

A test file imports the template it renders, under the name it uses (`from
tests.support.templates import RUN as TEMPLATE`), rather than writing one of its own: look here
first for one that fits, and add a new one here, with a comment that says what sets it apart.
tests/unit/test_layout.py holds every other file to it: a Job template that a test module
defines at module level is one of these. A template that is a single case's input (a line
that must be refused, a header that must be read) stays inside that test, and the error
table's rows keep their own files.

Each name says what the template is for; the text is as the tests have always rendered it,
byte for byte, since what they assert depends on it (names, line numbers in messages).
"""

from __future__ import annotations

# ---- Rendered offline (tests/unit, tests/conftest.py) ---------------------------------------

PLACED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<host>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
{placement}
      restartPolicy: Never
"""


SNIPPET = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
{snippet}
        - name: after
          image: busybox
      restartPolicy: Never
"""


# The template line the snippet starts on, for the messages of the failing cases.
SNIPPET_LINE = 12


LEGACY_HOSTS = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      containers:
        - name: tf
          image: tensorflow/tensorflow
          args: ["--ps_hosts=<<ps_hosts>>", "--worker_hosts=<<worker_hosts>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          ports:
            - containerPort: <<port>>
      restartPolicy: Never
"""


LABELLED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
  labels:
    simpletfjob/job: custom
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: x
"""


COMMENTED_LABELS = """\
# a comment at the top
kind: Job
apiVersion: batch/v1
metadata:
  name: t-<<type>>-<<index>>   # trailing comment
  labels:
    team: ml          # who owns it
    simpletfjob/job: custom
  annotations:
    note: keep me
spec:
  template:
    metadata:
      annotations: {a: b}
    spec:
      containers: [{name: c, image: i}]
"""


# A template of the user's own that reads the value `name`, with a default in its header.
READS_NAME = """\
# A template that names its Jobs from a value.
#
# simpletfjob:
#   values:
#     name: base
apiVersion: batch/v1
kind: Job
metadata:
  name: <<name>>-<<type>>-<<index>>
"""


READS_VALUES = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<host>>
      containers:
        - name: tf
          image: <<image>>
{% if gpus %}
          resources:
            limits:
              nvidia.com/gpu: <<gpus>>
{% endif %}
{% if debug is defined %}
          args: [--debug]
{% endif %}
          env:
            - name: STEPS
              value: "<<steps | default(100)>>"
            - name: LR
              value: "<<train.lr>>"
            - name: MOMENTUM
              value: "<<train['momentum']>>"
{% for key, value in extra_env.items() %}
            - name: <<key>>
              value: "<<value>>"
{% endfor %}
            - name: PICKED
              value: "<<table[pick].size>>"
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


HEADER_VALUES = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
  annotations:
    image: "<<image>>:<<tag>>"
    cpu: "<<res.cpu>>"
    memory: "<<res.memory>>"
"""


OPTIONAL_VALUES = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      containers:
        - name: tf
          image: << image | default('tensorflow/tensorflow') >>
{% if gpus is defined %}
          resources:
            limits:
              nvidia.com/gpu: << gpus >>
{% endif %}
      restartPolicy: Never
"""


FRAMEWORK_ENV = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: sidecar
          image: busybox
        - name: main
          image: python
          command: [python, train.py, "<<extra>>"]
          env:
            - name: FIRST
              value: one
            <<{env}>>
            - name: LAST
              value: two
          resources:
            limits:
              nvidia.com/gpu: <<gpus>>
"""


# A template whose roles ask for different things: the workers GPUs, every task cpu and memory.
FIT_BY_VALUES = """\
# simpletfjob:
#   values:
#     cpu: "1"
#     memory: 1Gi
#     gpus: 0
#     ps_gpus: 0
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            requests:
              cpu: "<<cpu>>"
              memory: "<<memory>>"
{% if type == "worker" and gpus %}
            limits:
              nvidia.com/gpu: <<gpus>>
{% elif type == "ps" and ps_gpus %}
            limits:
              nvidia.com/gpu: <<ps_gpus>>
{% endif %}
      restartPolicy: Never
"""


# Each role asks what its entry of the values `cpu` and `gpus` says (`--set gpus.evaluator=1`):
# a run whose roles ask unlike things of the nodes, for the seating's tests.
FIT_PER_ROLE = """\
# simpletfjob:
#   values:
#     cpu: {chief: "1", ps: "1", worker: "1", evaluator: "1"}
#     gpus: {chief: 0, ps: 0, worker: 0, evaluator: 0}
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            requests:
              cpu: "<<cpu[type]>>"
{% if gpus[type] %}
            limits:
              nvidia.com/gpu: <<gpus[type]>>
{% endif %}
      restartPolicy: Never
"""


SERVICE_AND_JOB = """\
apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  ports:
    - port: <<port>>
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
"""


# ---- Against a cluster's nodes and pods: the loopback server, or the real control plane without a kubelet ---

# A run on the pod network: no host port, so only GPUs decide.
POD_NETWORK = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
  namespace: ml
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


# A run on the host network whose port follows <<port>>, as the built-in templates do.
HOST_NETWORK = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
  namespace: ml
spec:
  template:
    spec:
      nodeName: <<node>>
      hostNetwork: true
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          ports:
            - containerPort: <<port>>
              hostPort: <<port>>
      restartPolicy: Never
"""


# The workers ask 1 GPU (a limit alone), every task 2 cpu and 4Gi; the ps asks no GPU.
FIT_WORKER_GPU = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
  namespace: ml
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            requests: {cpu: "2", memory: 4Gi}
{% if type == "worker" %}
            limits: {nvidia.com/gpu: 1}
{% endif %}
      restartPolicy: Never
"""


TOLERATING_GPU = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      hostNetwork: true
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


# The pods of the roles in `{roles}` tolerate the spot taint; the others do not.
SPOT_BY_ROLE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
{{% if type in {roles} %}}
      tolerations:
        - key: spot
          operator: Exists
{{% endif %}}
      containers:
        - name: tf
          image: tensorflow/tensorflow
          args: ["--listen=<<host>>:<<port>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


TOLERATIONS_SLOT = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
{tolerations}      containers:
        - name: tf
          image: tensorflow/tensorflow
          args: ["--listen=<<host>>:<<port>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


PLAIN = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: t-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


# A run on the host network, whose pods hold their port and, with <<gpus>>, GPUs.
HOST_PORT_GPUS = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: <<job>>-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      hostNetwork: true
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          ports:
            - containerPort: <<port>>
              hostPort: <<port>>
          resources:
            limits:
              nvidia.com/gpu: <<gpus>>
      restartPolicy: Never
"""


# {worker} and {ps} are each role's resources block (or nothing).
FIT_BY_ROLE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: fit-<<type>>-<<index>>
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
{% if type == "worker" %}
{worker}{% else %}
{ps}{% endif %}
      restartPolicy: Never
"""


MNIST = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: mnist-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      containers:
        - name: tf
          image: <<image>>
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


TFRUN = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: tfrun-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<host>>
      containers:
        - name: tf
          image: tensorflow/tensorflow
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
      restartPolicy: Never
"""


# ---- Runs whose pods the kubelet stand-in runs: the task's program is a script the test writes (<<script>>), or inline ---

RUN = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: rt-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>, <<mode>>, "<<seconds>>"]
          resources:
            requests:
              cpu: 100m
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


RUN_SCRIPT = """\
import json, os, pathlib, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}-{task['index']}"
markers, mode, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
print(name, "started", flush=True)
if task["type"] == "ps":
    time.sleep(3600)
if name == "worker-1" and mode in ("fail-once", "fail-always"):
    marker = markers / "failed"
    if mode == "fail-always" or not marker.exists():
        marker.write_text("x")
        time.sleep(1)
        print(name, "failing", flush=True)
        sys.exit(1)
time.sleep(seconds)
print(name, "done", flush=True)
"""


RESTARTED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: rr-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>, "<<code>>", "<<restart>>", <<who>>, "<<seconds>>"]
          resources:
            requests:
              cpu: 100m
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


SIGNALLED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: rs-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      terminationGracePeriodSeconds: 8
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>, <<mode>>, "<<seconds>>"]
          resources:
            requests:
              cpu: 100m
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


TERMINAL = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: tt-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, "<<code>>"]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


FOLLOWED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: lf-<<type>>-<<index>>
spec:
  backoffLimit: <<backoff>>
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: <<restart_policy>>
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


LOGGED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: lg-<<type>>-<<index>>
spec:
  backoffLimit: <<backoff>>
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: <<restart_policy>>
      containers:
        - name: tf
          image: python
          command:
            - python
            - -c
            - |
              import json, os, pathlib, sys, time
              task = json.loads(os.environ["TF_CONFIG"])["task"]
              name = f"{task['type']}-{task['index']}"
              for i in range(<<lines>>):
                  print(name, "line", i, flush=True)
              marker = pathlib.Path(<<marker>>) / name
              if name in <<crash>> and not marker.exists():
                  marker.write_text("x")
                  print(name, "crashing", flush=True)
                  sys.exit(3)
              if task["type"] == "ps":
                  time.sleep(3600)
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
        - name: sidecar
          image: busybox
"""


FAILING = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: fl-<<type>>-<<index>>
spec:
  backoffLimit: <<backoff>>
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: <<restart_policy>>
      containers:
        - name: tf
          image: python
          command:
            - python
            - -c
            - |
              import json, os, sys, time
              task = json.loads(os.environ["TF_CONFIG"])["task"]
              name = f"{task['type']}-{task['index']}"
              time.sleep(<<sleep>>)
              for i in range(<<lines>>):
                  print(name, "line", i, flush=True)
              if name in <<fail>>:
                  print(name, "giving up", flush=True)
                  sys.exit(1)
              if task["type"] == "ps":
                  time.sleep(3600)
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
          resources:
            limits:
              example.com/widget: <<widgets>>
"""


# `diagnose`'s run: the ps restarts in place (a previous container), the workers do not; a
# literal token and a Secret's reference in the env; a Service per task (--network pod).
DIAGNOSED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: dg-<<type>>-<<index>>
spec:
  backoffLimit: <<3 if type == 'ps' else 0>>
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: <<'OnFailure' if type == 'ps' else 'Never'>>
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>]
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
            - name: Api_Token
              value: <<token>>
            - name: DB_PASSWORD
              valueFrom:
                secretKeyRef: {name: db, key: password}
          resources:
            requests:
              cpu: 250m
              memory: 64Mi
"""


# A program of torchrun's workers: each all-reduces its rank + 1 over gloo and prints the sum.
TORCH_SCRIPT = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env://: what torchrun set from PET_*
rank, size = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world={size} node={os.environ['GROUP_RANK']} sum={value.item():g}", flush=True)
dist.destroy_process_group()
"""


# A Job whose label, args and env are filled in with one of the skeleton tests' expressions
# ({label}, {flow}, {value}): the same bytes either way (tests/unit/test_skeleton.py).
SKELETON_SMALL = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: s-<<type>>-<<index>>
  labels:
    v: {label}
spec:
  template:
    spec:
      nodeName: <<node>>
      containers:
        - name: main
          image: busybox
          args: [{flow}]
          env:
            - name: V
              value: {value}
      restartPolicy: Never
"""


# `run --queue`'s runs (tests/control_plane/test_queue.py): one task named by the run, asking
# <<cpu>> of a small node, that writes when it started and ended.
QUEUED = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: <<name>>-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      terminationGracePeriodSeconds: 2
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>, <<name>>, "<<seconds>>"]
          resources:
            requests:
              cpu: "<<cpu>>"
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""


PROGRESS = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: pg-<<type>>-<<index>>
spec:
  backoffLimit: 0
  template:
    spec:
      nodeName: <<node>>
      restartPolicy: Never
      terminationGracePeriodSeconds: 5
      containers:
        - name: tf
          image: python
          command: [python, <<script>>, <<markers>>, <<mode>>, "<<restart>>"]
          resources:
            requests:
              cpu: 100m
          env:
            - name: TF_CONFIG
              value: '<<TF_CONFIG>>'
"""
