import argparse
import io
import json
import shlex

from collector.matrix.cli import add_matrix_parser, run_matrix_cli
from collector.matrix.presets import preset_yaml


def _run(argv):
    parser = argparse.ArgumentParser()
    add_matrix_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    code = run_matrix_cli(parser.parse_args(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_preset_and_argv(tmp_path):
    code, text, _ = _run(["matrix", "preset", "nemoclaw-spark-qwen", "--host", "lab-spark"])
    assert code == 0 and text == preset_yaml("nemoclaw-spark-qwen", "lab-spark")
    spec = tmp_path / "m.yaml"
    spec.write_text(text)
    code, line, _ = _run(["matrix", "argv", str(spec), "E"])
    code_json, listed, _ = _run(["matrix", "argv", str(spec), "E", "--json"])
    assert code == code_json == 0
    argv = json.loads(listed)
    assert argv[:2] == ["docker", "run"] and "--max-model-len 32768" in argv[-1]
    home = [a.replace("~", "$HOME", 1) if a.startswith("~/") else a for a in argv]
    assert shlex.split(line) == home  # the volume from ~ is the host's "$HOME"
    code_exec, request, _ = _run(["matrix", "argv", str(spec), "E", "--exec"])
    assert code_exec == 0 and request.startswith("sh -c ") and request.endswith(" " + line)


def test_an_image_that_is_an_option_is_a_clear_error(tmp_path):
    spec = tmp_path / "m.yaml"
    spec.write_text(
        "host: h\nlauncher: {type: docker, image: --privileged, container_name: c}\n"
        "base_args: [vllm]\nprofiles: {A: {}}\n"
    )
    code, out, err = _run(["matrix", "argv", str(spec), "A"])
    assert code == 2 and out == ""
    assert "launcher.docker.image: image '--privileged' must not start with '-'" in err


def test_errors_exit_2(tmp_path):
    code, _, err = _run(["matrix", "preset", "nope"])
    assert code == 2 and "unknown preset 'nope'" in err
    spec = tmp_path / "bad.yaml"
    spec.write_text("host: h\n")
    code, _, err = _run(["matrix", "argv", str(spec), "A"])
    assert code == 2 and "launcher: Field required" in err
