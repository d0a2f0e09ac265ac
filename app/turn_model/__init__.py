"""Our own end-of-turn model: P(the caller is done) from the words at a pause (trained in this repo).

``features.py`` turns a transcript into the model's inputs, the same way
for training (``scripts/train_turn_model.py``) and serving; ``model.py`` scores them with the shipped head
(``head.npz``, its card in ``CARD.md``).
"""

from __future__ import annotations

from sub250.errors import ConfigError
from sub250.profiles import Profile


def words_reader(profile: Profile) -> str:
    """``[vad] reader``: "llm" (the default) or "model"."""
    value = profile.stage("vad").get("reader", "llm")
    if value not in ("llm", "model"):
        raise ConfigError(f"[vad] reader = {value!r} is neither \"llm\" nor \"model\"",
                          "\"model\" reads the words at a pause with our end-of-turn model (app/turn_model), "
                          "\"llm\" with the served LLM")
    return str(value)
