// chat_template.cpp — built-in chat formats, their detection from Jinja sources, and the SmolLM2
// default-system extension (shared/spec/gguf.md §5.1–5.2). Outputs are byte-identical to
// llama.cpp's llama_chat_apply_template for the same name and messages.
#include "chat_template.h"

#include <sstream>

#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace gaacrt::tok {
namespace {

struct Named {
  const char* name;
  ChatFormat format;
};
constexpr Named kNames[] = {
    {"chatml", ChatFormat::CHATML},
    {"llama2", ChatFormat::LLAMA2},
    {"llama2-sys", ChatFormat::LLAMA2_SYS},
    {"llama2-sys-bos", ChatFormat::LLAMA2_SYS_BOS},
    {"llama2-sys-strip", ChatFormat::LLAMA2_SYS_STRIP},
    {"mistral-v1", ChatFormat::MISTRAL_V1},
    {"mistral-v3", ChatFormat::MISTRAL_V3},
    {"mistral-v3-tekken", ChatFormat::MISTRAL_V3_TEKKEN},
    {"mistral-v7", ChatFormat::MISTRAL_V7},
    {"mistral-v7-tekken", ChatFormat::MISTRAL_V7_TEKKEN},
    {"phi3", ChatFormat::PHI3},
    {"zephyr", ChatFormat::ZEPHYR},
    {"llama3", ChatFormat::LLAMA3},
    {"gemma", ChatFormat::GEMMA},
};

// Python's str.strip() set, as llama.cpp's trim(): ASCII whitespace only.
std::string trim(const std::string& s) {
  auto sp = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  size_t b = 0, e = s.size();
  while (b < e && sp(s[b])) ++b;
  while (e > b && sp(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool contains(std::string_view s, std::string_view x) { return s.find(x) != std::string_view::npos; }

// A chatml Jinja source that writes a literal system turn of its own
// ('<|im_start|>system\n...<|im_end|>' in a string literal, newline written either as is or as
// "\n") is a template with a default system prompt: return that prompt, or "".
std::string find_default_system(std::string_view src) {
  for (std::string_view head : {"<|im_start|>system\n", "<|im_start|>system\\n"}) {
    for (size_t at = src.find(head); at != std::string_view::npos; at = src.find(head, at + 1)) {
      // The turn must open a string literal and the prompt must stay inside it: no closing
      // quote and no Jinja expression or statement before <|im_end|>.
      if (at == 0 || (src[at - 1] != '\'' && src[at - 1] != '"')) continue;
      const char quote = src[at - 1];
      const size_t body = at + head.size();
      const size_t end = src.find("<|im_end|>", body);
      if (end == std::string_view::npos) continue;
      std::string_view text = src.substr(body, end - body);
      if (contains(text, "{{") || contains(text, "{%") || text.find(quote) != std::string_view::npos) continue;
      std::string out(text);
      if (head.back() == 'n' && head[head.size() - 2] == '\\') {  // an escaped source: unescape \n
        std::string u;
        for (size_t i = 0; i < out.size(); ++i) {
          if (out[i] == '\\' && i + 1 < out.size() && out[i + 1] == 'n') { u += '\n'; ++i; } else { u += out[i]; }
        }
        out.swap(u);
      }
      if (!out.empty()) return out;
    }
  }
  return {};
}

[[noreturn]] void unknown(const std::string& what) { throw Error("chat", "unknown_template", what); }

void apply_llama2(std::ostringstream& ss, ChatFormat f, const std::vector<ChatMessage>& chat) {
  const bool system_block = f != ChatFormat::LLAMA2;
  const bool bos_in_history = f == ChatFormat::LLAMA2_SYS_BOS;
  const bool strip = f == ChatFormat::LLAMA2_SYS_STRIP;
  bool inside_turn = true;  // the first "[INST] " has no <s>: the tokenizer adds BOS
  ss << "[INST] ";
  for (const ChatMessage& m : chat) {
    const std::string content = strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      ss << (bos_in_history ? "<s>[INST] " : "[INST] ");
    }
    if (m.role == "system") {
      if (system_block) ss << "<<SYS>>\n" << content << "\n<</SYS>>\n\n";
      else ss << content << "\n";  // no system slot: prepended to the first user message
    } else if (m.role == "user") {
      ss << content << " [/INST]";
    } else {
      ss << content << "</s>";
      inside_turn = false;
    }
  }
}

void apply_mistral(std::ostringstream& ss, ChatFormat f, const std::vector<ChatMessage>& chat) {
  if (f == ChatFormat::MISTRAL_V7 || f == ChatFormat::MISTRAL_V7_TEKKEN) {
    const char* sp = f == ChatFormat::MISTRAL_V7 ? " " : "";
    for (const ChatMessage& m : chat) {
      if (m.role == "system") ss << "[SYSTEM_PROMPT]" << sp << m.content << "[/SYSTEM_PROMPT]";
      else if (m.role == "user") ss << "[INST]" << sp << m.content << "[/INST]";
      else ss << sp << m.content << "</s>";
    }
    return;
  }
  const char* lead = f == ChatFormat::MISTRAL_V1 ? " " : "";
  const char* trail = f == ChatFormat::MISTRAL_V3_TEKKEN ? "" : " ";
  const bool trim_assistant = f == ChatFormat::MISTRAL_V3;
  bool inside_turn = false;
  for (const ChatMessage& m : chat) {
    if (!inside_turn) {
      ss << lead << "[INST]" << trail;
      inside_turn = true;
    }
    if (m.role == "system") {
      ss << m.content << "\n\n";
    } else if (m.role == "user") {
      ss << m.content << lead << "[/INST]";
    } else {
      ss << trail << (trim_assistant ? trim(m.content) : m.content) << "</s>";
      inside_turn = false;
    }
  }
}

}  // namespace

const char* ChatTemplate::name() const {
  for (const Named& n : kNames)
    if (n.format == format) return n.name;
  return "?";
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> out;
  for (const Named& n : kNames) out.emplace_back(n.name);
  return out;
}

ChatTemplate chat_template_from_name(std::string_view name) {
  for (const Named& n : kNames)
    if (name == n.name) return ChatTemplate{n.format, {}, {}};
  std::string list;
  for (const Named& n : kNames) list += std::string(list.empty() ? "" : ", ") + n.name;
  unknown(strfmt("no built-in chat template named '%.*s' (built-ins: %s)", (int)name.size(), name.data(),
                 list.c_str()));
}

ChatTemplate chat_template_detect(std::string_view s) {
  for (const Named& n : kNames)
    if (s == n.name) return ChatTemplate{n.format, {}, {}};
  ChatTemplate t;
  t.source = std::string(s);
  // llama.cpp's heuristics, in its order: the first marker found decides.
  if (contains(s, "<|im_start|>")) {
    if (contains(s, "<|im_sep|>")) unknown("the template is phi-4's (<|im_sep|>), which gaacrt does not build in");
    if (contains(s, "<end_of_utterance>")) unknown("the template is SmolVLM's (<end_of_utterance>), which gaacrt does not build in");
    t.format = ChatFormat::CHATML;
    t.default_system = find_default_system(s);
    return t;
  }
  if (s.rfind("mistral", 0) == 0 || contains(s, "[INST]")) {
    if (contains(s, "[SYSTEM_PROMPT]")) {
      t.format = ChatFormat::MISTRAL_V7;
    } else if (contains(s, "' [INST] ' + system_message") || contains(s, "[AVAILABLE_TOOLS]")) {
      // Mistral's official v1 / v3 / v3-tekken templates.
      t.format = contains(s, " [INST]") ? ChatFormat::MISTRAL_V1
                 : contains(s, "\"[INST]\"") ? ChatFormat::MISTRAL_V3_TEKKEN
                                             : ChatFormat::MISTRAL_V3;
    } else if (contains(s, "content.strip()")) {
      t.format = ChatFormat::LLAMA2_SYS_STRIP;
    } else if (contains(s, "bos_token + '[INST]")) {
      t.format = ChatFormat::LLAMA2_SYS_BOS;
    } else if (contains(s, "<<SYS>>")) {
      t.format = ChatFormat::LLAMA2_SYS;
    } else {
      t.format = ChatFormat::LLAMA2;
    }
    return t;
  }
  if (contains(s, "<|assistant|>") && contains(s, "<|end|>")) {
    t.format = ChatFormat::PHI3;
    return t;
  }
  if (contains(s, "<start_of_turn>")) {
    t.format = ChatFormat::GEMMA;
    return t;
  }
  if (contains(s, "<|start_header_id|>") && contains(s, "<|end_header_id|>")) {
    t.format = ChatFormat::LLAMA3;
    return t;
  }
  unknown("the chat template matches none of the built-in formats (chatml, llama2/mistral, phi3, gemma, "
          "llama3); render it with Jinja instead");
}

ChatTemplate chat_template_for_model(const GGUFFile& f) {
  const GGUFValue* v = f.find("tokenizer.chat_template");
  if (v) return chat_template_detect(v->as_string("tokenizer.chat_template"));
  const std::string arch = f.architecture();
  if (arch.rfind("gemma", 0) == 0) return chat_template_from_name("gemma");
  return chat_template_from_name("chatml");  // llama.cpp's default when a model has none
}

std::string chat_apply(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_assistant) {
  std::ostringstream ss;
  switch (t.format) {
    case ChatFormat::CHATML: {
      // A default system turn is written only in front of a non-empty conversation that does
      // not start with a system message (the Jinja template does it inside its message loop).
      if (!t.default_system.empty() && !messages.empty() && messages[0].role != "system")
        ss << "<|im_start|>system\n" << t.default_system << "<|im_end|>\n";
      for (const ChatMessage& m : messages) ss << "<|im_start|>" << m.role << "\n" << m.content << "<|im_end|>\n";
      if (add_assistant) ss << "<|im_start|>assistant\n";
      break;
    }
    case ChatFormat::LLAMA2: case ChatFormat::LLAMA2_SYS: case ChatFormat::LLAMA2_SYS_BOS:
    case ChatFormat::LLAMA2_SYS_STRIP:
      apply_llama2(ss, t.format, messages);
      break;
    case ChatFormat::MISTRAL_V1: case ChatFormat::MISTRAL_V3: case ChatFormat::MISTRAL_V3_TEKKEN:
    case ChatFormat::MISTRAL_V7: case ChatFormat::MISTRAL_V7_TEKKEN:
      apply_mistral(ss, t.format, messages);
      break;
    case ChatFormat::PHI3: case ChatFormat::ZEPHYR: {
      const char* end = t.format == ChatFormat::PHI3 ? "<|end|>\n" : "<|endoftext|>\n";
      for (const ChatMessage& m : messages) ss << "<|" << m.role << "|>\n" << m.content << end;
      if (add_assistant) ss << "<|assistant|>\n";
      break;
    }
    case ChatFormat::LLAMA3:
      for (const ChatMessage& m : messages)
        ss << "<|start_header_id|>" << m.role << "<|end_header_id|>\n\n" << trim(m.content) << "<|eot_id|>";
      if (add_assistant) ss << "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::GEMMA: {
      // No system turn: system text (trimmed) is kept and written at the top of the next user
      // turn; "assistant" is called "model".
      std::string system;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += trim(m.content);
          continue;
        }
        const std::string role = m.role == "assistant" ? "model" : m.role;
        ss << "<start_of_turn>" << role << "\n";
        if (!system.empty() && role != "model") {
          ss << system << "\n\n";
          system.clear();
        }
        ss << trim(m.content) << "<end_of_turn>\n";
      }
      if (add_assistant) ss << "<start_of_turn>model\n";
      break;
    }
  }
  return ss.str();
}

}  // namespace gaacrt::tok
