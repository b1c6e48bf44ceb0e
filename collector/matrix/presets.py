"""Built-in matrix presets: `nemoclaw-spark-qwen` is NemoClaw's managed Qwen launch on Spark
with one change per profile; `nemoclaw-spark-isolation` is the field report's next experiment,
cold-boot repetitions at 0.9 / 262K with MTP on and off, then 1M, each with a soak."""

from __future__ import annotations

from typing import Any

import yaml

from collector.matrix.spec import MatrixSpec, SpecError, validate_spec
from collector.schemas import OutModel

QWEN_MODEL = "nvidia/Qwen3.6-35B-A3B-NVFP4"
QWEN_SPECULATIVE_CONFIG = '{"method":"mtp","num_speculative_tokens":3,"moe_backend":"triton"}'

# The managed command exactly as issue 5 (and NemoClaw #7127's recipe) gives it, flag for flag.
QWEN_BASE_ARGS = [
    "vllm", "serve", QWEN_MODEL,
    "--tensor-parallel-size", "1",
    "--pipeline-parallel-size", "1",
    "--data-parallel-size", "1",
    "--port", "8000",
    "--trust-remote-code",
    "--max-model-len", "262144",
    "--gpu-memory-utilization", "0.4",
    "--dtype", "auto",
    "--quantization", "modelopt",
    "--kv-cache-dtype", "fp8",
    "--attention-backend", "flashinfer",
    "--moe-backend", "marlin",
    "--max-num-seqs", "4",
    "--max-num-batched-tokens", "8192",
    "--enable-chunked-prefill",
    "--async-scheduling",
    "--enable-prefix-caching",
    "--enable-auto-tool-choice",
    "--tool-call-parser", "qwen3_coder",
    "--reasoning-parser", "qwen3",
    "--speculative-config", QWEN_SPECULATIVE_CONFIG,
    "--load-format", "fastsafetensors",
]  # fmt: skip

_ASYNC_OFF = {"remove": ["--async-scheduling"], "add": ["--no-async-scheduling"]}


def _nemoclaw_spark_qwen(host: str) -> dict[str, Any]:
    return {
        "name": "nemoclaw-spark-qwen",
        "host": host,
        "launcher": {
            "type": "docker",
            "image": "nvcr.io/nvidia/vllm:26.05.post1-py3",
            "container_name": "nemoclaw-vllm",
            "pull": "never",
            "restart": "unless-stopped",
            "gpus": "all",
            "ipc": "host",
            "volumes": ["~/.cache/huggingface:/root/.cache/huggingface"],
            "env": {"HF_HOME": "/root/.cache/huggingface"},
            "labels": {"com.nvidia.nemoclaw.managed-vllm": "true"},
            "port": 8000,
            "entrypoint": "/bin/bash",
            "shell_wrap": True,
        },
        "pre": "pip install vllm[fastsafetensors]",
        "base_args": list(QWEN_BASE_ARGS),
        "profiles": {
            "A": {"description": "NemoClaw managed command as shipped"},
            "B": {"description": "async scheduling off", **_ASYNC_OFF},
            "C": {"description": "MTP off", "remove": ["--speculative-config"]},
            "D": {
                "description": "async scheduling and MTP off",
                "remove": ["--async-scheduling", "--speculative-config"],
                "add": ["--no-async-scheduling"],
            },
            "E": {
                "description": "async and MTP off, 32K context, one sequence",
                "remove": ["--async-scheduling", "--speculative-config"],
                "set": {
                    "--max-model-len": "32768",
                    "--max-num-seqs": "1",
                    "--max-num-batched-tokens": "4096",
                },
                "add": ["--no-async-scheduling"],
            },
        },
        "repeat": 1,
        "cold_start": {"enabled": True, "drop_caches": False},
        # NemoClaw's own readiness timeout for this recipe.
        "startup_timeout_s": 1800,
        "workloads": [
            {
                "type": "tool_conversation",
                "name": "tool_conversation",
                "seed": 0,
                "sessions": 2,
                "target_prompt_tokens": 65536,
                "max_turns": 200,
                "request_timeout_s": 360,
                "tool_result_bytes": 4096,
            }
        ],
        "gates": {"fail_on_kernel": ["nv_err", "xid", "gsp", "uvm"]},
        "abort_on_failure": False,
    }


ONE_MILLION = "1048576"
SOAK_S = 1800


def _nemoclaw_spark_isolation(host: str) -> dict[str, Any]:
    """Reboot before every start (a cold boot, as after the freezes in the field report), five
    repetitions, a 30 min two-session soak; freezes are counted, not fatal."""
    spec = _nemoclaw_spark_qwen(host)
    args = list(QWEN_BASE_ARGS)
    args[args.index("--gpu-memory-utilization") + 1] = "0.9"
    spec.update(
        name="nemoclaw-spark-isolation",
        base_args=args,
        profiles={
            "mtp-on": {"description": "NemoClaw managed command at 0.9 / 262K, MTP on"},
            "mtp-off": {"description": "0.9 / 262K, MTP off", "remove": ["--speculative-config"]},
            "1m": {
                "description": "0.9 / 1M context, MTP on",
                "set": {"--max-model-len": ONE_MILLION},
                "env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
            },
        },
        repeat=5,
        cold_start={"enabled": True, "drop_caches": False, "reboot": True, "settle_s": 30},
        workloads=[
            {
                "type": "tool_conversation",
                "name": "soak",
                "seed": 0,
                "sessions": 2,
                "duration_s": SOAK_S,
                "target_prompt_tokens": 131072,
                "max_turns": 200,
                "request_timeout_s": 360,
                "tool_result_bytes": 4096,
            }
        ],
        gates={"fail_on_kernel": ["nv_err", "xid", "gsp", "uvm"], "fail_on_freeze": True},
        freeze_wait_s=1800,
        abort_on_freeze=False,
    )
    return spec


PRESETS = {
    "nemoclaw-spark-qwen": _nemoclaw_spark_qwen,
    "nemoclaw-spark-isolation": _nemoclaw_spark_isolation,
}
PRESET_DESCRIPTIONS = {
    "nemoclaw-spark-qwen": "NemoClaw's managed Qwen3.6 NVFP4 vLLM launch on DGX Spark, "
    "five profiles A-E (async scheduling / MTP off, 32K context), a long tool-call conversation",
    "nemoclaw-spark-isolation": "Cold-boot campaign: the managed Qwen command at 0.9 / 262K "
    "with MTP on and off, then 1M (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); a reboot before every "
    "start, 5 repetitions, a 30 min soak each; freezes counted, k of N per profile",
}
DEFAULT_HOST = "spark-01"


def preset_names() -> list[str]:
    return sorted(PRESETS)


class PresetOut(OutModel):
    """A built-in preset: its profiles (name → description) and workload names."""

    name: str
    description: str
    profiles: dict[str, str]
    workloads: list[str]


def preset_summary(host: str = DEFAULT_HOST) -> list[PresetOut]:
    out = []
    for name in preset_names():
        data = PRESETS[name](host)
        out.append(
            PresetOut.model_validate(
                {
                    "name": name,
                    "description": PRESET_DESCRIPTIONS.get(name, ""),
                    "profiles": {p: v.get("description", "") for p, v in data["profiles"].items()},
                    "workloads": [w["name"] for w in data.get("workloads", [])],
                }
            )
        )
    return out


def _preset_data(name: str, host: str) -> dict[str, Any]:
    try:
        return PRESETS[name](host)
    except KeyError:
        raise SpecError(f"unknown preset {name!r}; known: {', '.join(preset_names())}") from None


def get_preset(name: str, host: str) -> MatrixSpec:
    """A preset as a validated spec for the given registered host."""
    return validate_spec(_preset_data(name, host))


def preset_yaml(name: str, host: str = DEFAULT_HOST) -> str:
    """A preset as YAML, every field spelled out, ready to edit and submit."""
    spec = get_preset(name, host)
    header = f"# freezewatch matrix preset {name}; set `host` to your registered host.\n"
    body = yaml.safe_dump(
        spec.model_dump(mode="json"), sort_keys=False, width=10_000, allow_unicode=True
    )
    return header + body
