"""The tool benchmark's data: well formed, and the same tools the example agent serves."""

import importlib.util
import json

import jsonschema

from scripts.bench.tools import DATA, REPO, load_requests, load_tools, score, summarize
from sub250.sdk.tools import ToolSet


def test_the_requests_name_real_tools_with_arguments_their_schemas_accept():
    tools = {t.name: t for t in load_tools()}
    requests = load_requests()
    need = [r for r in requests if r.tool is not None]
    assert len(need) >= 20 and len(requests) - len(need) >= 10
    assert len({r.text for r in requests}) == len(requests)
    for r in need:
        schema = tools[r.tool].parameters
        for key, value in r.arguments.items():
            jsonschema.validate(value, schema["properties"][key])


def test_the_data_holds_the_tools_scripts_support_agent_registers():
    spec = importlib.util.spec_from_file_location("support_agent", REPO / "scripts" / "support_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools = ToolSet()
    module.register(tools, pool=None)
    assert tools.definitions() == json.loads((DATA / "support_tools.json").read_text())


def test_scoring_wants_the_tool_and_the_exact_arguments():
    tools = load_tools()
    req = next(r for r in load_requests() if r.tool == "lookup_order")
    number = req.arguments["order_number"]
    assert score(req, "lookup_order", json.dumps({"order_number": number}), tools)["args_right"]
    assert not score(req, "lookup_order", json.dumps({"order_number": "1" + number}), tools)["args_right"]
    assert not score(req, "open_warranty_claim", "{}", tools)["tool_right"]
    assert not score(req, None, None, tools)["tool_right"]
    human = next(r for r in load_requests() if r.tool == "transfer_to_human")
    assert score(human, "transfer_to_human", '{"reason": "asked"}', tools)["args_right"]
    assert not score(human, "transfer_to_human", '{"reason": " "}', tools)["args_right"]  # free text: non-empty
    none = next(r for r in load_requests() if r.tool is None)
    assert score(none, None, None, tools) == {"tool_right": True, "args_right": True, "invalid": False}
    assert not score(req, "lookup_order", None, tools, invalid=True)["tool_right"]
    rows = [{"expected": "lookup_order", "tool_right": True, "args_right": False, "invalid": False, "ms": 10.0},
            {"expected": None, "tool_right": True, "args_right": True, "invalid": False, "ms": 1.0}]
    s = summarize(rows)
    assert (s["tool_right_pct"], s["args_right_pct"], s["declined_pct"], s["accuracy_pct"]) == (100.0, 0.0, 100.0, 50.0)
