import json

import pytest

from collector.matrix.argv import (
    command_line,
    describe_profile,
    profile_args,
    remote_argv,
    served_model,
    stop_argv,
)
from collector.matrix.presets import (
    QWEN_SPECULATIVE_CONFIG,
    get_preset,
    preset_names,
    preset_yaml,
)
from collector.matrix.spec import SpecError, load_spec, validate_spec
from collector.remote.commands import HomePath, remote_command, shell_join

# Issue 5's managed command, written out literally.
SERVE_A = (
    "pip install vllm[fastsafetensors] && vllm serve nvidia/Qwen3.6-35B-A3B-NVFP4"
    " --tensor-parallel-size 1 --pipeline-parallel-size 1 --data-parallel-size 1 --port 8000"
    " --trust-remote-code --max-model-len 262144 --gpu-memory-utilization 0.4 --dtype auto"
    " --quantization modelopt --kv-cache-dtype fp8 --attention-backend flashinfer"
    " --moe-backend marlin --max-num-seqs 4 --max-num-batched-tokens 8192"
    " --enable-chunked-prefill --async-scheduling --enable-prefix-caching"
    " --enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser qwen3"
    " --speculative-config"
    """ '{"method":"mtp","num_speculative_tokens":3,"moe_backend":"triton"}'"""
    " --load-format fastsafetensors"
)
DOCKER_A = [
    "docker",
    "run",
    "--pull=never",
    "--restart",
    "unless-stopped",
    "--gpus",
    "all",
    "--ipc=host",
    "-v",
    "~/.cache/huggingface:/root/.cache/huggingface",
    "-e",
    "HF_HOME=/root/.cache/huggingface",
    "--label",
    "com.nvidia.nemoclaw.managed-vllm=true",
    "-p",
    "8000:8000",
    "--name",
    "nemoclaw-vllm",
    "--entrypoint",
    "/bin/bash",
    "nvcr.io/nvidia/vllm:26.05.post1-py3",
    "-lc",
    SERVE_A,
]


@pytest.fixture
def preset():
    return get_preset("nemoclaw-spark-qwen", "spark-01")


def test_profile_a_is_the_managed_command_flag_for_flag(preset):
    assert remote_argv(preset, "A") == DOCKER_A
    assert stop_argv(preset) == ["docker", "rm", "-f", "nemoclaw-vllm"]
    assert served_model(preset) == "nvidia/Qwen3.6-35B-A3B-NVFP4"
    assert preset.effective_health_url == "http://127.0.0.1:8000/health"


def test_preset_yaml_round_trips(preset):
    assert load_spec(preset_yaml("nemoclaw-spark-qwen", "spark-01")) == preset


def _serve(spec, profile):
    return remote_argv(spec, profile)[-1]


def test_b_to_e_differ_from_a_only_as_the_issue_says(preset):
    a = SERVE_A
    assert _serve(preset, "B") == a.replace(" --async-scheduling", "") + " --no-async-scheduling"
    spec_cfg = " --speculative-config '" + QWEN_SPECULATIVE_CONFIG + "'"
    assert _serve(preset, "C") == a.replace(spec_cfg, "")
    d = a.replace(spec_cfg, "").replace(" --async-scheduling", "") + " --no-async-scheduling"
    assert _serve(preset, "D") == d
    e = (
        d.replace("--max-model-len 262144", "--max-model-len 32768")
        .replace("--max-num-seqs 4", "--max-num-seqs 1")
        .replace("--max-num-batched-tokens 8192", "--max-num-batched-tokens 4096")
    )
    assert _serve(preset, "E") == e
    for profile in "BCDE":
        assert remote_argv(preset, profile)[:-1] == DOCKER_A[:-1]
    assert describe_profile(preset, "A") == "base"
    assert describe_profile(preset, "C") == "remove --speculative-config"


def _spec(base_args, profile, launcher=None, pre=None):
    return validate_spec(
        {
            "host": "h",
            "launcher": launcher or {"type": "command"},
            "base_args": base_args,
            "pre": pre,
            "profiles": {"P": profile},
        }
    )


def test_remove_drops_value_in_both_forms_and_keeps_boolean_neighbours():
    base = ["vllm", "serve", "m", "--speculative-config={}", "--enforce-eager", "--port", "1"]
    spec = _spec(base, {"remove": ["--speculative-config", "--port"]})
    assert profile_args(spec, "P") == ["vllm", "serve", "m", "--enforce-eager"]
    spec = _spec(
        ["vllm", "--speculative-config", "{}", "--enforce-eager"],
        {"remove": ["--speculative_config"]},
    )
    assert profile_args(spec, "P") == ["vllm", "--enforce-eager"]


def test_set_replaces_in_place_keeps_form_and_appends_when_absent():
    base = ["vllm", "serve", "m", "--max-model-len=100", "--max-num-seqs", "4", "--x"]
    spec = _spec(
        base,
        {
            "set": {"--max-model-len": 200, "--max-num-seqs": "-1", "--x": False, "--new": True},
            "add": ["--tail", "v"],
        },
    )
    assert profile_args(spec, "P") == [
        "vllm",
        "serve",
        "m",
        "--max-model-len=200",
        "--max-num-seqs",
        "-1",
        "--new",
        "--tail",
        "v",
    ]
    # A negative number is a value, not a flag.
    spec = _spec(["vllm", "--max-model-len", "-1", "--y"], {"set": {"--y": "z"}})
    assert profile_args(spec, "P") == ["vllm", "--max-model-len", "-1", "--y", "z"]


def test_command_launcher_argv_is_the_argv_with_env_and_pre():
    spec = _spec(
        ["vllm", "serve", "m"],
        {"env": {"A": "1", "GONE": None}},
        launcher={"type": "command", "env": {"GONE": "x", "KEEP": "y"}},
        pre="source venv/bin/activate",
    )
    assert remote_argv(spec, "P") == [
        "env",
        "-u",
        "GONE",
        "KEEP=y",
        "A=1",
        "/bin/sh",
        "-c",
        "source venv/bin/activate && exec vllm serve m",
    ]
    assert stop_argv(spec) == []
    plain = _spec(["vllm", "serve", "m"], {})
    assert remote_argv(plain, "P") == ["vllm", "serve", "m"]


def test_a_home_volume_reaches_docker_from_the_remote_home(preset):
    """The preset's Hugging Face cache: `~` becomes the host's "$HOME" (quoted), in the line
    `matrix argv` prints and in the exec request the runner sends, which ends with that line."""
    argv = remote_argv(preset, "A")
    [volume] = [a for a in argv if isinstance(a, HomePath)]
    assert volume == "~/.cache/huggingface:/root/.cache/huggingface"
    line = command_line(preset, "A")
    assert ' -v "$HOME"/.cache/huggingface:/root/.cache/huggingface ' in line
    assert remote_command(argv).endswith(" " + line)
    # Any other `~` is an ordinary character, passed on verbatim.
    assert shell_join(["a b", "~/x y", HomePath("~/x y"), HomePath("~")]) == (
        "'a b' '~/x y' \"$HOME\"'/x y' \"$HOME\""
    )


@pytest.mark.parametrize(
    ("launcher", "message"),
    [
        ({"image": "--privileged"}, "image '--privileged' must not start with '-'"),
        ({"image": "-v/:/host"}, "must not start with '-'"),
        ({"image": "img --privileged"}, "or hold spaces"),
        ({"volumes": ["~root/x:/x"]}, "~user is not supported"),
        ({"volumes": ["--privileged"]}, "would be read as a docker option"),
    ],
)
def test_docker_values_that_would_be_options_are_refused(launcher, message):
    docker = {"type": "docker", "image": "img", "container_name": "c"} | launcher
    data = {"host": "h", "launcher": docker, "base_args": ["vllm"], "profiles": {"A": {}}}
    with pytest.raises(SpecError) as err:
        validate_spec(data)
    assert "launcher.docker." in str(err.value) and message in str(err.value)


def test_unknown_profile_is_a_spec_error(preset):
    with pytest.raises(SpecError, match=r"unknown profile 'Z'.*A, B, C, D, E"):
        remote_argv(preset, "Z")


def test_docker_without_shell_wrap_passes_args_after_image():
    launcher = {
        "type": "docker",
        "image": "img",
        "container_name": "c",
        "shell_wrap": False,
        "entrypoint": None,
        "gpus": None,
        "ipc": None,
        "restart": None,
        "pull": None,
    }
    spec = _spec(["vllm", "serve", "m"], {}, launcher=launcher)
    assert remote_argv(spec, "P") == [
        "docker",
        "run",
        "-p",
        "8000:8000",
        "--name",
        "c",
        "img",
        "vllm",
        "serve",
        "m",
    ]
    assert json.loads(json.dumps(remote_argv(spec, "P")))[0] == "docker"


def test_the_isolation_preset_is_the_field_reports_next_matrix():
    assert "nemoclaw-spark-isolation" in preset_names()
    spec = get_preset("nemoclaw-spark-isolation", "spark-01")
    assert list(spec.profiles) == ["mtp-on", "mtp-off", "1m"]
    assert spec.repeat == 5 and all(spec.reboots(p, r) for p in spec.profiles for r in (1, 5))
    assert spec.gates.fail_on_freeze is True and spec.abort_on_freeze is False
    (soak,) = spec.workloads
    assert (soak.sessions, soak.duration_s) == (2, 1800)
    on, off, long = (profile_args(spec, p) for p in spec.profiles)
    for args in (on, off, long):
        assert args[args.index("--gpu-memory-utilization") + 1] == "0.9"
    assert on[on.index("--max-model-len") + 1] == "262144" and "--speculative-config" in on
    assert "--speculative-config" not in off
    assert long[long.index("--max-model-len") + 1] == "1048576"
    argv = remote_argv(spec, "1m")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in argv
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" not in remote_argv(spec, "mtp-on")
