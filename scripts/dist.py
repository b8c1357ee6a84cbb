#!/usr/bin/env python3
"""`make dist`: the release files in dist/.

  dist/helm_nemo-<v>-py3-none-any.whl   the package, data included (charts, schemas, profiles, generator sources)
  dist/helm_nemo-<v>.tar.gz             its sdist
  dist/helm-nemo-<v>.tgz                the Helm plugin: plugin.yaml, completion.yaml, bin/, NOTICE and wheels/
                                        (the wheel above plus every dependency at its locked version, requirements/runtime.lock,
                                        for this platform and Python; kubernetes-validate without the
                                        schemas of Kubernetes versions the charts do not admit),
                                        so `helm plugin install` sets itself up offline

The plugin tarball has plugin.yaml at its root and no `./` entry (Helm 3.17's HTTP installer needs both), and
is reproducible: sorted entries, fixed mtime and owner.

With --sign KEY (or HELM_NEMO_SIGN_KEY), gpg also writes dist/helm-nemo-<v>.tgz.prov: Helm 4's provenance for
plugins (a clear-signed plugin.yaml followed by `files: {<tarball>: sha256:<digest>}`), fetched from
<url>.prov and checked against --keyring when Helm 4 installs the tarball over http(s) without
--verify=false. Helm 3 ignores it.
"""

from __future__ import annotations

import argparse
import gzip
import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_FILES = ("plugin.yaml", "completion.yaml", "NOTICE", "bin/nemo.sh", "bin/nemo.cmd", "bin/install-hook.sh")
EPOCH = 1_700_000_000


def version() -> str:
    sys.path.insert(0, str(ROOT))
    from helm_nemo import __version__

    return __version__


def run(*args: str) -> None:
    subprocess.run(args, check=True, cwd=ROOT)


def plugin_tarball(version: str, wheels: list[Path], dist: Path) -> Path:
    entries: list[tuple[str, bytes, int]] = []
    for rel in PLUGIN_FILES:
        path = ROOT / rel
        entries.append((rel, path.read_bytes(), 0o755 if rel.startswith("bin/") else 0o644))
    for wheel in wheels:
        entries.append((f"wheels/{wheel.name}", wheel.read_bytes(), 0o644))
    out = dist / f"helm-nemo-{version}.tgz"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(name).parent) for name, _, _ in entries} - {"."})
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
            tar.addfile(info)
        for name, data, mode in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, EPOCH
            tar.addfile(info, io.BytesIO(data))
    with open(out, "wb") as handle, gzip.GzipFile(fileobj=handle, mode="wb", mtime=EPOCH, filename="") as gz:
        gz.write(raw.getvalue())
    return out


SCHEMAS = "kubernetes_validate/kubernetes-json-schema/"


def oldest_supported_kube() -> tuple[int, int]:
    """The lowest Kubernetes minor any chart's `kubeVersion` (`>=1.29.0-0`) admits: older schemas are never read."""
    import re

    floors = set()
    for chart in (ROOT / "charts").rglob("Chart.yaml"):
        found = re.search(r'^kubeVersion:\s*["\']?>=\s*v?(\d+)\.(\d+)', chart.read_text(), re.M)
        if not found:
            raise SystemExit(f"dist: {chart} has no `kubeVersion: >=X.Y` floor; cannot tell which schemas to ship")
        floors.add((int(found.group(1)), int(found.group(2))))
    return min(floors)


def schema_folder_kept(name: str, floor: tuple[int, int]) -> bool:
    """kubernetes-validate ships `v1.N.0-local` and `v1.N.0-local-strict` for every minor since 1.25; helm-nemo
    reads only the strict ones (validate/schemas.py), and only for versions the charts admit."""
    import re

    if not name.startswith(SCHEMAS):
        return True
    found = re.match(r"v(\d+)\.(\d+)\.\d+-local-strict/", name[len(SCHEMAS) :])
    return bool(found) and (int(found.group(1)), int(found.group(2))) >= floor


def trim_kubernetes_validate(wheel: Path, floor: tuple[int, int]) -> None:
    """Rewrite the kubernetes-validate wheel in place without the schema folders helm-nemo never reads (about 7 of
    the tarball's MB); every file kept is byte-identical, RECORD lists exactly what is kept, entries in order."""
    import zipfile

    with zipfile.ZipFile(wheel) as source:
        infos = [info for info in source.infolist() if schema_folder_kept(info.filename, floor)]
        contents = {info.filename: source.read(info) for info in infos}
    record = next(name for name in contents if name.endswith(".dist-info/RECORD"))
    lines = contents[record].decode().splitlines(keepends=True)
    contents[record] = "".join(line for line in lines if line.split(",", 1)[0] in contents).encode()
    trimmed = wheel.with_suffix(".trimmed")
    with zipfile.ZipFile(trimmed, "w", zipfile.ZIP_DEFLATED) as target:
        for info in infos:
            fresh = zipfile.ZipInfo(info.filename, date_time=(2023, 11, 14, 22, 13, 20))
            fresh.external_attr, fresh.compress_type = info.external_attr, zipfile.ZIP_DEFLATED
            target.writestr(fresh, contents[info.filename])
    trimmed.replace(wheel)


def provenance(tarball: Path, key: str) -> Path:
    """The .prov Helm 4 verifies: plugin.yaml, `...`, the tarball's sha256, clear-signed by `key` with gpg."""
    import hashlib

    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    body = (ROOT / "plugin.yaml").read_text().rstrip("\n") + f"\n\n...\nfiles:\n  {tarball.name}: sha256:{digest}\n"
    out = tarball.with_name(tarball.name + ".prov")
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--yes",
            "--digest-algo",
            "SHA512",
            "--local-user",
            key,
            "--clearsign",
            "--output",
            str(out),
        ],
        input=body.encode(),
        check=True,
    )
    return out


def main() -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist")
    parser.add_argument(
        "--sign",
        metavar="KEY",
        default=os.environ.get("HELM_NEMO_SIGN_KEY"),
        help="gpg key (user id or fingerprint) that signs the plugin tarball's provenance",
    )
    args = parser.parse_args()
    dist = args.outdir.resolve()
    v = version()
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    # One build at a time in this checkout: setuptools makes the sdist's tree (helm_nemo-<v>/), build/ and the
    # egg-info inside it, so two at once (the test suite's workers, a `make dist` beside it) undo each other.
    with open(ROOT / ".dist.lock", "w") as lock:
        import fcntl

        fcntl.flock(lock, fcntl.LOCK_EX)
        # --no-isolation: the build backend comes from this venv (setuptools in the test extras), not a download
        run(sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(dist), ".")
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    wheel = dist / f"helm_nemo-{v}-py3-none-any.whl"
    wheels = dist / "wheels"
    # the dependencies at the versions of requirements/runtime.lock (hashes checked), for this platform and Python
    run(
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--require-hashes",
        "--no-deps",
        "--dest",
        str(wheels),
        "-r",
        str(ROOT / "requirements" / "runtime.lock"),
    )
    shutil.copy2(wheel, wheels / wheel.name)
    for bundled in wheels.glob("kubernetes_validate-*.whl"):
        trim_kubernetes_validate(bundled, oldest_supported_kube())
    tarball = plugin_tarball(v, sorted(wheels.glob("*.whl")), dist)
    shutil.rmtree(wheels)
    if args.sign:
        provenance(tarball, args.sign)
    for path in sorted(dist.iterdir()):
        print(f"dist: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    verify = "--keyring PUBRING (signed)" if args.sign else "--verify=false (unsigned)"
    print(f"dist: serve dist/ over http(s), then: helm plugin install URL/{tarball.name}  (Helm 4: {verify})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
