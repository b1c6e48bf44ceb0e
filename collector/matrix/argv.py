"""Turn a spec and a profile into the exact argv started (and stopped) on the host."""

from __future__ import annotations

import shlex

from collector.matrix.flags import flag_key, flag_value, item_key, split_args
from collector.matrix.spec import DockerLauncher, MatrixSpec, Profile, SpecError
from collector.remote.commands import HomePath, shell_join


def _render_set(item: list[str] | None, flag: str, value: object) -> list[str] | None:
    """The item that sets flag to value, keeping the `--flag=value` form when it was used."""
    if value is None or value is False:
        return None
    if value is True:
        return [item[0].split("=", 1)[0] if item else flag]
    text = str(value)
    if item and "=" in item[0]:
        return [f"{item[0].split('=', 1)[0]}={text}"]
    return [item[0] if item else flag, text]


def _profile(spec: MatrixSpec, profile: str) -> Profile:
    try:
        return spec.profiles[profile]
    except KeyError:
        known = ", ".join(spec.profiles)
        raise SpecError(f"unknown profile {profile!r}; the spec has: {known}") from None


def profile_args(spec: MatrixSpec, profile: str) -> list[str]:
    """The server argv for a profile: base_args, then remove, then set (in place), then add."""
    prof = _profile(spec, profile)
    head, items = split_args(spec.base_args)
    removed = {flag_key(f) for f in prof.remove}
    items = [item for item in items if item_key(item) not in removed]
    for flag, value in prof.set.items():
        key = flag_key(flag)
        positions = [i for i, item in enumerate(items) if item_key(item) == key]
        replacement = _render_set(items[positions[0]] if positions else None, flag, value)
        if positions:
            first = positions[0]
            items = [item for i, item in enumerate(items) if i not in positions[1:]]
            if replacement is None:
                del items[first]
            else:
                items[first] = replacement
        elif replacement is not None:
            items.append(replacement)
    return head + [token for item in items for token in item] + list(prof.add)


def profile_env(spec: MatrixSpec, profile: str) -> dict[str, str]:
    """The launcher env with the profile's changes applied (None unsets)."""
    env = dict(spec.launcher.env)
    for key, value in _profile(spec, profile).env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def serve_command(spec: MatrixSpec, profile: str) -> str:
    """The shell string that starts the server: `pre && <shlex-joined serve argv>`."""
    joined = shlex.join(profile_args(spec, profile))
    return f"{spec.pre} && {joined}" if spec.pre else joined


def remote_argv(spec: MatrixSpec, profile: str) -> list[str]:
    """The exact argv the runner starts on the host for this profile (a docker volume from
    ``~`` is a ``HomePath``: the host's shell puts the SSH user's $HOME there)."""
    launcher = spec.launcher
    if not isinstance(launcher, DockerLauncher):
        args = profile_args(spec, profile)
        if spec.pre:
            args = ["/bin/sh", "-c", f"{spec.pre} && exec {shlex.join(args)}"]
        env = profile_env(spec, profile)
        unset = [k for k, v in _profile(spec, profile).env.items() if v is None]
        prefix = [token for k in unset for token in ("-u", k)]
        prefix += [f"{k}={v}" for k, v in env.items()]
        return ["env", *prefix, *args] if prefix else args
    argv = ["docker", "run"]
    if launcher.pull:
        argv.append(f"--pull={launcher.pull}")
    if launcher.restart:
        argv += ["--restart", launcher.restart]
    if launcher.gpus:
        argv += ["--gpus", launcher.gpus]
    if launcher.ipc:
        argv.append(f"--ipc={launcher.ipc}")
    for volume in launcher.volumes:
        # `~/...` is the SSH user's home on the host, as in a shell there (docker itself
        # would take `~` for a directory name).
        argv += ["-v", HomePath(volume) if volume.startswith("~") else volume]
    for key, value in profile_env(spec, profile).items():
        argv += ["-e", f"{key}={value}"]
    for key, value in launcher.labels.items():
        argv += ["--label", f"{key}={value}"]
    argv += ["-p", f"{launcher.published_port}:{launcher.port}", "--name", launcher.container_name]
    argv += launcher.extra_args
    if launcher.entrypoint:
        argv += ["--entrypoint", launcher.entrypoint]
    argv.append(launcher.image)
    if launcher.shell_wrap:
        argv += ["-lc", serve_command(spec, profile)]
    elif spec.pre:
        raise SpecError("launcher.shell_wrap: `pre` needs shell_wrap (it is a shell prelude)")
    else:
        argv += profile_args(spec, profile)
    return argv


def stop_argv(spec: MatrixSpec) -> list[str]:
    """What stops the server: `docker rm -f NAME`; nothing for a command launcher (the runner
    kills its process group)."""
    if isinstance(spec.launcher, DockerLauncher):
        return ["docker", "rm", "-f", spec.launcher.container_name]
    return []


def command_line(spec: MatrixSpec, profile: str) -> str:
    """The command line the runner starts for this profile, as the host's shell reads it: the
    end of its SSH exec request (``remote.commands.remote_command`` of ``remote_argv`` puts
    the process-group wrapper in front)."""
    return shell_join(remote_argv(spec, profile))


def served_model(spec: MatrixSpec) -> str | None:
    """The model name clients send: `--served-model-name`, else the positional after `serve`."""
    named = flag_value(spec.base_args, "--served-model-name")
    if named:
        return named
    head, _ = split_args(spec.base_args)
    if "serve" in head and head.index("serve") + 1 < len(head):
        return head[head.index("serve") + 1]
    return None


def describe_profile(spec: MatrixSpec, profile: str) -> str:
    """A one-line summary of what the profile changes against the base (for reports)."""
    prof = _profile(spec, profile)
    parts = [f"remove {flag}" for flag in prof.remove]
    for flag, value in prof.set.items():
        if value is True:
            parts.append(f"set {flag}")
        elif value is False or value is None:
            parts.append(f"remove {flag}")
        else:
            parts.append(f"set {flag}={value}")
    if prof.add:
        parts.append(f"add {shlex.join(prof.add)}")
    parts += [f"env {k}={'(unset)' if v is None else v}" for k, v in prof.env.items()]
    return ", ".join(parts) if parts else "base"
