"""The conversations every chat template is rendered with (tests/llm/chat/).

make_chat_fixtures.py records what transformers' apply_chat_template makes of
each (the text, or the exception) into fixtures/; check_chat_live.py renders
them again through the installed transformers and through the C driver.
Numbers here are ints or non-integral floats only: the C side reads JSON
through cJSON, which cannot tell 2.0 from 2 (docs/llm.md says so).
"""

# Each checkpoint's template file (templates/) and special tokens.
TEMPLATES = {
    "meta-llama-Llama-2-7b-chat-hf.jinja": ("<s>", "</s>"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": (None, "<|im_end|>"),
    "Qwen-Qwen3-0.6B.jinja": (None, "<|im_end|>"),
    "Qwen-QwQ-32B.jinja": (None, "<|im_end|>"),
    "mistralai-Mistral-7B-Instruct-v0.1.jinja": ("<s>", "</s>"),
    "mistralai-Mistral-7B-Instruct-v0.2.jinja": ("<s>", "</s>"),
    "mistralai-Mistral-7B-Instruct-v0.3.jinja": ("<s>", "</s>"),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("<s>", "</s>"),
    "microsoft-Phi-3-mini-4k-instruct.jinja": ("<s>", "<|endoftext|>"),
    "microsoft-Phi-3-small-8k-instruct.jinja": ("<|endoftext|>", "<|endoftext|>"),
    "microsoft-Phi-3.5-mini-instruct.jinja": ("<s>", "<|endoftext|>"),
    "google-gemma-7b-it.jinja": ("<bos>", "<eos>"),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": ("<|begin_of_text|>", "<|im_end|>"),
    "HuggingFaceTB-SmolLM3-3B.jinja": (None, "<|im_end|>"),
    # More of llama.cpp's copies, for the constructs they use (macros, documents, str.format, Markup's
    # escaping, {% filter %}, ensure_ascii, generators, min): placeholder special tokens, as only the
    # interpreter is under test here.
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "meetkai-functionary-medium-v3.1.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "meetkai-functionary-medium-v3.2.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "openai-gpt-oss-120b.jinja": ("<|startoftext|>", "<|return|>"),
    "google-gemma-4-31B-it.jinja": ("<bos>", "<eos>"),
    "ibm-granite-granite-3.3-2B-Instruct.jinja": ("<|end_of_text|>", "<|end_of_text|>"),
    "tencent-Hy3.jinja": ("<s>", "</s>"),
    "fireworks-ai-llama-3-firefunction-v2.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "Reka-Edge.jinja": ("<s>", "</s>"),
    "llama-cpp-deepseek-r1.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "openbmb-MiniCPM5-1B.jinja": ("<s>", "</s>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "Qwen3.5-4B.jinja": (None, "<|im_end|>"),
    "Qwen3-Coder.jinja": (None, "<|im_end|>"),
    "moonshotai-Kimi-K2.jinja": ("[BOS]", "[EOS]"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": ("<|begin_of_text|>", "<|im_end|>"),
}

# strftime_now's clock in every case: 2026-02-07 10:11:12 UTC.
NOW = 1770459072

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "threshold": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web for «anything» — quotes \"ok\" and back\\slashes",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "return": {"type": "string"},
    },
}

DOCS = [{"title": "Doc 1", "text": "Paris is the capital of France."},
        {"title": "Köln", "text": "Köln liegt am Rhein. 🌉", "source": "wiki"}]
SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello! How are you?"}
A1 = {"role": "assistant", "content": "I'm fine, thanks. How can I help?"}
U2 = {"role": "user", "content": "What's the capital of France?"}
A2 = {"role": "assistant", "content": "  Paris.  "}
UNICODE = {"role": "user", "content": "  Grüße aus Köln 👋 — 你好，世界!\n\tTabs, \"quotes\", 'single', back\\slash, {{ braces }} {% tags %}  \n"}
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "call12345", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "unit": "celsius"}}}],
}
CALL_WITH_TEXT = {
    "role": "assistant",
    "content": "Let me check.",
    "tool_calls": [{"id": "call12345", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
}
TWO_CALLS = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "call00002", "type": "function", "function": {"name": "search", "arguments": {"q": "Köln ☂"}}},
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"}
RESULT1 = {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "sunny"}
RESULT2 = {"role": "tool", "tool_call_id": "call00002", "name": "search", "content": "rain later"}
FINAL = {"role": "assistant", "content": "It is 21.5 °C and clear in Paris."}
PARTS = {"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "text", "text": "this."}]}
THINK = {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHi there!"}
REASONED = {"role": "assistant", "content": "Paris.", "reasoning_content": "France's capital is Paris."}


def _case(name, messages, gen=True, **kw):
    c = {"name": name, "messages": messages, "add_generation_prompt": gen, "now": NOW}
    c.update(kw)
    return c


def cases():
    """Every case, the same for each template (what a template refuses is recorded as its error)."""
    out = []
    for gen in (True, False):
        g = "gen" if gen else "nogen"
        out += [
            _case(f"user only ({g})", [U1], gen),
            _case(f"system and user ({g})", [SYS, U1], gen),
            _case(f"multi-turn with system ({g})", [SYS, U1, A1, U2], gen),
            _case(f"multi-turn without system ({g})", [U1, A1, U2], gen),
            _case(f"ends with the assistant ({g})", [U1, A1, U2, A2], gen),
        ]
    out += [
        _case("unicode and markup in content", [SYS, UNICODE, A1, UNICODE]),
        _case("empty strings", [{"role": "system", "content": ""}, {"role": "user", "content": ""}]),
        _case("content as a list of text parts", [PARTS]),
        _case("system only", [SYS]),
        _case("assistant first", [A1, U1]),
        _case("two users in a row", [U1, U2]),
        _case("two assistants in a row", [U1, A1, A2]),
        _case("unknown role", [U1, {"role": "narrator", "content": "Meanwhile..."}]),
        _case("a system message after the first", [U1, A1, SYS, U2]),
        _case("null-valued keys are dropped", [{"role": "user", "content": "hi", "name": None, "tool_calls": None}]),
        _case("extra message keys", [{"role": "user", "content": "hi", "name": "alice", "id": 7, "score": 0.25}]),
        _case("empty conversation", []),
        # Tools.
        _case("tools offered", [SYS, U1], tools=[WEATHER_TOOL, SEARCH_TOOL]),
        _case("tools offered without system", [U2], tools=[WEATHER_TOOL]),
        _case("tools with an empty list", [U1], tools=[]),
        _case("tool call and result", [U2, CALL, RESULT, FINAL], gen=False, tools=[WEATHER_TOOL]),
        _case("tool call and result, then generate", [SYS, U2, CALL, RESULT], tools=[WEATHER_TOOL]),
        _case("tool call with text", [U2, CALL_WITH_TEXT, RESULT], tools=[WEATHER_TOOL]),
        _case("two tool calls and two results", [U2, TWO_CALLS, RESULT1, RESULT2], tools=[WEATHER_TOOL, SEARCH_TOOL]),
        _case("tool call without tools offered", [U2, CALL, RESULT]),
        _case("tool result as a mapping", [U2, CALL, {"role": "tool", "tool_call_id": "call12345",
                                                      "content": {"temperature": 21.5}}], tools=[WEATHER_TOOL]),
        _case("bad tool call id", [U2, {"role": "assistant", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]}],
            tools=[WEATHER_TOOL]),
        # Reasoning (Qwen3, QwQ, DeepSeek-R1, SmolLM3 read it).
        _case("assistant with a think block", [U1, THINK, U2]),
        _case("assistant with reasoning_content", [U2, REASONED]),
        _case("reasoning_content last, generate", [U1, A1, U2, REASONED], gen=False),
        _case("enable_thinking false", [U1], extra={"enable_thinking": False}),
        # Template variables.
        _case("date_string given", [SYS, U1], extra={"date_string": "01 Jan 2025"}),
        _case("tools in the system message", [SYS, U2], tools=[WEATHER_TOOL],
              extra={"tools_in_user_message": False}),
        _case("builtin tools", [SYS, U2, {"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "brave_search", "arguments": {"query": "weather Paris"}}}]},
            {"role": "ipython", "content": "sunny"}],
            extra={"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}),
        _case("bos_token overridden", [U1], extra={"bos_token": "<BOS>"}),
        # continue_final_message: the last message left open for the model to go on.
        _case("continue the final message", [SYS, U2, {"role": "assistant", "content": "The capital is"}], gen=False,
              continue_final_message=True),
        _case("continue a message with trailing spaces", [U2, {"role": "assistant", "content": "Well,  \n "}],
              gen=False, continue_final_message="content"),
        _case("continue a message of parts", [U2, {"role": "assistant", "content": [
            {"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two"}]}], gen=False,
            continue_final_message=True),
        _case("continue the reasoning", [U2, {"role": "assistant", "content": "",
                                              "reasoning_content": "Let me think about"}], gen=False,
              continue_final_message="reasoning_content"),
        _case("continue with a generation prompt", [U2, A2], continue_final_message=True),
        _case("continue a field the message lacks", [U2, A2], gen=False, continue_final_message="thinking"),
        _case("documents", [SYS, U2], documents=DOCS),
        _case("documents and tools", [U2], documents=DOCS, tools=[WEATHER_TOOL]),
        _case("non-ASCII tool schema", [U1], tools=[SEARCH_TOOL]),
        # Variables and tool shapes particular templates expect (Fireworks' firefunction, Cohere's Command R+).
        _case("functions and datetime variables", [SYS, U2], extra={
            "functions": "[{\"name\": \"get_weather\"}]", "datetime": "2026-02-07 10:11"}),
        _case("cohere-style tools", [SYS, U2], tools=[{
            "name": "internet_search", "description": "Search the internet",
            "parameter_definitions": {"query": {"description": "what to search", "type": "str", "required": True}}}]),
    ]
    return out
