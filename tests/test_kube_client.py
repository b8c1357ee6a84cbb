"""helm_nemo.kube: kubeconfig resolution as client-go/helm do it, and the client against the loopback API
emulator over plain HTTP and real HTTPS (CA data, client certificates, exec credential plugins)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kube_emulator import KubeEmulator, make_tls
from helm_nemo.kube import KubeApiError, KubeConfigError, KubeUnreachable, connect
from helm_nemo.kube.config import resolve, settings

ROOT = Path(__file__).resolve().parent.parent


def kubeconfig(path: Path, *, contexts: dict, clusters: dict, users: dict, current: str | None = None) -> Path:
    data = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current:
        data["current-context"] = current
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls(tmp_path_factory.mktemp("tls"), ("alice",))


# --------------------------------------------------------------------------------------------------
# configuration


def test_kubeconfig_list_merges_first_wins(tmp_path):
    a = kubeconfig(
        tmp_path / "a",
        current="ctx-a",
        clusters={"c": {"server": "https://a.example:6443"}},
        users={"u": {"token": "from-a"}},
        contexts={"ctx-a": {"cluster": "c", "user": "u", "namespace": "team"}},
    )
    b = kubeconfig(
        tmp_path / "b",
        current="ctx-b",
        clusters={"c": {"server": "https://b.example"}, "d": {"server": "d.example"}},
        users={"u": {"token": "from-b"}},
        contexts={"ctx-b": {"cluster": "d", "user": "u"}},
    )
    env = {"KUBECONFIG": f"{a}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{b}"}
    config = resolve([], env)
    assert (config.server, config.token, config.namespace, config.context) == (
        "https://a.example:6443",
        "from-a",
        "team",
        "ctx-a",
    )
    config = resolve([], {**env, "HELM_KUBECONTEXT": "ctx-b"})
    assert (config.server, config.token, config.namespace) == ("https://d.example", "from-a", "default")
    # flags win over the environment helm gives plugins; -n over the context's namespace
    config = resolve(
        [
            "--kube-context=ctx-b",
            "-n",
            "ml",
            "--kube-token",
            "t",
            "--kube-as-group",
            "g1",
            "--kube-as-group=g2",
            "--kube-as-user",
            "bob",
        ],
        {**env, "HELM_NAMESPACE": "other"},
    )
    assert (config.context, config.namespace, config.token, config.impersonate_user, config.impersonate_groups) == (
        "ctx-b",
        "ml",
        "t",
        "bob",
        ["g1", "g2"],
    )
    assert settings(["-nfoo"], {})["HELM_NAMESPACE"] == "foo"


def test_kubeconfig_relative_paths_and_overrides(tmp_path):
    folder = tmp_path / "conf"
    folder.mkdir()
    path = kubeconfig(
        folder / "config",
        current="x",
        clusters={"c": {"server": "https://h", "certificate-authority": "ca.pem"}},
        users={"u": {"client-certificate": "c.pem", "client-key": "/abs/k.pem", "tokenFile": "tok"}},
        contexts={"x": {"cluster": "c", "user": "u"}},
    )
    config = resolve(["--kubeconfig", str(path)], {})
    assert (config.ca_file, config.cert_file, config.key_file, config.token_file) == (
        str(folder / "ca.pem"),
        str(folder / "c.pem"),
        "/abs/k.pem",
        str(folder / "tok"),
    )
    config = resolve(
        [],
        {
            "KUBECONFIG": str(path),
            "HELM_KUBEAPISERVER": "https://other:443",
            "HELM_KUBECAFILE": "/x.pem",
            "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true",
            "HELM_KUBEASUSER": "u2",
            "HELM_KUBEASGROUPS": "a,b",
        },
    )
    assert (config.server, config.ca_file, config.insecure, config.impersonate_user, config.impersonate_groups) == (
        "https://other:443",
        "/x.pem",
        True,
        "u2",
        ["a", "b"],
    )
    # --kube-apiserver + --kube-token alone, with no kubeconfig at all
    config = resolve(
        ["--kube-apiserver", "https://10.0.0.1", "--kube-token", "abc"], {"HOME": str(tmp_path / "nohome")}
    )
    assert (config.server, config.token, config.namespace) == ("https://10.0.0.1", "abc", "default")


@pytest.mark.parametrize(
    "case, message",
    [
        ("none", "no kubeconfig found"),
        ("explicit-missing", "does not exist"),
        ("bad-yaml", "not a YAML kubeconfig (line 2)"),
        ("no-context", "no current-context"),
        ("unknown-context", "context 'nope' not found (contexts: x)"),
        ("unknown-cluster", "names cluster 'c', which no kubeconfig defines"),
        ("exec-alpha", "exec apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported"),
        ("auth-provider", "auth-provider is no longer supported"),
    ],
)
def test_bad_kubeconfig_is_a_user_error(tmp_path, case, message):
    path = tmp_path / "config"
    args, env = [], {"KUBECONFIG": str(path), "HOME": str(tmp_path)}
    good = dict(
        clusters={"c": {"server": "https://h"}},
        users={"u": {"token": "t"}},
        contexts={"x": {"cluster": "c", "user": "u"}},
    )
    if case == "none":
        env = {"HOME": str(tmp_path)}
    elif case == "explicit-missing":
        args = ["--kubeconfig", str(tmp_path / "nothere")]
    elif case == "bad-yaml":
        path.write_text("clusters: [\n")
    elif case == "no-context":
        kubeconfig(path, **good)
    elif case == "unknown-context":
        kubeconfig(path, current="nope", **good)
    elif case == "unknown-cluster":
        kubeconfig(path, current="x", clusters={}, users=good["users"], contexts=good["contexts"])
    elif case == "exec-alpha":
        kubeconfig(
            path,
            current="x",
            clusters=good["clusters"],
            contexts=good["contexts"],
            users={"u": {"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "x"}}},
        )
    elif case == "auth-provider":
        kubeconfig(
            path,
            current="x",
            clusters=good["clusters"],
            contexts=good["contexts"],
            users={"u": {"auth-provider": {"name": "gcp"}}},
        )
    with pytest.raises(KubeConfigError) as caught:
        connect(args, env)
    text = caught.value.format()
    assert message in text and "Traceback" not in text and caught.value.exit_code == 2


# --------------------------------------------------------------------------------------------------
# the client


def test_get_list_pages_create_and_logs(tmp_path):
    with KubeEmulator() as kube:
        for index in range(7):
            kube.put(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"node-{index}", "labels": {"i": str(index % 2)}},
                }
            )
        kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {}})
        kube.logs[("ml", "p")] = "one\ntwo\nthree\n"
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", namespace="ml"))})
        assert client.namespace == "ml"
        names = [n["metadata"]["name"] for n in client.list("/api/v1/nodes", limit=3)]
        assert names == [f"node-{i}" for i in range(7)]
        pages = [r.query for r in kube.requests if r.path == "/api/v1/nodes"]
        assert len(pages) == 3 and "continue" not in pages[0] and pages[1]["continue"] and pages[2]["limit"] == "3"
        assert len(client.list("/api/v1/nodes", {"labelSelector": "i=1"})) == 3
        assert client.get("/api/v1/nodes/node-2")["metadata"]["name"] == "node-2"
        assert client.get_or_none("/api/v1/nodes/absent") is None
        with pytest.raises(KubeApiError) as caught:
            client.get("/api/v1/nodes/absent")
        assert caught.value.not_found and 'nodes "absent" not found' in caught.value.format()
        assert client.text("/api/v1/namespaces/ml/pods/p/log", {"tailLines": "2"}) == "two\nthree\n"
        kube.deny("create", "", "secrets", "ml")
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "create", "resource": "secrets", "namespace": "ml"}},
        }
        assert (
            client.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)["status"]["allowed"]
            is False
        )
        review["spec"]["resourceAttributes"]["namespace"] = "other"
        assert (
            client.create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)["status"]["allowed"] is True
        )
        assert client.resources("jobset.x-k8s.io/v1alpha2")[0]["kind"] == "JobSet"
        assert client.resources("kubeflow.org/v2") is None
        assert client.groups()["kueue.x-k8s.io"] == ["v1beta1", "v1alpha1"]  # preferred first
    with pytest.raises(KubeUnreachable) as caught:
        client.version()
    assert "connection refused" in caught.value.format() and "hint:" in caught.value.format()


def test_big_answers_come_gzipped_and_decode_the_same(tmp_path, monkeypatch):
    """JSON is asked for with Accept-Encoding: gzip; the emulator, as the API server, compresses answers over
    128 KiB (level 1). A big answer is decoded with the collector paused, which is on again afterwards."""
    import gc

    from helm_nemo.kube import paging

    with KubeEmulator() as kube:
        for index in range(600):
            kube.put(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"p-{index:04d}", "namespace": "ml", "annotations": {"x": "y" * 200}},
                    "spec": {"nodeName": f"n-{index % 7}", "containers": [{"name": "c", "image": "i" * 300}]},
                }
            )
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", namespace="ml"))})
        small = client.list("/api/v1/namespaces/ml/pods", {"fieldSelector": "spec.nodeName=n-1"})
        assert kube.gzipped == 0 and len(small) == 86  # under 128 KiB: sent as it is
        pages = client.list("/api/v1/namespaces/ml/pods", limit=250)  # 250, 250 (gzipped) and 100 pods
        assert kube.gzipped == 2 and [p["metadata"]["name"] for p in pages] == [f"p-{i:04d}" for i in range(600)]
        status, data, _ = client.request("GET", "/api/v1/namespaces/ml/pods")
        assert status == 200 and kube.gzipped == 3 and json.loads(data)["items"] == pages  # decompressed
        monkeypatch.setattr(paging, "BIG_ANSWER", 1)
        assert gc.isenabled()
        assert client.get("/api/v1/namespaces/ml/pods/p-0001")["spec"] == pages[1]["spec"]
        assert gc.isenabled()  # paused while decoding only
        gc.disable()
        try:
            assert len(client.list("/api/v1/namespaces/ml/pods")) == 600
            assert not gc.isenabled()  # left as it was found
        finally:
            gc.enable()
            gc.unfreeze()  # what the decodes froze: this test process goes on
        assert client.text("/api/v1/namespaces/ml/pods/p-0001/log") == ""  # text: no gzip asked for
        assert kube.gzipped == 4  # 500 pods of the last list


def test_https_ca_data_token_client_certificate_and_wrong_ca(tmp_path, tls):
    files, clients = tls
    with KubeEmulator(tls=files) as kube:
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc"))})
        assert client.version()["gitVersion"] == "v1.32.0" and kube.requests[-1].user == "emulator"
        cert, key = clients["alice"]
        user = {
            "client-certificate-data": base64.b64encode(Path(cert).read_bytes()).decode(),
            "client-key-data": base64.b64encode(Path(key).read_bytes()).decode(),
        }
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc2", user=user))})
        assert client.version() and kube.requests[-1].user == "alice"
        client = connect(
            [],
            {
                "KUBECONFIG": str(
                    kube.kubeconfig(tmp_path / "kc3", user={"client-certificate": cert, "client-key": key})
                )
            },
        )
        assert client.version() and kube.requests[-1].user == "alice"
        with pytest.raises(KubeApiError) as caught:  # no credentials over TLS: 401
            connect(
                [], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc4", user={"username": "x", "password": "y"}))}
            ).version()
        assert caught.value.code == 401 and "log in again" in caught.value.format()
        # a CA that did not sign the server's certificate: a clear TLS message, no traceback
        with pytest.raises(KubeUnreachable) as caught:
            connect([], {"KUBECONFIG": str(tmp_path / "kc"), "HELM_KUBECAFILE": cert}).version()
        assert "TLS" in caught.value.format()
        # ... unless told to skip verification
        assert connect(
            ["--kube-insecure-skip-tls-verify"], {"KUBECONFIG": str(tmp_path / "kc"), "HELM_KUBECAFILE": cert}
        ).version()


def _plugin(tmp_path: Path, status: dict, api_version: str = "client.authentication.k8s.io/v1", code: int = 0) -> Path:
    """An exec credential plugin as a script: records KUBERNETES_EXEC_INFO and its calls, prints a credential."""
    script = tmp_path / "plugin.py"
    credential = {"apiVersion": api_version, "kind": "ExecCredential", "status": status}
    script.write_text(f"""#!{sys.executable}
import os, sys
with open({str(tmp_path / "calls")!r}, "a") as out:
    out.write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
print({json.dumps(json.dumps(credential))})
if {code}:
    print("login required", file=sys.stderr)
sys.exit({code})
""")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
def test_exec_plugin_token_and_certificate(tmp_path, tls, api_version):
    files, clients = tls
    with KubeEmulator(tls=files) as kube:
        script = _plugin(
            tmp_path, {"token": "emulator-token", "expirationTimestamp": "2099-01-01T00:00:00Z"}, api_version
        )
        user = {
            "exec": {
                "apiVersion": api_version,
                "command": str(script),
                "args": [],
                "provideClusterInfo": True,
                "env": [{"name": "X", "value": "1"}],
                "interactiveMode": "Never",
            }
        }
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", user=user))})
        client.version()
        client.get("/api")
        assert kube.requests[-1].user == "emulator"
        calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
        assert len(calls) == 1  # run once per client
        assert calls[0]["apiVersion"] == api_version and calls[0]["spec"]["interactive"] is False
        assert (
            calls[0]["spec"]["cluster"]["server"] == kube.url
            and calls[0]["spec"]["cluster"]["certificateAuthorityData"]
        )

        cert, key = clients["alice"]
        script = _plugin(
            tmp_path,
            {"clientCertificateData": Path(cert).read_text(), "clientKeyData": Path(key).read_text()},
            api_version,
        )
        user = {"exec": {"apiVersion": api_version, "command": str(script)}}
        assert connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc2", user=user))}).version()
        assert kube.requests[-1].user == "alice"

        # a plugin that fails, one that is missing (with the kubeconfig's installHint), one that lies
        script = _plugin(tmp_path, {"token": "x"}, api_version, code=1)
        with pytest.raises(KubeConfigError, match="exited 1: login required"):
            connect(
                [],
                {
                    "KUBECONFIG": str(
                        kube.kubeconfig(
                            tmp_path / "kc3", user={"exec": {"apiVersion": api_version, "command": str(script)}}
                        )
                    )
                },
            ).version()
        with pytest.raises(KubeConfigError) as caught:
            connect(
                [],
                {
                    "KUBECONFIG": str(
                        kube.kubeconfig(
                            tmp_path / "kc4",
                            user={
                                "exec": {
                                    "apiVersion": api_version,
                                    "command": "gke-gcloud-auth-plugin-absent",
                                    "installHint": "gcloud components install gke-gcloud-auth-plugin",
                                }
                            },
                        )
                    )
                },
            ).version()
        assert "not installed" in caught.value.format() and "gcloud components install" in caught.value.format()
        other = (
            "client.authentication.k8s.io/v1beta1" if api_version.endswith("/v1") else "client.authentication.k8s.io/v1"
        )
        script = _plugin(tmp_path, {"token": "x"}, other)
        with pytest.raises(KubeConfigError, match="answered"):
            connect(
                [],
                {
                    "KUBECONFIG": str(
                        kube.kubeconfig(
                            tmp_path / "kc5", user={"exec": {"apiVersion": api_version, "command": str(script)}}
                        )
                    )
                },
            ).version()


def test_exec_plugin_runs_again_on_401(tmp_path):
    with KubeEmulator() as kube:
        counter = tmp_path / "n"
        script = tmp_path / "plugin.sh"
        # first an expired token, then the good one
        script.write_text(f"""#!/bin/sh
n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}
if [ $n = 1 ]; then t=expired; else t=emulator-token; fi
echo '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"'$t'"}}}}'
""")
        script.chmod(0o755)
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}}
        client = connect([], {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", user=user))})
        assert client.version()["gitVersion"] and counter.read_text().strip() == "2"


def test_proxy_from_the_environment(tmp_path, monkeypatch):
    from helm_nemo.kube.transport import proxy_for

    for name in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https", "api.example") is None
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain.corp")
    assert proxy_for("https", "api.example") == ("proxy.corp", 3128)
    assert proxy_for("http", "api.example") == ("plain.corp", 80)
    assert proxy_for("https", "127.0.0.1") is None  # never for loopback
    monkeypatch.setenv("NO_PROXY", ".example")
    assert proxy_for("https", "api.example") is None
    monkeypatch.delenv("NO_PROXY")
    # plain HTTP through a proxy: the connection goes to the proxy and asks for absolute URIs
    client = connect(["--kube-apiserver", "http://api.example:8080"], {"KUBECONFIG": str(tmp_path / "none")})
    conn = client._connection()
    assert (conn.host, conn.port, conn._helm_nemo_proxied) == ("plain.corp", 80, True)
    client.close()
    # an address with no host (or a bad port) is an error, as in Go: not a TypeError, not a direct connection
    for bad in ("http://:3128", "http://[proxy", "proxy.corp:port", "proxy.corp:99999"):
        monkeypatch.setenv("HTTPS_PROXY", bad)
        with pytest.raises(KubeConfigError) as caught:
            proxy_for("https", "api.example")
        assert "HTTPS_PROXY" in caught.value.format() and "not a proxy address" in caught.value.format()


def test_kube_package_is_not_imported_by_other_commands():
    """The client is lazy: `template` and `validate` never import it (nor http.client's ssl setup)."""
    code = (
        "import sys; sys.argv=['helm-nemo','version']\n"
        "from helm_nemo.cli import run\n"
        "import helm_nemo.cli.release_commands, helm_nemo.values.plan\n"
        "print(any(m.startswith('helm_nemo.kube') for m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "False"


@pytest.mark.skipif(not shutil.which("kubectl"), reason="no kubectl to compare with")
@pytest.mark.parametrize("case", ["current", "context-flag", "env-context", "namespace", "first-file-wins"])
def test_resolution_agrees_with_kubectl(tmp_path, case):
    """client-go's own resolution (kubectl config view --minify) and ours pick the same server, user and
    namespace for the same files, variables and flags."""
    a = kubeconfig(
        tmp_path / "a",
        current="ctx-a",
        clusters={"c": {"server": "https://a.example:6443"}},
        users={"u": {"token": "from-a"}, "v": {"token": "only-a"}},
        contexts={"ctx-a": {"cluster": "c", "user": "u", "namespace": "team"}, "ctx-v": {"cluster": "c", "user": "v"}},
    )
    b = kubeconfig(
        tmp_path / "b",
        current="ctx-b",
        clusters={"c": {"server": "https://b.example"}, "d": {"server": "https://d.example"}},
        users={"u": {"token": "from-b"}},
        contexts={"ctx-b": {"cluster": "d", "user": "u", "namespace": "nb"}},
    )
    paths = {"first-file-wins": f"{b}{os.pathsep}{a}"}.get(
        case, f"{a}{os.pathsep}{tmp_path / 'missing'}{os.pathsep}{b}"
    )
    env = {"KUBECONFIG": paths, "HOME": str(tmp_path)}
    flags = {
        "context-flag": ["--context", "ctx-b"],
        "env-context": ["--context", "ctx-v"],
        "namespace": ["--namespace", "given"],
    }.get(case, [])
    ours_flags = [f.replace("--context", "--kube-context") for f in flags]
    ours_env = dict(env)
    if case == "env-context":  # what helm gives a plugin for --kube-context
        ours_flags, ours_env["HELM_KUBECONTEXT"] = [], "ctx-v"
    proc = subprocess.run(
        ["kubectl", "config", "view", "--minify", "--raw", "-o", "json", *flags],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    view = json.loads(proc.stdout)
    context = view["contexts"][0]["context"]
    theirs = (
        view["clusters"][0]["cluster"]["server"],
        view["users"][0]["user"].get("token"),
        flags[1] if case == "namespace" else context.get("namespace") or "default",
    )
    config = resolve(ours_flags, ours_env)
    assert (config.server, config.token, config.namespace) == theirs
