import json

import pytest

from collector.matrix.spec import SpecError, load_spec, validate_spec

GOOD = """
host: spark-01
launcher: {type: command}
base_args: [vllm, serve, m, --port, "8001", --async-scheduling]
profiles:
  A: {}
  B: {remove: [--async-scheduling]}
workloads:
  - {type: tool_conversation, sessions: 2}
  - {type: command, name: agent, argv: [./run.sh], timeout_s: 60}
cold_start: false
schedule: "0 3 * * *"
"""


def test_good_spec_loads_with_defaults():
    spec = load_spec(GOOD)
    assert spec.server_port == 8001
    assert spec.effective_health_url == "http://127.0.0.1:8001/health"
    assert spec.cold_start.enabled is False and spec.cold_start.drop_caches is False
    assert spec.workloads[0].request_timeout_s == 360
    assert spec.workloads[0].tool_result_bytes == 4096
    assert spec.gates.fail_on_kernel == ["nv_err", "xid", "gsp", "uvm"]
    assert spec.abort_on_failure is False
    assert spec.repeat == 1


def test_json_text_and_file_path(tmp_path):
    import yaml

    data = yaml.safe_load(GOOD)
    assert load_spec(json.dumps(data)) == load_spec(GOOD)
    path = tmp_path / "m.yaml"
    path.write_text(GOOD)
    assert load_spec(str(path)) == load_spec(path) == load_spec(GOOD)


def _error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(text)
    return str(info.value)


def test_errors_name_the_field_path():
    bad = GOOD.replace("sessions: 2", "sessions: 0").replace(
        "type: command, name", "type: shell, name"
    )
    message = _error(bad)
    assert (
        "workloads.0.tool_conversation.sessions: Input should be greater than or equal to 1"
        in message
    )
    assert "workloads.1: Input tag 'shell' found using 'type'" in message


def test_missing_and_unknown_fields():
    message = _error(
        "host: h\nlauncher: {type: docker}\nbase_args: [x]\nprofiles: {A: {}}\nrepeats: 2\n"
    )
    assert "launcher.docker.image: Field required" in message
    assert "launcher.docker.container_name: Field required" in message
    assert "repeats: Extra inputs are not permitted" in message


def test_profile_removing_an_absent_flag_is_caught():
    message = _error(GOOD.replace("remove: [--async-scheduling]", "remove: [--async-schedulng]"))
    assert "profiles.B.remove.0: --async-schedulng is not in base_args" in message


def test_bad_values():
    assert "profiles.B.remove.0: '--x=1' is not a flag name" in _error(
        GOOD.replace("[--async-scheduling]", "['--x=1']")
    )
    assert "schedule: not a 5-field cron expression" in _error(
        GOOD.replace("0 3 * * *", "every day")
    )
    assert "gates.fail_on_kernel.0" in _error(GOOD + "gates: {fail_on_kernel: [nv_errr]}\n")
    assert "duplicate workload name 'agent'" in _error(
        GOOD.replace(
            "timeout_s: 60}", "timeout_s: 60}\n  - {type: command, name: agent, argv: [x]}"
        )
    )
    assert "invalid YAML" in _error("host: [unclosed")
    assert "top level must be a mapping" in _error("- a\n- b\n")


CAMPAIGN = """
host: spark-01
launcher: {type: command}
base_args: [vllm, serve, m, --port, "8001", --speculative-config, "{}"]
profiles:
  A: {}
  B: {remove: [--speculative-config], cold_start: {reboot: [2, 3]}}
  C: {cold_start: {reboot: false, settle_s: 5}}
repeat: 3
cold_start: {reboot: true, reboot_argv: [sudo, -n, /sbin/reboot]}
workloads:
  - {type: tool_conversation, sessions: 2, duration_s: 3600}
"""


def test_cold_boots_per_spec_profile_and_repetition():
    spec = load_spec(CAMPAIGN)
    assert [spec.reboots("A", r) for r in (1, 2, 3)] == [True, True, True]
    assert [spec.reboots("B", r) for r in (1, 2, 3)] == [False, True, True]
    assert [spec.reboots("C", r) for r in (1, 2, 3)] == [False, False, False]
    assert spec.cold_start_for("B").reboot_argv == ["sudo", "-n", "/sbin/reboot"]
    assert spec.cold_start_for("C").settle_s == 5 and spec.cold_start_for("A").settle_s == 30
    assert spec.cold_start.reboot_timeout_s == 900
    assert spec.workloads[0].duration_s == 3600
    assert (spec.freeze_wait_s, spec.abort_on_freeze, spec.gates.fail_on_freeze) == (
        1800,
        False,
        True,
    )


def test_defaults_keep_the_container_cold_start():
    spec = load_spec(GOOD)
    assert spec.cold_start.reboot is False
    assert spec.cold_start.reboot_argv == ["sudo", "-n", "systemctl", "reboot"]
    assert not any(spec.reboots(p, 1) for p in spec.profiles)


def test_reboots_of_repetitions_that_never_run_are_an_error():
    text = CAMPAIGN.replace("reboot: [2, 3]", "reboot: [2, 4]")
    with pytest.raises(SpecError) as exc:
        load_spec(text)
    assert "profiles.B.cold_start.reboot: repetitions [4] beyond repeat 3" in str(exc.value)


def test_a_launcher_or_workload_may_name_its_type_as_the_key():
    """`launcher: {docker: {...}}` and `- command: {...}` (the guard file's form, and the one
    error paths suggest) mean the same as the `type:` form."""
    base = {"host": "h", "base_args": ["vllm"], "profiles": {"A": {}}}
    short = validate_spec(
        base
        | {
            "launcher": {"docker": {"image": "img", "container_name": "c"}},
            "workloads": [{"command": {"name": "w", "argv": ["x"]}}, {"tool_conversation": {}}],
        }
    )
    long = validate_spec(
        base
        | {
            "launcher": {"type": "docker", "image": "img", "container_name": "c"},
            "workloads": [
                {"type": "command", "name": "w", "argv": ["x"]},
                {"type": "tool_conversation"},
            ],
        }
    )
    assert short == long
    with pytest.raises(SpecError, match=r"launcher\.docker\.image: Field required"):
        validate_spec(base | {"launcher": {"docker": {"container_name": "c"}}})
    with pytest.raises(SpecError, match="launcher"):
        validate_spec(base | {"launcher": {"podman": {"image": "img"}}})
