"""Frontend: parse CUDA / HIP / BANG C / C with tree-sitter-cuda, build the kernel model and AST."""

from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.model import KernelModel, build_model, load_model
from xpiler_core.frontend.source import ParsedSource, parse_file, parse_text

__all__ = [
    "Dialect",
    "KernelModel",
    "ParsedSource",
    "build_model",
    "detect_dialect",
    "load_model",
    "parse_file",
    "parse_text",
]
