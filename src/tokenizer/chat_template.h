// chat_template.h — built-in chat formats in C++ (shared/spec/gguf.md §5): what llama.cpp's
// llama_chat_apply_template does, no Jinja engine. A format is chosen by name ("chatml",
// "llama3", "gemma", "mistral-v7", ...) or detected from a Jinja source by substring heuristics
// in llama.cpp's order (§5.1); a model without `tokenizer.chat_template` gets one by architecture
// (gemma* -> gemma, anything else -> chatml, llama.cpp's default).
//
// One extension over llama.cpp: a chatml template that injects a fixed system message when the
// conversation does not start with one (SmolLM2: "You are a helpful AI assistant named SmolLM,
// trained by Hugging Face") is detected, and the built-in output then equals what the GGUF's own
// Jinja template renders.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace gaacrt {
class GGUFFile;
}

namespace gaacrt::tok {

enum class ChatFormat {
  CHATML, LLAMA2, LLAMA2_SYS, LLAMA2_SYS_BOS, LLAMA2_SYS_STRIP, MISTRAL_V1, MISTRAL_V3,
  MISTRAL_V3_TEKKEN, MISTRAL_V7, MISTRAL_V7_TEKKEN, PHI3, ZEPHYR, LLAMA3, GEMMA,
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::CHATML;
  std::string default_system;  // CHATML only: injected when the first message is not "system"
  std::string source;          // the Jinja source it was detected from ("" for a name)

  const char* name() const;
};

// All built-in names, in a stable order (the ones accepted by chat_template_from_name).
std::vector<std::string> chat_template_names();

// A built-in by exact name; Error("chat", "unknown_template") for anything else.
ChatTemplate chat_template_from_name(std::string_view name);

// A built-in name, or a Jinja source recognised by its markers; Error("chat",
// "unknown_template") naming the problem when neither (including chat formats llama.cpp knows
// but gaacrt does not implement, e.g. phi-4's <|im_sep|>).
ChatTemplate chat_template_detect(std::string_view name_or_source);

// The model's template: `tokenizer.chat_template` when present, else by architecture.
ChatTemplate chat_template_for_model(const GGUFFile& f);

// Formats a conversation; add_assistant appends the opening of the assistant's turn (formats
// that have none, like llama2 and mistral, append nothing).
std::string chat_apply(const ChatTemplate& t, const std::vector<ChatMessage>& messages, bool add_assistant);

}  // namespace gaacrt::tok
