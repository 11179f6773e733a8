"""Linearizability checking (Wing–Gong–Lowe search, Knossos/Porcupine style).

``check(ops, model="cas-register", time_budget=10.0, memory_budget_mb=...)``
is the entry point; models live in :mod:`.models`.
"""

from .checker import DEFAULT_MEMORY_BUDGET_MB, check
from .models import MODELS, Model, ModelError, make_model

__all__ = ["check", "MODELS", "Model", "ModelError", "make_model", "DEFAULT_MEMORY_BUDGET_MB"]
