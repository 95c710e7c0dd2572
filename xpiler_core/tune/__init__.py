"""Auto-tuning: intra-pass parameter search, inter-pass MCTS, stored trial records, streamed progress."""

from xpiler_core.tune.config import Config, Step
from xpiler_core.tune.tuner import (
    Candidate,
    TuneEvent,
    TuneOptions,
    TuneResult,
    find_spec_for,
    reproduce,
    tune,
    tune_stream,
)

__all__ = ["Candidate", "Config", "Step", "TuneEvent", "TuneOptions", "TuneResult", "find_spec_for", "reproduce",
           "tune", "tune_stream"]
