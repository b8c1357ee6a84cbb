"""How a Slurm job starts on its nodes: the environment, the torchrun launcher and the srun line.

`SlurmLaunch` adds to SlurmValues the parts of the script that run the training: the env in order (the
profile's fabric settings, then the values', later entries winning; secrets as references), the Hydra overrides
as one shell word each, the per-node launcher (torchrun with the node's rank; `${NAME}` of the job's variables
replaced in pure bash, nothing evaluated) and srun with Pyxis/Enroot's container image and mounts.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from helm_nemo.targets.shell import Secrets, quote, text_of
from helm_nemo.targets.slurm_values import SlurmValues
from helm_nemo.values import value_at

NEMO_CONFIG_NAME = "nemo-config.yaml"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The variables a Slurm job defines that ${NAME} in an override may use (expanded per node at run time).
RUNTIME_EXPANDED = (
    "NNODES",
    "GPUS_PER_NODE",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "JOB_IDENTIFIER",
    "JOB_ORCHESTRATOR",
    "EXPERIMENT_NAME",
    "EXPERIMENT_ROOT_DIR",
    "EXPERIMENT_DIR",
    "RESULTS_DIR",
    "TORCH_DISTRIBUTED_TARGET",
    "CHECKPOINTS_ROOT_DIR",
    "NODE_RANK",
    "JOB_COMPLETION_INDEX",
    "OMP_NUM_THREADS",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_NODEID",
    "SLURM_JOB_NUM_NODES",
    "HOME",
    "PATH",
    "PWD",
    "HOSTNAME",
)


def enroot_image(image: str) -> str:
    """A registry image as Enroot/Pyxis names it: REGISTRY#IMAGE when the first part is a registry host."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return image


def _covers(mount_target: str, path: str) -> bool:
    mount_target = mount_target.rstrip("/") or "/"
    return path == mount_target or path.startswith(mount_target.rstrip("/") + "/")


class SlurmLaunch(SlurmValues):
    """The env, the overrides, the per-node launcher and the srun line of one job."""

    def environment(self, profile: dict[str, Any], s: dict[str, Any], secrets: Secrets) -> list[tuple[str, str, str]]:
        """(name, shell word, origin) in order; a later entry of the same name replaces an earlier one."""
        entries: dict[str, tuple[str, str]] = {}

        def put(name: str, word: str, origin: str) -> None:
            entries.pop(name, None)
            entries[name] = (word, origin)

        drop = set((profile.get("slurm") or {}).get("dropEnv") or [])
        for item in profile["network"].get("ncclEnv") or []:
            if item["name"] not in drop:
                put(item["name"], quote(item.get("value", "")), f"profile {profile['id']}")
        for item in (profile.get("slurm") or {}).get("env") or []:
            put(item["name"], quote(item.get("value", "")), f"profile {profile['id']} (slurm)")
        for variable, word in self.flight_recorder_env():
            put(variable, word, "workload.flightRecorder")
        for key, label in (
            (("network", "ncclSettings"), "network.ncclSettings"),
            (("workload", "envs"), "workload.envs"),
        ):
            for index, item in enumerate(value_at(self.values, key) or []):
                if not isinstance(item, dict) or "valueFrom" in item:
                    continue
                name = item.get("name")
                if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
                    self.problem(
                        key + (index, "name"), f"{name!r} is not a shell variable name", "[A-Za-z_][A-Za-z0-9_]*"
                    )
                    continue
                put(name, secrets.env_word(name, item.get("value", ""), key + (index, "value"), self.env), label)
        for name, value in (s.get("env") or {}).items():
            put(name, secrets.env_word(name, value, ("slurm", "env", name), self.env), "slurm.env")
        for name in secrets.declared:
            if name not in entries:
                secrets.required.setdefault(name, None)
                put(name, '"${' + name + '}"', "slurm.secret_env")
        return [(name, word, origin) for name, (word, origin) in entries.items()]

    def flight_recorder_env(self) -> list[tuple[str, str]]:
        """PyTorch's flight recorder as the charts set it (schemas/definitions.schema.json `flightRecorder`): the
        dumps go to the job's results folder, or <dir>/<job>, one folder per job; none when off."""
        found = value_at(self.values, ("workload", "flightRecorder"))
        if not found:
            return []
        config = found if isinstance(found, dict) else {}
        folder = '"$RESULTS_DIR/results/flight-recorder'
        if config.get("dir"):
            folder = quote(str(config["dir"]).rstrip("/")) + '"/${SLURM_JOB_NAME}_${SLURM_JOB_ID}'
        prefix = folder + '/nccl_trace_rank_"'
        return [
            ("TORCH_NCCL_TRACE_BUFFER_SIZE", str(int(config.get("traceBufferSize") or 2000))),
            ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1"),
            ("TORCH_FR_DUMP_TEMP_FILE", prefix),
            ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", prefix),
        ]

    IMAGE: tuple[str, ...] = ("workload", "image")  # where the values name the container image

    def image(self, s: dict[str, Any]) -> str:
        if s.get("container_image"):
            return str(s["container_image"])
        return enroot_image(text_of(value_at(self.values, self.IMAGE)))

    def mounts(self, s: dict[str, Any], results_root: str) -> list[str]:
        out = list(s.get("container_mounts") or [])
        claims = s.get("claim_paths") or {}
        for index, mount in enumerate(value_at(self.values, ("volumes", "pvcMounts")) or []):
            claim = mount.get("claimName")
            if claim not in claims:
                self.problem(
                    ("volumes", "pvcMounts", index, "claimName"),
                    f"claim {claim!r} has no path on the Slurm nodes",
                    f"slurm.claim_paths: {{{claim}: /path/on/the/nodes}}",
                    "the Kubernetes claim's filesystem is mounted on the cluster; say where",
                )
                continue
            target = mount.get("mountPath")
            if not isinstance(target, str) or "," in target or ":" in target:
                self.problem(
                    ("volumes", "pvcMounts", index, "mountPath"), "a container mount path cannot hold ',' or ':'"
                )
                continue
            entry = f"{claims[claim]}:{target}" + (":ro" if mount.get("readOnly") else "")
            if entry not in out:
                out.append(entry)
        if not any(_covers(entry.split(":")[1] if ":" in entry else entry, results_root) for entry in out):
            out.append(f"{results_root}:{results_root}")
        return out

    def arguments(self, secrets: Secrets, env: list[tuple[str, str, str]]) -> list[str]:
        words = []
        for index, item in enumerate(value_at(self.values, ("workload", "nemoConfigOverrides")) or []):
            words.append(
                (
                    secrets.word(item, ("workload", "nemoConfigOverrides", index)),
                    text_of(item),
                    ("workload", "nemoConfigOverrides", index),
                )
            )
        for index, item in enumerate(value_at(self.values, ("workload", "arguments")) or []):
            where = ("workload", "arguments", index)
            if isinstance(item, dict):
                value = item.get("value")
                if isinstance(value, list):
                    value = "[" + ",".join(text_of(v) for v in value) + "]"
                text = (
                    f"{item.get('name')}={text_of(value) if 'value' in item and value is not None else 'null'}"
                    if "value" in item
                    else text_of(item.get("name"))
                )
                # secrets may sit in the value: word() searches the text at the value's path
                word = secrets.word(text, where + ("value",)) if "value" in item else quote(text)
            else:
                text, word = text_of(item), secrets.word(item, where)
            words.append((word, text, where))
        from helm_nemo.values.substitute import RUNTIME_VARIABLES

        defined = set(RUNTIME_EXPANDED) | {name for name, _, _ in env}
        self.expanded: list[str] = []
        for _, text, where in words:
            for name in _REFERENCE.findall(text):
                if name in defined:
                    if name not in self.expanded:
                        self.expanded.append(name)
                elif name in RUNTIME_VARIABLES:  # meant for the pod (kept by substitution), nothing sets it on Slurm
                    self.problem(
                        where,
                        f"${{{name}}} has no value in a Slurm job",
                        "one of " + ", ".join(sorted(RUNTIME_EXPANDED)),
                        f"write $${{{name}}} for a literal, or set {name} in slurm.env",
                    )
        return [word for word, _, _ in words]

    def launcher(self, checkpoints: Any) -> str:
        lines = [
            "set -euo pipefail",
            'export NODE_RANK="$SLURM_NODEID" JOB_COMPLETION_INDEX="$SLURM_NODEID"',
            'args=("$@")',
        ]
        if self.expanded:
            names = " ".join(self.expanded)
            lines += [
                "# ${NAME} of the job variables in the overrides, replaced in pure bash (nothing is evaluated)",
                'for i in "${!args[@]}"; do',
                f'  for n in {names}; do args[i]=${{args[i]//"\\${{$n}}"/"${{!n}}"}}; done',
                "done",
            ]
        if checkpoints:
            lines.append(
                'args=("++exp_manager.checkpoint_callback_params.dirpath='
                '$CHECKPOINTS_ROOT_DIR/$EXPERIMENT_NAME/$JOB_IDENTIFIER" "${args[@]}")'
            )
        lines += [
            "cmd=(torchrun",
            '  --nproc-per-node="$GPUS_PER_NODE" --nnodes="$NNODES" --node_rank="$NODE_RANK"',
            '  --rdzv_id="$SLURM_JOB_ID" --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT"',
            f'  "$TORCH_DISTRIBUTED_TARGET" --config-path="$RESULTS_DIR" --config-name={NEMO_CONFIG_NAME}',
            '  ++trainer.num_nodes="$NNODES" ++exp_manager.name="$EXPERIMENT_NAME"',
            '  ++exp_manager.version="$JOB_IDENTIFIER" ++exp_manager.explicit_log_dir="$RESULTS_DIR/results"',
            "  ++exp_manager.create_tensorboard_logger=true ++exp_manager.create_dllogger_logger=true",
            '  ++exp_manager.dllogger_logger_kwargs.json_file="$RESULTS_DIR/results/dllogger/rank-$NODE_RANK/dllogger.json"',
            '  "${args[@]}")',
            'if [ "$NODE_RANK" = 0 ]; then printf "%q " "${cmd[@]}" > "$RESULTS_DIR/cmd-args.log"; echo >> "$RESULTS_DIR/cmd-args.log"; fi',
            'exec "${cmd[@]}"',
        ]
        return "\n".join(lines) + "\n"

    def srun(self, s: dict[str, Any], root: str) -> list[str]:
        raw = s.get("srun_args")
        if isinstance(raw, str):
            try:
                srun_args = shlex.split(raw)
            except ValueError as err:
                self.problem(("slurm", "srun_args"), f"cannot split srun_args: {err}", "a list, or one line of words")
                srun_args = []
        else:
            srun_args = list(raw or [])
        words = ["srun", "--ntasks-per-node=1"]
        if s.get("container", True):
            words += [f"--container-image={self.image(s)}", "--container-mounts=" + ",".join(self.mounts(s, root))]
        else:
            srun_args = [a for a in srun_args if not a.startswith("--container") and not a.startswith("--no-container")]
        words += srun_args
        out = [
            "# container: "
            + (
                "Pyxis/Enroot"
                if s.get("container", True)
                else "none (slurm.container: false: the nodes run the command as they are)"
            )
        ]
        body = " \\\n  ".join(quote(w) for w in words)
        out.append(body + ' \\\n  bash -c "$LAUNCH" nemo-launch "${ARGS[@]}"')
        return out
