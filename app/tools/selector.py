"""The embedding selector: which tool's description is closest to the question (cosine of unit vectors).

The question's vector is retrieval's (no second embedding on the turn's path); each tool's text - its name
with spaces for ``_``, its description and its parameters' descriptions - is embedded once and cached by that
text, so a session that sends the same tools again, or another session with the same tools, costs nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from sub250.protocol.tools import FunctionTool

#: Tool texts whose vectors are kept (a few sessions' tool sets).
MAX_CACHED = 1024


def tool_text(tool: FunctionTool) -> str:
    """The tool's name (words), its description and its parameters' descriptions: what it is compared by."""
    name = tool.name.replace("_", " ").replace("-", " ")
    params = tool.parameters.get("properties") or {}
    about = [f"{k.replace('_', ' ')}: {v['description']}" for k, v in params.items()
             if isinstance(v, dict) and isinstance(v.get("description"), str)]
    return " ".join([f"{name}: {tool.description}" if tool.description else name, *about])


class EmbeddingSelector:
    def __init__(self, embed: Callable[[list[str]], Awaitable[np.ndarray]], *, max_cached: int = MAX_CACHED) -> None:
        """``embed``: texts -> unit vectors (n, dim), off the event loop."""
        self._embed = embed
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.max_cached = max_cached

    async def _vectors(self, tools: Sequence[FunctionTool]) -> np.ndarray:
        texts = [tool_text(t) for t in tools]
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for text, vector in zip(missing, await self._embed(missing), strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)
        for text in texts:
            self._cache.move_to_end(text)
        while len(self._cache) > self.max_cached:
            self._cache.popitem(last=False)
        return np.stack([self._cache[t] for t in texts])

    async def rank(self, question_vector: np.ndarray, tools: Sequence[FunctionTool]) -> list[tuple[FunctionTool, float]]:
        """The tools, closest first, with their cosine to the question."""
        if not tools:
            return []
        scores = await self._vectors(tools) @ np.asarray(question_vector, dtype=np.float32).reshape(-1)
        order = np.argsort(-scores, kind="stable")
        return [(tools[i], float(scores[i])) for i in order]
