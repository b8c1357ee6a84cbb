"""A real Kubernetes control plane on loopback for the cluster tests (marker `cluster`).

What runs (built by scripts/cluster.sh from the Go module tests/cluster/, at the versions its go.sum locks):

- etcd, in a temporary folder, plain http on a free 127.0.0.1 port (as envtest runs it);
- kube-apiserver on 127.0.0.1 with TLS, client-certificate authentication, the Node and RBAC authorizers,
  its default admission plugins plus NodeRestriction (kubeadm's set), service-account keys;
- kube-controller-manager (every default controller: Job, garbage collector, namespace, service account,
  PV binder, DaemonSet, Deployment/ReplicaSet, node lifecycle, ...) and kube-scheduler;
- the JobSet and Kueue managers, their CRDs and webhook configurations read from the module cache (the
  module versions go.mod pins) and applied as their kustomizations say, with each webhook's service
  reference replaced by a URL on 127.0.0.1 and the fixture's CA as caBundle (envtest's way);
- kwok, managing nodes annotated `kwok.x-k8s.io/node: fake` and their pods with its upstream stages
  (node initialize + lease heartbeat; pod create/ready/complete/delete with their per-pod delay
  annotations; the chaos stages that fail a pod's container when the pod has the label
  `pod-container-running-failed.stage.kwok.x-k8s.io: "true"`), also from the module cache, and serving
  `pods/log` from the files that `serve_logs()` names (its Logs/ClusterLogs CRDs). One stage of ours
  (READY_AGAIN) does what a kubelet does after its node was NotReady for a while: the node lifecycle
  controller marks its pods not Ready, and the kubelet reports them Ready again once it is back; kwok's
  own stages set Ready only on a Pending pod, so a pod of a node whose lease kwok renewed late on a
  loaded machine stayed not Ready for good (a Deployment never became available for helm's wait).

Certificates (a CA; the API server's, the webhooks' and kwok's serving certificates; an admin client
certificate in system:masters) and the service-account key pair are made here with `cryptography`.

`RealCluster.start()` brings everything up and waits until each piece answers; `stop()` ends every
process (SIGTERM, then SIGKILL after 10 s) and removes the temporary folder unless told to keep it. Each
child also gets PR_SET_PDEATHSIG, so none outlives a Python killed hard. `api()` is a small client for
the tests; `add_gpu_nodes(profile, count)` makes kwok nodes shaped like an accelerator profile of
values/accelerators/, `add_cpu_nodes(count, shape)` general-purpose ones (CPU_SHAPES; the cluster starts with
an e2-standard-8, an n2-standard-64 and an EKS m5.16xlarge). kwok completes a Job's pods once Running (its
pod-complete stage), so a data-prep Job completes and a recipe's wait for it ends; pods labelled
KEEP_RUNNING_LABEL are left running until a test ends them as a kubelet reports it (`end_pod`), with a log of
their own (`serve_pod_log`: a kwok Logs object per pod; `cri_log` turns a `kubectl logs --timestamps` file into
the runtime's format, its times kept). `paused(name)` stops one component for a block (SIGSTOP/SIGCONT).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import ctypes
import datetime
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator
from urllib.parse import quote

import yaml

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "tests" / "cluster"
BUILD_SCRIPT = ROOT / "scripts" / "cluster.sh"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"
# Scheduling capacity of a fake node besides the profile's GPUs and fabric devices (a large training host).
NODE_BASE_CAPACITY = {
    "cpu": "192",
    "memory": "2000Gi",
    "ephemeral-storage": "10Ti",
    "pods": "110",
    "hugepages-2Mi": "64Gi",
    "hugepages-1Gi": "0",
}
# $1: an empty folder for the overlay's upper layer, $2 and $3: certificate and key; then the command.
KUEUE_ETC_SCRIPT = (
    'mount -t tmpfs none "$1" && mkdir "$1/upper" "$1/work" '
    '&& mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc '
    '&& mkdir -p /etc/kueue/metrics/certs && cp "$2" /etc/kueue/metrics/certs/tls.crt '
    '&& cp "$3" /etc/kueue/metrics/certs/tls.key && shift 3 && exec "$@"'
)
ZONES = {"gke": ("us-central1", "us-central1-a"), "eks": ("us-west-2", "us-west-2a")}
# General-purpose (CPU) node shapes: cloud, capacity, the node-pool labels the cloud puts on them. A small one
# for controllers and services, and large ones such as data-prep Jobs need (32 CPU / 128Gi per worker in
# values/examples/p4de-gpt3-5b-pile.yaml, 15 CPU / 60Gi in a3mega-gpt3-175b-pile.yaml; their pods select no
# node, as on a real cluster they land on its CPU pool).
CPU_SHAPES: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    "e2-standard-8": ("gke", {"cpu": "8", "memory": "32Gi"}, {"cloud.google.com/gke-nodepool": "default-pool"}),
    "n2-standard-64": ("gke", {"cpu": "64", "memory": "256Gi"}, {"cloud.google.com/gke-nodepool": "cpu-pool"}),
    "m5.16xlarge": (
        "eks",
        {"cpu": "64", "memory": "256Gi"},
        {"eks.amazonaws.com/nodegroup": "cpu", "eks.amazonaws.com/capacityType": "ON_DEMAND"},
    ),
}


class ClusterError(RuntimeError):
    pass


class ApiError(ClusterError):
    """A Kubernetes Status answer: `code`, `reason`, and the server's own `message`."""

    def __init__(self, code: int, body: Any, method: str, path: str):
        self.code, self.body, self.method, self.path = code, body, method, path
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        self.message = body.get("message", "") if isinstance(body, dict) else str(body)
        super().__init__(f"{method} {path}: {code} {self.reason}: {self.message}")


# --------------------------------------------------------------------------------------------------
# Building and locating


def build(echo: Callable[[str], None] | None = None) -> Path:
    """scripts/cluster.sh (a no-op when the lock's binaries are cached): the folder of the binaries."""
    proc = subprocess.run(["bash", str(BUILD_SCRIPT)], cwd=ROOT, capture_output=True, text=True, check=False)
    if echo and proc.stderr.strip():
        echo(proc.stderr.strip())
    if proc.returncode != 0:
        raise ClusterError(f"scripts/cluster.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def module_dir(module: str) -> Path:
    """Where the module cache holds `module` at the version tests/cluster/go.sum locks."""
    env = {**os.environ, "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}
    go = shutil.which("go") or "/usr/local/go/bin/go"  # as scripts/cluster.sh finds it
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", module], cwd=MODULE, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ClusterError(f"go list -m {module}: {proc.stderr.strip()}")
    return Path(proc.stdout.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------------
# Certificates


class Pki:
    """A CA and the certificates signed by it, written as PEM files into `folder`."""

    def __init__(self, folder: Path):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ser, self._ec, self._rsa, self._oid = (
            x509,
            hashes,
            serialization,
            ec,
            rsa,
            NameOID,
        )
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "helm-nemo-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._ca_name = name
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_pem = self._ca_cert.public_bytes(serialization.Encoding.PEM)
        self.ca = self._write("ca.crt", self.ca_pem)

    def _write(self, name: str, data: bytes) -> Path:
        path = self.folder / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def _key_pem(self, key) -> bytes:
        return key.private_bytes(self._ser.Encoding.PEM, self._ser.PrivateFormat.PKCS8, self._ser.NoEncryption())

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
    ) -> tuple[Path, Path]:
        """A leaf certificate (serving when `dns`/`ips` are given, else client): (cert file, key file)."""
        import ipaddress

        x509, oid = self._x509, self._oid
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        attrs = [x509.NameAttribute(oid.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(oid.COMMON_NAME, common_name))
        now = datetime.datetime.now(datetime.UTC)
        usages = [x509.ExtendedKeyUsageOID.CLIENT_AUTH] if client else [x509.ExtendedKeyUsageOID.SERVER_AUTH]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, self._hashes.SHA256())
        return (
            self._write(f"{name}.crt", cert.public_bytes(self._ser.Encoding.PEM)),
            self._write(f"{name}.key", self._key_pem(key)),
        )

    def service_account_keys(self) -> tuple[Path, Path]:
        key = self._rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = key.public_key().public_bytes(self._ser.Encoding.PEM, self._ser.PublicFormat.SubjectPublicKeyInfo)
        return self._write("sa.pub", public), self._write("sa.key", self._key_pem(key))


# --------------------------------------------------------------------------------------------------
# Processes


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Process:
    def __init__(self, name: str, args: list[str], log: Path):
        self.name, self.args, self.log = name, args, log
        self._log_file = open(log, "ab")
        # Its own session: a Ctrl-C at the terminal reaches pytest, whose teardown stops it in order.
        self.popen = subprocess.Popen(
            args,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, grace: float = 10.0) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self._log_file.close()


# --------------------------------------------------------------------------------------------------
# Upstream manifests: read from the module cache and applied as their kustomizations say


def _load_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _merge(base: Any, patch: Any) -> Any:
    """A strategic-merge-patch subset: mappings merge, lists of named items merge by name, else replace."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (
        isinstance(base, list)
        and isinstance(patch, list)
        and all(isinstance(x, dict) and "name" in x for x in base + patch)
    ):
        out = [copy.deepcopy(x) for x in base]
        for item in patch:
            match = next((i for i, x in enumerate(out) if x["name"] == item["name"]), None)
            if match is None:
                out.append(copy.deepcopy(item))
            else:
                out[match] = _merge(out[match], item)
        return out
    return copy.deepcopy(patch)


def _json6902(doc: dict, ops: list[dict]) -> dict:
    doc = copy.deepcopy(doc)
    for op in ops:
        if op["op"] not in ("replace", "add"):
            raise ClusterError(f"unsupported patch op {op['op']}")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        target = doc
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] == "add":
                target.insert(index, copy.deepcopy(op["value"]))
            else:
                target[index] = copy.deepcopy(op["value"])
        else:
            target[last] = copy.deepcopy(op["value"])
    return doc


def _field_path(doc: dict, field_path: str, create: bool = False):
    """kustomize's `webhooks.[name=X].namespaceSelector`: (parent, key)."""
    import re

    parts = re.findall(r"\[[^\]]*\]|[^.\[]+", field_path)  # dots inside [name=a.b.c] do not split
    target: Any = doc
    for part in parts[:-1]:
        if part.startswith("[") and part.endswith("]"):
            key, _, value = part[1:-1].partition("=")
            target = next((x for x in target if x.get(key) == value), None)
            if target is None:
                return None, None
        else:
            if part not in target and create:
                target[part] = {}
            target = target.get(part)
    return target, parts[-1]


def kustomize_component(folder: Path) -> list[dict]:
    """The documents of a kustomize component folder: its resources with its `patches` (a file with a
    target: JSON 6902; a file or inline document without: strategic merge by kind and name) and its
    `replacements` of one field by another. The subset the JobSet and Kueue components use; anything
    else is refused, so an upstream change cannot pass unnoticed."""
    if not (folder / "kustomization.yaml").exists():  # a plain folder of manifests (kwok's pod/chaos stages)
        return [doc for path in sorted(folder.glob("*.yaml")) for doc in _load_docs(path)]
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    known = {"resources", "patches", "replacements", "configurations", "apiVersion", "kind"}
    if set(kustomization) - known:
        raise ClusterError(f"{folder}/kustomization.yaml: unsupported {sorted(set(kustomization) - known)}")
    docs: list[dict] = []
    for resource in kustomization.get("resources", []):
        docs.extend(_load_docs(folder / resource))
    for patch in kustomization.get("patches", []) or []:
        body = (
            yaml.safe_load(patch["patch"]) if "patch" in patch else yaml.safe_load((folder / patch["path"]).read_text())
        )
        if isinstance(body, list):  # JSON 6902 with a target
            target = patch["target"]
            for i, doc in enumerate(docs):
                if doc["kind"] == target["kind"] and doc["metadata"]["name"] == target["name"]:
                    docs[i] = _json6902(doc, body)
        else:
            for i, doc in enumerate(docs):
                if doc["kind"] == body["kind"] and doc["metadata"]["name"] == body["metadata"]["name"]:
                    docs[i] = _merge(doc, body)
    for replacement in kustomization.get("replacements", []) or []:
        source = replacement["source"]
        src_doc = next(d for d in docs if d["kind"] == source["kind"] and d["metadata"]["name"] == source["name"])
        parent, key = _field_path(src_doc, source["fieldPath"])
        value = parent[key]
        for target in replacement["targets"]:
            select = target["select"]
            for doc in docs:
                if doc["kind"] == select["kind"] and doc["metadata"]["name"] == select["name"]:
                    for field_path in target["fieldPaths"]:
                        parent, key = _field_path(doc, field_path, create=True)
                        if parent is not None:
                            parent[key] = copy.deepcopy(value)
    return docs


def point_at(docs: list[dict], prefix: str, url: str, ca_pem: bytes) -> list[dict]:
    """Webhook configurations and CRD conversion webhooks of a component, named with its kustomize
    `namePrefix`, their service references replaced by `url` + path and the CA bundle."""
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        if doc["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            doc["metadata"]["name"] = prefix + doc["metadata"]["name"]
            for hook in doc["webhooks"]:
                service = hook["clientConfig"].pop("service")
                hook["clientConfig"] = {"url": url + service.get("path", "/"), "caBundle": ca}
        elif doc["kind"] == "CustomResourceDefinition":
            webhook = (doc["spec"].get("conversion") or {}).get("webhook")
            if webhook and "service" in webhook.get("clientConfig", {}):
                service = webhook["clientConfig"].pop("service")
                webhook["clientConfig"] = {"url": url + service.get("path", "/convert"), "caBundle": ca}
        elif doc["kind"] == "Service":
            continue  # the webhook Service of the in-cluster deployment: the URL replaces it
        out.append(doc)
    return out


# --------------------------------------------------------------------------------------------------
# The cluster


class RealCluster:
    def __init__(
        self,
        workdir: Path | None = None,
        *,
        keep: bool = False,
        echo: Callable[[str], None] = print,
        large: bool = False,
    ):
        """`large`: for a thousand nodes on a small machine (bench/real_cluster_bench.py). kwok renews each
        node's lease every 40 s instead of a kubelet's 10 s (lease 160 s; 1,000 nodes: 25 renewals a second
        instead of 100, which two shared cores cannot keep up with while they create 5,000 pods), and the
        controller-manager and scheduler may send 200 requests a second (burst 400) instead of 20 and 50. In
        every mode the node lifecycle controller waits 200 s instead of 50 before it calls a node NotReady."""
        self.echo = echo
        self.large = large
        self.keep = keep
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="helm-nemo-cluster-"))
        self.processes: list[Process] = []
        self.bin: Path | None = None
        self.url = ""
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self.timings: dict[str, float] = {}
        self.nodes: dict[str, list[str]] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> RealCluster:
        started = time.monotonic()
        try:
            self.bin = build(self.echo)
            self.timings["build"] = time.monotonic() - started
            self._start()
        except BaseException:
            self.stop(failed=True)
            raise
        self.timings["start"] = time.monotonic() - started
        return self

    def _start(self) -> None:
        pki_dir = self.workdir / "pki"
        self.pki = pki = Pki(pki_dir)
        api_cert, api_key = pki.issue(
            "apiserver",
            "kube-apiserver",
            dns=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            ips=("127.0.0.1", "10.96.0.1"),
        )
        self.admin_cert, self.admin_key = pki.issue(
            "admin", "helm-nemo-admin", organizations=("system:masters",), client=True
        )
        webhook_dir = pki_dir / "webhook"
        webhook_dir.mkdir()
        cert, key = pki.issue("webhook", "webhooks", dns=("localhost",), ips=("127.0.0.1",))
        shutil.copy(cert, webhook_dir / "tls.crt")
        shutil.copy(key, webhook_dir / "tls.key")
        kwok_cert, kwok_key = pki.issue("kwok", "kwok", dns=("localhost",), ips=("127.0.0.1",))
        sa_pub, sa_key = pki.service_account_keys()

        # etcd
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._run(
            "etcd",
            [
                "--name=etcd",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=etcd=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--listen-metrics-urls=",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health"), 60)

        # kube-apiserver
        api_port = free_port()
        self.url = f"https://127.0.0.1:{api_port}"
        self._run(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={api_cert}",
                f"--tls-private-key-file={api_key}",
                f"--client-ca-file={pki.ca}",
                f"--kubelet-client-certificate={self.admin_cert}",
                f"--kubelet-client-key={self.admin_key}",
                f"--kubelet-certificate-authority={pki.ca}",
                "--kubelet-preferred-address-types=InternalIP",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={sa_pub}",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._write_kubeconfig()
        self._ssl = ssl.create_default_context(cafile=str(pki.ca))
        self._ssl.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        self._wait("kube-apiserver", lambda: self._get_ok("/readyz"), 120)

        # CRDs and their controllers' webhook configurations, from the module cache.
        jobset_dir, kueue_dir, kwok_dir = (
            module_dir(m) for m in ("sigs.k8s.io/jobset", "sigs.k8s.io/kueue", "sigs.k8s.io/kwok")
        )
        jobset_port, kueue_port = free_port(), free_port()
        jobset_url, kueue_url = f"https://127.0.0.1:{jobset_port}", f"https://127.0.0.1:{kueue_port}"
        crds = point_at(
            kustomize_component(jobset_dir / "config/components/crd"), "jobset-", jobset_url, pki.ca_pem
        ) + point_at(kustomize_component(kueue_dir / "config/components/crd"), "kueue-", kueue_url, pki.ca_pem)
        for crd in crds:
            self.apply(crd)
        self._wait("CRDs established", lambda: all(self._established(c["metadata"]["name"]) for c in crds), 60)
        for namespace in ("jobset-system", "kueue-system"):
            self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

        # kube-controller-manager and kube-scheduler
        cm_port, sched_port = free_port(), free_port()
        self._run(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig_path}",
                f"--authentication-kubeconfig={self.kubeconfig_path}",
                f"--authorization-kubeconfig={self.kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={cm_port}",
                "--leader-elect=false",
                f"--root-ca-file={pki.ca}",
                f"--service-account-private-key-file={sa_key}",
                "--use-service-account-credentials=false",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*",
                # kwok renews a node's lease late when two shared cores are busy: with upstream's 50 s the node
                # lifecycle controller called nodes NotReady mid-suite ("zone … PartialDisruption" for 5 s), and
                # Kueue's topology-aware scheduling then failed their pods (test_real_cluster_diagnosis's JobSets
                # restarted, a P5 node missing from preflight's capacity). No test makes a node NotReady itself.
                "--node-monitor-grace-period=200s",
                *(["--kube-api-qps=200", "--kube-api-burst=400"] if self.large else []),
                "--v=1",
            ],
        )
        self._run(
            "kube-scheduler",
            [
                f"--kubeconfig={self.kubeconfig_path}",
                f"--authentication-kubeconfig={self.kubeconfig_path}",
                f"--authorization-kubeconfig={self.kubeconfig_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={sched_port}",
                "--leader-elect=false",
                *(["--kube-api-qps=200", "--kube-api-burst=400"] if self.large else []),
                "--v=1",
            ],
        )

        # JobSet and Kueue managers
        jobset_health, kueue_health = free_port(), free_port()
        webhook_certs = str(webhook_dir)
        jobset_config = self.workdir / "jobset.yaml"
        jobset_config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                    "kind": "Configuration",
                    "webhook": {"port": jobset_port, "host": "127.0.0.1", "certDir": webhook_certs},
                    "metrics": {"bindAddress": "0"},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{jobset_health}"},
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                }
            )
        )
        self._run("jobset", [f"--config={jobset_config}", f"--kubeconfig={self.kubeconfig_path}"])
        kueue_config = self.workdir / "kueue.yaml"
        kueue_config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                    "kind": "Configuration",
                    "namespace": "kueue-system",
                    "webhook": {"port": kueue_port, "host": "127.0.0.1", "certDir": webhook_certs},
                    "metrics": {"bindAddress": "0"},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{kueue_health}"},
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "manageJobsWithoutQueueName": False,
                    # The visibility API server reads its certificate from /visibility (a fixed path at the root,
                    # which no overlay of /etc can provide): off, as in Kueue's own integration tests.
                    "featureGates": {"VisibilityOnDemand": False},
                    "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
                }
            )
        )
        # Kueue without its internal certificate management reads the metrics server's certificate from
        # a fixed path, /etc/kueue/metrics/certs (its Deployment mounts a Secret there), even with the
        # metrics server off: it runs in a private mount namespace whose /etc is an overlay holding it.
        overlay = self.workdir / "kueue-etc"
        overlay.mkdir()
        self._run(
            "kueue",
            [f"--config={kueue_config}", f"--kubeconfig={self.kubeconfig_path}"],
            wrap=[
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                KUEUE_ETC_SCRIPT,
                "sh",
                str(overlay),
                str(webhook_dir / "tls.crt"),
                str(webhook_dir / "tls.key"),
            ],
        )

        # kwok: fake nodes and pod lifecycles, with its upstream stages.
        stages = []
        for folder in ("node/fast", "node/heartbeat-with-lease", "pod/general", "pod/chaos"):
            stages.extend(kustomize_component(kwok_dir / "kustomize/stage" / folder))
        # Logs and ClusterLogs as CRDs: a test says which file kwok serves as a pod's log (pods/log).
        for name in ("logs", "clusterlogs"):
            for crd in _load_docs(kwok_dir / f"kustomize/crd/bases/kwok.x-k8s.io_{name}.yaml"):
                self.apply(crd)
                self._wait(f"kwok {name} CRD", lambda n=crd["metadata"]["name"]: self._established(n), 60)
        stages.append(READY_AGAIN)
        stages = [keep_running(stage) for stage in stages]
        if not self.large:  # the bench keeps upstream's timings (its pods keep running: a delay annotation)
            stages = [quick_stage(stage) for stage in stages]
        kwok_config = self.workdir / "kwok.yaml"
        kwok_config.write_text(yaml.safe_dump_all(stages))
        self.kwok_port = kwok_port = free_port()
        self._run(
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig_path}",
                f"--config={kwok_config}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--node-ip=127.0.0.1",
                f"--node-port={kwok_port}",
                f"--server-address=127.0.0.1:{kwok_port}",
                "--cidr=10.244.0.1/16",
                f"--tls-cert-file={kwok_cert}",
                f"--tls-private-key-file={kwok_key}",
                "--enable-crds=Logs,ClusterLogs",
                *(["--node-lease-duration-seconds=160"] if self.large else []),
            ],
        )

        self._wait("kube-controller-manager", lambda: _https_ok(f"https://127.0.0.1:{cm_port}/healthz"), 120)
        self._wait("kube-scheduler", lambda: _https_ok(f"https://127.0.0.1:{sched_port}/healthz"), 120)
        self._wait("jobset", lambda: _http_ok(f"http://127.0.0.1:{jobset_health}/readyz"), 120)
        self._wait("kueue", lambda: _http_ok(f"http://127.0.0.1:{kueue_health}/readyz"), 120)
        # Only now that their servers answer: the webhook configurations (failurePolicy Fail).
        for doc in point_at(
            kustomize_component(jobset_dir / "config/components/webhook"), "jobset-", jobset_url, pki.ca_pem
        ) + point_at(kustomize_component(kueue_dir / "config/components/webhook"), "kueue-", kueue_url, pki.ca_pem):
            self.apply(doc)
        self._wait(
            "service account controller", lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"), 60
        )
        self._wait("kwok", lambda: _https_ok(f"https://127.0.0.1:{kwok_port}/healthz"), 60)
        # Every cluster has nodes without GPUs (GKE's default pool, an EKS system node group), where
        # controllers and services such as the resiliency supervisor run, and large ones where CPU-heavy
        # Jobs such as data preparation run (a GKE CPU pool, an EKS CPU node group).
        self.add_cpu_nodes(1)
        self.add_cpu_nodes(1, "n2-standard-64")
        self.add_cpu_nodes(1, "m5.16xlarge")

    def stop(self, failed: bool = False) -> None:
        for process in reversed(self.processes):
            try:
                process.stop()
            except Exception:
                pass
        if failed:
            for process in self.processes:
                self.echo(f"--- {process.name} ({process.log}):\n{process.tail()}")
        self.processes = []
        if self._own_workdir and not self.keep and not failed:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _run(self, name: str, args: list[str], wrap: list[str] = ()) -> Process:
        assert self.bin is not None
        process = Process(name, [*wrap, str(self.bin / name), *args], self.workdir / f"{name}.log")
        self.processes.append(process)
        return process

    def _wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while True:
            dead = [p for p in self.processes if not p.alive()]
            if dead:
                raise ClusterError(
                    f"{dead[0].name} exited ({dead[0].popen.returncode}) while waiting for {what}:\n{dead[0].tail()}"
                )
            try:
                if ready():
                    self.timings[what] = time.monotonic() - started
                    return
            except (OSError, ApiError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} not ready after {timeout:.0f}s")
            time.sleep(0.25)

    def _write_kubeconfig(self) -> None:
        self.kubeconfig_path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "helm-nemo-test",
                    "clusters": [
                        {
                            "name": "helm-nemo-test",
                            "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca)},
                        }
                    ],
                    "users": [
                        {
                            "name": "admin",
                            "user": {"client-certificate": str(self.admin_cert), "client-key": str(self.admin_key)},
                        }
                    ],
                    "contexts": [{"name": "helm-nemo-test", "context": {"cluster": "helm-nemo-test", "user": "admin"}}],
                }
            )
        )
        self.kubeconfig_path.chmod(0o600)

    # -- API ----------------------------------------------------------------------------------

    def api(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", timeout: float = 30
    ) -> Any:
        host, port = self.url[len("https://") :].split(":")
        conn = http.client.HTTPSConnection(host, int(port), context=self._ssl, timeout=timeout)
        try:
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            conn.request(method, path, body=data, headers={"Content-Type": content_type, "Accept": "application/json"})
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        if response.status >= 400:
            raise ApiError(response.status, parsed, method, path)
        return parsed

    def get(self, path: str) -> Any:
        return self.api("GET", path)

    def _get_ok(self, path: str) -> bool:
        self.api("GET", path, timeout=5)
        return True

    def _exists(self, path: str) -> bool:
        try:
            self.api("GET", path, timeout=5)
            return True
        except ApiError as e:
            if e.code == 404:
                return False
            raise

    def _established(self, name: str) -> bool:
        crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        return any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )

    def path_of(self, obj: dict) -> str:
        """The REST path of an object (server-side discovery of a few built-in groups and the CRDs)."""
        group_version = obj["apiVersion"]
        plural = self._plural(group_version, obj["kind"])
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        namespace = obj["metadata"].get("namespace")
        scope = f"/namespaces/{namespace}" if namespace and self._namespaced(group_version, obj["kind"]) else ""
        return f"{base}{scope}/{plural}/{obj['metadata']['name']}"

    def _resources(self, group_version: str) -> list[dict]:
        cache = self.__dict__.setdefault("_discovery", {})
        if group_version not in cache:
            base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            cache[group_version] = self.get(base)["resources"]
        return cache[group_version]

    def _plural(self, group_version: str, kind: str) -> str:
        for resource in self._resources(group_version):
            if resource["kind"] == kind and "/" not in resource["name"]:
                return resource["name"]
        raise ClusterError(f"no resource of kind {kind} in {group_version}")

    def _namespaced(self, group_version: str, kind: str) -> bool:
        return next(
            r["namespaced"] for r in self._resources(group_version) if r["kind"] == kind and "/" not in r["name"]
        )

    def apply(self, obj: dict, *, force: bool = True) -> dict:
        """Server-side apply as field manager helm-nemo-tests."""
        path = self.path_of(obj) + "?fieldManager=helm-nemo-tests" + ("&force=true" if force else "")
        return self.api("PATCH", path, json.dumps(obj), content_type="application/apply-patch+yaml")

    def list_objects(
        self, group_version: str, plural: str, namespace: str | None = None, selector: str = ""
    ) -> list[dict]:
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        scope = f"/namespaces/{namespace}" if namespace else ""
        query = f"?labelSelector={quote(selector)}" if selector else ""
        return self.get(f"{base}{scope}/{plural}{query}")["items"]

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 60, interval: float = 0.5) -> Any:
        """Polls `check` until it returns something truthy (returned); on timeout fails with `what`
        and the last value or error seen."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            try:
                last = check()
                if last:
                    return last
            except ApiError as e:
                last = e
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
            dead = [p for p in self.processes if not p.alive()]
            if dead:
                raise ClusterError(f"{dead[0].name} exited while waiting for {what}:\n{dead[0].tail()}")
            time.sleep(interval)

    # -- nodes --------------------------------------------------------------------------------

    def add_gpu_nodes(self, profile_id: str, count: int) -> list[str]:
        """`count` more kwok nodes shaped like values/accelerators/<profile_id>.yaml, Ready when returned."""
        profile = yaml.safe_load((ROOT / "values" / "accelerators" / f"{profile_id}.yaml").read_text())
        names = self.nodes.setdefault(profile_id, [])
        created = []
        for _ in range(count):
            name = f"{profile_id}-node-{len(names)}"
            self.api("POST", "/api/v1/nodes", self._registered(node_object(profile, name)))
            names.append(name)
            created.append(name)
        self.wait_for(f"{count} {profile_id} nodes Ready", lambda: all(self._node_ready(n) for n in created), 60)
        return created

    def create_many(self, objects: list[dict], *, workers: int = 8, exist_ok: bool = False) -> list[bool]:
        """POSTs every object (in parallel on `workers` kept-alive connections): how a big cluster state is
        made in seconds (1,000 nodes, 5,000 pods). Nodes get what a kubelet registers (`_registered`); the
        server drops any other object's status on create. Returns, for each, whether it was created (False:
        it existed, with `exist_ok`)."""
        jobs = []
        for obj in objects:
            if obj["kind"] == "Node":
                obj = self._registered(copy.deepcopy(obj))
            jobs.append((self.path_of(obj).rsplit("/", 1)[0], json.dumps(obj)))  # discovery before the threads
        host, port = self.url[len("https://") :].split(":")
        local, opened = threading.local(), []

        def post(job: tuple[str, str]) -> bool:
            path, body = job
            for attempt in range(3):
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPSConnection(host, int(port), context=self._ssl, timeout=60)
                    opened.append(conn)
                try:
                    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                    response = conn.getresponse()
                    raw = response.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    local.conn = None
                    if attempt == 2:
                        raise
                    continue
                if response.status == 409 and exist_ok:
                    return False
                if response.status == 429 or response.status >= 500:  # the server's own back-pressure
                    time.sleep(0.2 * (attempt + 1))
                    continue
                if response.status >= 400:
                    raise ApiError(response.status, json.loads(raw or b"null"), "POST", path)
                return True
            raise ClusterError(f"POST {path}: no answer after 3 tries")

        from concurrent.futures import ThreadPoolExecutor

        try:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(post, jobs))
        finally:
            for conn in opened:
                conn.close()

    def serve_logs(self, namespace: str, log_file: Path, *, follow: bool = False) -> None:
        """kwok answers `pods/log` of every pod in `namespace` with the content of `log_file` (a ClusterLogs)."""
        self.apply(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "ClusterLogs",
                "metadata": {"name": f"logs-{namespace}"},
                "spec": {
                    "selector": {"matchNamespaces": [namespace]},
                    "logs": [{"logsFile": str(log_file), "follow": follow}],
                },
            }
        )

    def serve_pod_log(self, namespace: str, pod: str, log_file: Path, *, container: str | None = None) -> None:
        """kwok answers `pods/log` of this one pod (of `container`, else of every container) with the content of
        `log_file` (the container runtime's log format: `cri_log()`): a kwok Logs object named after the pod,
        which wins over a ClusterLogs of its namespace."""
        log: dict[str, Any] = {"logsFile": str(log_file), "follow": False}
        if container:
            log["containers"] = [container]
        self.apply(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": pod, "namespace": namespace},
                "spec": {"logs": [log]},
            }
        )

    def end_pod(
        self,
        namespace: str,
        pod: str,
        exit_code: int,
        finished_at: str,
        *,
        started_at: str = "",
        main: str = "workload",
    ) -> dict:
        """Reports a running pod's end as its kubelet does (pods/status): the `main` container terminated with
        `exit_code` (reason Error, or Completed for 0) at `finished_at` (RFC 3339), the others killed with it
        (SIGKILL: 137, as when the main container's end takes the pod down), not Ready, phase Failed (Succeeded
        for 0). For pods kwok leaves running (KEEP_RUNNING_LABEL); kwok's stages leave an ended pod alone."""
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}"
        status = self.get(path)["status"]
        started = started_at or status.get("startTime") or finished_at

        def ended(cstatus: dict, code: int) -> dict:
            terminated = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": ((cstatus.get("state") or {}).get("running") or {}).get("startedAt") or started,
                "finishedAt": finished_at,
            }
            if cstatus["name"] == main and started_at:
                terminated["startedAt"] = started_at
            return {**cstatus, "ready": False, "started": False, "state": {"terminated": terminated}}

        containers = [ended(c, exit_code if c["name"] == main else 137) for c in status.get("containerStatuses") or []]
        conditions = [
            {
                **c,
                "status": "False",
                "lastTransitionTime": finished_at,
                "reason": "PodCompleted" if exit_code == 0 else "",
            }
            if c["type"] in ("Ready", "ContainersReady")
            else c
            for c in status.get("conditions") or []
        ]
        patch = {
            "status": {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "conditions": conditions,
                "containerStatuses": containers,
            }
        }
        return self.api(
            "PATCH", f"{path}/status", json.dumps(patch), content_type="application/strategic-merge-patch+json"
        )

    @contextlib.contextmanager
    def paused(self, name: str) -> Iterator[None]:
        """One component stopped (SIGSTOP) for the block, then resumed: e.g. the controller-manager while a test
        reports many pods' ends, so the Job controller sees them together as it would if they came within its
        one-second batch (else it fails the Job at the first and deletes the pods still running)."""
        process = next(p for p in self.processes if p.name == name)
        os.kill(process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(process.pid, signal.SIGCONT)

    @contextlib.contextmanager
    def stopped(self, name: str) -> Iterator[None]:
        """One component stopped for the block, then started again with the same arguments (ready by its /healthz
        when it serves one): unlike `paused`, its informers list afresh, so a controller sees every change of the
        block at once. For many pods' ends (1,024): a paused controller-manager's watch replays them in order
        after SIGCONT, and the Job controller fails the Job at the first few hundred and deletes the rest."""
        index, process = next((i, p) for i, p in enumerate(self.processes) if p.name == name)
        process.stop()
        try:
            yield
        finally:
            again = Process(name, process.args, process.log)
            self.processes[index] = again
            port = next((a.split("=", 1)[1] for a in process.args if a.startswith("--secure-port=")), None)
            if port is not None:
                self._wait(f"{name} started again", lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"), 120)

    def add_cpu_nodes(self, count: int, shape: str = "e2-standard-8") -> list[str]:
        """`count` more kwok nodes without GPUs or taints (a general-purpose pool) of a CPU_SHAPES instance
        type, Ready when returned."""
        names = self.nodes.setdefault("cpu", [])
        cloud, size, pool_labels = CPU_SHAPES[shape]
        created = []
        for _ in range(count):
            name = f"cpu-node-{len(names)}"
            capacity = {**size, "ephemeral-storage": "100Gi", "pods": "110"}
            region, zone = ZONES[cloud]
            self.api(
                "POST",
                "/api/v1/nodes",
                self._registered(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {
                            "name": name,
                            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                            "labels": {
                                "kubernetes.io/hostname": name,
                                "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64",
                                "node.kubernetes.io/instance-type": shape,
                                **pool_labels,
                                "topology.kubernetes.io/region": region,
                                "topology.kubernetes.io/zone": zone,
                                "type": "kwok",
                            },
                        },
                        "status": {"capacity": capacity, "allocatable": capacity},
                    }
                ),
            )
            names.append(name)
            created.append(name)
        self.wait_for(f"{count} CPU nodes ({shape}) Ready", lambda: all(self._node_ready(n) for n in created), 60)
        return created

    def _registered(self, node: dict) -> dict:
        """What a kubelet reports when it registers: the node's addresses and its kubelet endpoint (kwok's
        server, which the API server reaches for pods/log)."""
        node["status"]["addresses"] = [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": node["metadata"]["name"]},
        ]
        node["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": self.kwok_port}}
        return node

    def _node_ready(self, name: str) -> bool:
        node = self.get(f"/api/v1/nodes/{name}")
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in (node.get("status") or {}).get("conditions") or []
        )


# A running pod marked not Ready by the node lifecycle controller (its node's lease ran out) while its
# containers still run: Ready again, as the kubelet reports it once it is back (see the module docstring).
READY_AGAIN = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "helm-nemo-pod-ready-again"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                {
                    "key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
                    "operator": "In",
                    "values": ["False"],
                },
                {"key": ".status.containerStatuses.[].state.running.startedAt", "operator": "Exists"},
            ]
        },
        "delay": {"durationMilliseconds": 1000},
        "next": {
            "statusTemplate": (
                "{{ $now := Now }}\n"
                "conditions:\n"
                + "".join(
                    f'- lastProbeTime: null\n  lastTransitionTime: {{{{ $now | Quote }}}}\n  status: "True"\n  type: {kind}\n'
                    for kind in ("Ready", "ContainersReady")
                )
            )
        },
    },
}


# The default delays of kwok's pod stages, shortened for the tests, which only wait for them: upstream waits 1 s
# plus up to 4 s of jitter at each of create, ready and complete (3 to 15 s for a Job's pod to finish), and
# deletes a running pod somewhere between 1 s and the end of its grace period (30 s by default). Here each step
# takes 0.1 to 1 s and a deletion 0.2 to 3 s: still random, so a test that does not wait for a state it needs
# still fails now and then instead of never. A pod's own delay annotations still win (the expressions stay).
QUICK_DELAYS_MS = {
    "pod-create": (100, 1000),
    "pod-init-container-running": (100, 1000),
    "pod-init-container-completed": (100, 1000),
    "pod-ready": (100, 1000),
    "pod-complete": (100, 1000),
    "pod-delete": (200, 3000),
}


def quick_stage(stage: dict) -> dict:
    """`stage` with the default delays of QUICK_DELAYS_MS (other stages as they are)."""
    quick = QUICK_DELAYS_MS.get(stage["metadata"]["name"])
    if not quick:
        return stage
    stage = copy.deepcopy(stage)
    delay = stage["spec"]["delay"]
    delay["durationMilliseconds"], delay["jitterDurationMilliseconds"] = quick
    if delay.get("jitterDurationFrom", {}).get("expressionFrom") == ".metadata.deletionTimestamp":
        del delay["jitterDurationFrom"]  # the grace period's end: up to 30 s for a pod being deleted
    return stage


# Pods so labelled (a chart's `workload.labels`) are not ended by kwok's pod-complete stage (which ends a Job's
# running pods after a few seconds): they run until a test reports how they ended (`RealCluster.end_pod`), as a
# training run that fails hours in does. Every other pod completes as upstream's stage says.
KEEP_RUNNING_LABEL = "kwok.helm-nemo.dev/keep-running"


def keep_running(stage: dict) -> dict:
    """kwok's pod-complete stage without the pods labelled KEEP_RUNNING_LABEL (other stages as they are)."""
    if stage["metadata"]["name"] != "pod-complete":
        return stage
    stage = copy.deepcopy(stage)
    stage["spec"]["selector"]["matchExpressions"].append(
        {"key": f'.metadata.labels["{KEEP_RUNNING_LABEL}"]', "operator": "DoesNotExist"}
    )
    return stage


def cri_log(stamped: str, stream: str = "stdout") -> str:
    """A log as `kubectl logs --timestamps` prints it (each line: the kubelet's RFC 3339 time, a space, the line)
    in the container runtime's (CRI) log format that the kubelet, and kwok, read: `TIME STREAM F LINE`. Served
    back with `timestamps=true`, each line carries the same instant (the kubelet writes it with 9 digits)."""
    out = []
    for line in stamped.splitlines():
        at, _, rest = line.partition(" ")
        out.append(f"{at} {stream} F {rest}\n")
    return "".join(out)


def node_object(profile: dict, name: str) -> dict:
    """A Node as the cloud's node pool of an accelerator profile registers it: the well-known labels
    (hostname, os, arch, instance type, region/zone), the profile's node labels and node-pool label,
    the GPU taint GKE puts on GPU node pools (and the arm64 taint of the Grace nodes), and capacity
    for `gpusPerNode` GPUs and the profile's fabric devices."""
    cloud = profile.get("cloud", "gke")
    region, zone = ZONES.get(cloud, ZONES["gke"])
    arch = profile.get("architecture", "amd64")
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": arch,
        "node.kubernetes.io/instance-type": profile["machineType"],
        "topology.kubernetes.io/region": region,
        "topology.kubernetes.io/zone": zone,
        "type": "kwok",
    }
    labels.update(profile.get("nodeLabels") or {})
    if profile.get("nodePoolLabel"):
        labels[profile["nodePoolLabel"]] = f"{profile['id']}-pool"
    taints = []
    if cloud == "gke":
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    if arch == "arm64":
        taints.append({"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"})
    capacity = dict(NODE_BASE_CAPACITY)
    capacity["nvidia.com/gpu"] = str(profile["gpusPerNode"])
    fabric = profile.get("fabric") or {}
    if fabric.get("resource"):
        capacity[fabric["resource"]] = str(fabric.get("perNode", 1))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": taints},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {"architecture": arch, "operatingSystem": "linux"},
        },
    }


def _http_ok(url: str) -> bool:
    import urllib.request

    with urllib.request.urlopen(url, timeout=3) as response:
        return response.status == 200


def _https_ok(url: str) -> bool:
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the components' self-signed serving certificates
    with urllib.request.urlopen(url, timeout=3, context=context) as response:
        return response.status == 200
