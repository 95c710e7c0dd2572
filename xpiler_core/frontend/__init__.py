"""Frontend: parse CUDA / HIP / BANG C / C with tree-sitter-cuda, build the kernel model and AST."""

from xpiler_core.frontend.dialect import Dialect, detect_dialect
from xpiler_core.frontend.source import ParsedSource, parse_file, parse_text

__all__ = ["Dialect", "ParsedSource", "detect_dialect", "parse_file", "parse_text"]
