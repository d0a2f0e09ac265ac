"""Function calling: which client tool a turn needs, and its arguments, as the GA API's ``function_call``.

- :mod:`.policy`: what the profile chooses (``[tools]``: which selector, its threshold, the argument budget);
- :mod:`.prompt`: the tools written out for the model, and the JSON schemas its output must follow;
- :mod:`.selector`: the embedding selector (the question's vector against each tool's description);
- :mod:`.caller`: one turn's decision - a :class:`~.caller.ToolCall` with arguments valid for the tool's schema,
  or none;
- :mod:`.results`: a tool's output said aloud when the profile's model does not phrase answers itself.
"""

from sub250.tools.caller import ToolArgumentsError, ToolCall, ToolCaller
from sub250.tools.policy import ToolPolicy

__all__ = ["ToolArgumentsError", "ToolCall", "ToolCaller", "ToolPolicy"]
