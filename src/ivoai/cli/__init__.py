"""The `ivoai` command.

`main()` dispatches the agent launch commands (`ivoai codex|claude|opencode`) and the memory hook
runner (`ivoai memory hook EVENT`) before importing Typer, rich or pydantic: launching the official
client, or answering a host hook, must cost little more than starting the interpreter. Everything
else goes through the Typer application in `_app`, whose sub-commands are imported lazily (see
`_lazy`).
"""

from __future__ import annotations

import sys

LAUNCH_COMMANDS = frozenset({"codex", "claude", "opencode"})


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:2] == ["memory", "hook"]:  # run by Codex/Claude hooks once per event: as light as a launch
        from ivoai.client.memoryhooks.runner import main as hook_main

        return hook_main(args[2:], real_process=argv is None)
    if args and args[0] in LAUNCH_COMMANDS:
        from ivoai.cli._launch import launch_main

        code = launch_main(args)
        if argv is None:
            # A real `ivoai codex…` process: the client has exited and the launcher has torn down
            # everything it started, so skip interpreter finalization (module teardown costs as
            # much as ivoai's own launch work); stdio is flushed first.
            import os

            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        return code
    if args and args[0] == "auto" and args[1:2] != ["plan"]:  # AUTO (issue 15): parsed by hand like a launch
        from ivoai.cli.auto import auto_main

        return auto_main(args[1:])
    from ivoai.cli._app import run

    return run(args)
