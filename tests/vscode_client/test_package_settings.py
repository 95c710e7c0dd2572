"""The extension's settings that choose what runs or where data goes are machine-scoped: a workspace's
``.vscode/settings.json`` (a cloned repository) cannot turn the LLM on, pick its endpoint or the environment
variable whose key is sent, or swap the compilers that verification runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CLIENT = Path(__file__).resolve().parents[2] / "vscode-client"
MACHINE_ONLY = [
    "xpiler.server.python",
    "xpiler.llm.enabled",
    "xpiler.llm.endpoint",
    "xpiler.llm.model",
    "xpiler.llm.apiKeyEnv",
    "xpiler.toolchains.nvcc",
    "xpiler.toolchains.hipcc",
    "xpiler.toolchains.gcc",
]


def contributed_settings() -> dict[str, Any]:
    manifest = json.loads((CLIENT / "package.json").read_text(encoding="utf-8"))
    configuration = manifest["contributes"]["configuration"]
    sections = configuration if isinstance(configuration, list) else [configuration]
    return {name: schema for section in sections for name, schema in section["properties"].items()}


def test_settings_that_run_code_or_send_data_are_machine_scoped() -> None:
    settings = contributed_settings()
    for name in MACHINE_ONLY:
        assert name in settings, name
        assert settings[name].get("scope") == "machine", f"{name} must be machine-scoped"
    unlisted = [name for name in settings if name.startswith(("xpiler.llm.", "xpiler.toolchains.")) and name not in MACHINE_ONLY]
    assert unlisted == [], f"new LLM/toolchain settings must be machine-scoped and listed here: {unlisted}"
