"""Chat templates (shared/spec/gguf.md §5): the C++ built-ins equal llama.cpp's
llama_chat_apply_template for every format and conversation; on SmolLM2 the built-in path equals
the GGUF's own Jinja template rendered with jinja2 (default system prompt included); on Gemma 3
the built-in equals Google's Jinja template for user/model turns, and the one intended
difference with a system message is pinned down.
"""
from __future__ import annotations

import pytest
from data.tokenizer_corpus_refs import llama_chat_apply, llama_cpp_or_skip

import gaacrt
from gaacrt import chat

# Google's Gemma 3 instruction-tuned chat template, as stored in `tokenizer.chat_template` of
# ggml-org's gemma-3-*-it GGUF files. The gemma-3-270m file used here has no template of its own.
GEMMA3_JINJA = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n        {%- endfor -%}\n    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\\n'}}\n{%- endif -%}\n"
)

SMOLLM_DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def m(role, content):
    return {"role": role, "content": content}


CONVERSATIONS = {
    "user": [m("user", "Hi")],
    "system+user": [m("system", "You are helpful."), m("user", "Hi")],
    "multi-turn": [m("user", "Hello"), m("assistant", "Hi! How can I help?"), m("user", "Tell me a joke.")],
    "system+multi-turn": [m("system", "Be brief."), m("user", "What is 2+2?"), m("assistant", "4."),
                          m("user", "And 3+3?")],
    "untrimmed": [m("user", "  spaced out \n"), m("assistant", "\tok  "), m("user", "\n\nnewlines\n")],
    "unicode": [m("user", "Café ☕ 日本語 👨‍👩‍👧"), m("assistant", "Très bien!")],
    "empty-content": [m("user", "")],
    "special-text": [m("user", "<|im_start|>user\nignore<|im_end|> <start_of_turn>")],
}


@pytest.fixture(scope="module")
def smol(smollm2_path):
    return gaacrt.Tokenizer(smollm2_path)


@pytest.fixture(scope="module")
def gemma(gemma3_path):
    return gaacrt.Tokenizer(gemma3_path)


@pytest.mark.parametrize("name", gaacrt._core.chat_template_names())
def test_builtin_formats_equal_llama_cpp(name):
    llama_cpp_or_skip()
    extra = {"system-after-user": [m("user", "a"), m("system", "late system"), m("assistant", "b")],
             "assistant-first": [m("assistant", "I start."), m("user", "ok")], "none": []}
    for conv in list(CONVERSATIONS.values()) + list(extra.values()):
        for add in (True, False):
            assert gaacrt._core.apply_chat_template_builtin(name, conv, add) == llama_chat_apply(name, conv, add), \
                (name, conv, add)


def test_spec_examples_of_the_builtins():
    conv = [m("system", "You are helpful."), m("user", "Hi")]
    apply = gaacrt._core.apply_chat_template_builtin
    assert apply("chatml", conv) == ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                     "<|im_start|>assistant\n")
    assert apply("gemma", conv) == "<start_of_turn>user\nYou are helpful.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    assert apply("llama3", [m("user", " Hi ")]) == ("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                                                   "<|start_header_id|>assistant<|end_header_id|>\n\n")


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("conv", list(CONVERSATIONS))
def test_smollm2_builtin_equals_its_jinja_template(smol, conv, add_generation_prompt):
    messages = CONVERSATIONS[conv]
    jinja = smol.apply_chat_template(messages, add_generation_prompt, jinja=True)
    builtin = smol.apply_chat_template(messages, add_generation_prompt, jinja=False)
    assert builtin == jinja
    # The Jinja side really is the GGUF's template, rendered unmodified (SmolLM2 adds no BOS).
    assert jinja == chat.render(smol.chat_template, messages, add_generation_prompt=add_generation_prompt,
                                bos_token=smol.bos_text, eos_token=smol.eos_text)


def test_smollm2_template_injects_its_default_system_prompt(smol):
    assert smol.builtin_chat_format == "chatml"
    out = smol.apply_chat_template([m("user", "Hi")], jinja=False)
    assert out.startswith(f"<|im_start|>system\n{SMOLLM_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi")
    assert SMOLLM_DEFAULT_SYSTEM not in smol.apply_chat_template([m("system", "S"), m("user", "Hi")], jinja=False)
    # like the Jinja loop, an empty conversation gets no system turn
    assert smol.apply_chat_template([], jinja=False) == smol.apply_chat_template([], jinja=True) == \
        "<|im_start|>assistant\n"
    # plain chatml (by name) has no default system prompt
    assert smol.apply_chat_template([m("user", "Hi")], jinja=False, template="chatml").startswith("<|im_start|>user")


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("conv", ["user", "multi-turn", "untrimmed", "unicode", "empty-content", "special-text"])
def test_gemma_builtin_equals_official_jinja_for_user_model_turns(gemma, conv, add_generation_prompt):
    messages = CONVERSATIONS[conv]
    jinja = gemma.apply_chat_template(messages, add_generation_prompt, template=GEMMA3_JINJA)
    assert not jinja.startswith("<bos>"), "the tokenizer adds BOS: the template's {{ bos_token }} is stripped"
    assert gemma.apply_chat_template(messages, add_generation_prompt, jinja=False) == jinja


def test_gemma_with_a_system_message(gemma):
    """The built-in (llama.cpp's) trims the system text; Google's template keeps it as written.
    Identical for a system message without surrounding whitespace."""
    conv = CONVERSATIONS["system+multi-turn"]
    assert gemma.apply_chat_template(conv, jinja=False) == gemma.apply_chat_template(conv, template=GEMMA3_JINJA)
    padded = [m("system", "  Be brief. \n"), m("user", "Hi")]
    builtin = gemma.apply_chat_template(padded, jinja=False)
    jinja = gemma.apply_chat_template(padded, template=GEMMA3_JINJA)
    assert builtin == "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    assert jinja == "<start_of_turn>user\n  Be brief. \n\n\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_gemma_file_without_template_uses_the_architecture_builtin(gemma):
    assert gemma.chat_template is None and gemma.builtin_chat_format == "gemma"
    conv = CONVERSATIONS["multi-turn"]
    assert gemma.apply_chat_template(conv) == gemma.apply_chat_template(conv, jinja=False)


def test_jinja_rendering_follows_transformers_conventions(gemma):
    with pytest.raises(Exception, match="Conversation roles must alternate"):
        gemma.apply_chat_template([m("user", "a"), m("user", "b")], template=GEMMA3_JINJA)
    src = "{{ strftime_now('%Y') }}|{{ messages | tojson }}|{{ extra }}|{% for x in [1,2,3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"
    out = chat.render(src, [m("user", "é")], extra="kw")
    year, js, kw, loop = out.split("|")
    assert year.isdigit() and js == '[{"role": "user", "content": "é"}]' and kw == "kw" and loop == "1"
    assert chat.strip_added_specials("<s>x</s>", bos_token="<s>", eos_token="</s>", add_bos=True, add_eos=False) == "x</s>"


@pytest.mark.parametrize("source,expected", [
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "chatml"),
    ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
     "{{ m.content | trim }}<|eot_id|>{% endfor %}", "llama3"),
    ("{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}", "gemma"),
    ("{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}", "llama2"),
    ("<<SYS>>\n{{ system }}\n<</SYS>> [INST]", "llama2-sys"),
    ("{{ bos_token + '[INST] ' + content.strip() }} [INST] <<SYS>>", "llama2-sys-strip"),
    ("[SYSTEM_PROMPT]{{ s }}[/SYSTEM_PROMPT][INST]", "mistral-v7"),
    ("{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}<|end|>\n{% endfor %}<|assistant|>", "phi3"),
    ("mistral-v3-tekken", "mistral-v3-tekken"),
])
def test_builtin_format_is_detected_from_a_jinja_source(source, expected):
    conv = CONVERSATIONS["system+multi-turn"]
    assert gaacrt._core.apply_chat_template_builtin(source, conv) == gaacrt._core.apply_chat_template_builtin(expected, conv)


@pytest.mark.parametrize("source", ["{{ messages }}", "<|im_start|>{{ x }}<|im_sep|>", "no-such-name"])
def test_unknown_template_is_a_clear_error(source):
    with pytest.raises(gaacrt.GaacrtError) as e:
        gaacrt._core.apply_chat_template_builtin(source, [m("user", "hi")])
    assert e.value.kind == "unknown_template" and e.value.area == "chat"


def test_chat_prompt_tokenizes_into_control_tokens(smol):
    prompt = smol.apply_chat_template([m("user", "Hi")])
    ids = smol.tokenize(prompt, add_special=False, parse_special=True)
    assert ids[0] == 1 and ids.count(1) == 3 and ids.count(2) == 2  # <|im_start|> x3, <|im_end|> x2
    assert smol.detokenize(ids, unparse_special=True) == prompt
