// tokenizer_bind.cpp — gaacrt._core.Tokenizer and TokenDecoder: the C++ tokenizer
// (src/tokenizer/tokenizer.h) and built-in chat templates (chat_template.h), converting types
// only. The Python class gaacrt.Tokenizer (python/gaacrt/tokenizer.py) subclasses Tokenizer to
// add Jinja rendering of the GGUF's own chat template.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "gguf/gguf_reader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace nb = nanobind;

namespace gaacrt::py {
namespace {

// The model's tokenizer plus what the Python side needs about its chat template.
struct PyTokenizer {
  std::unique_ptr<tok::Tokenizer> tk;
  std::string path;
  std::string architecture;
  bool has_template = false;
  std::string template_source;  // tokenizer.chat_template ("" when absent)

  explicit PyTokenizer(const std::string& p) : path(p) {
    GGUFFile f(p);
    tk = std::make_unique<tok::Tokenizer>(f);
    architecture = f.architecture();
    if (const GGUFValue* v = f.find("tokenizer.chat_template")) {
      has_template = true;
      template_source = std::string(v->as_string("tokenizer.chat_template"));
    }
  }
  const tok::Vocab& vocab() const { return tk->vocab(); }

  tok::ChatTemplate builtin(const std::string* name_or_source) const {
    if (name_or_source) return tok::chat_template_detect(*name_or_source);
    if (has_template) return tok::chat_template_detect(template_source);
    return tok::chat_template_from_name(architecture.rfind("gemma", 0) == 0 ? "gemma" : "chatml");
  }
};

struct PyDecoder {
  tok::StreamDecoder dec;
};

nb::str utf8_to_str(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

nb::bytes to_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

// Text arguments: str (UTF-8 encoded; lone surrogates are an error) or bytes (passed through
// untouched, which is how malformed UTF-8 reaches the tokenizer).
std::string text_arg(nb::handle h) {
  if (PyBytes_Check(h.ptr())) return std::string(PyBytes_AS_STRING(h.ptr()), PyBytes_GET_SIZE(h.ptr()));
  if (PyByteArray_Check(h.ptr())) return std::string(PyByteArray_AS_STRING(h.ptr()), PyByteArray_GET_SIZE(h.ptr()));
  if (PyUnicode_Check(h.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
    if (!s) throw nb::python_error();
    return std::string(s, static_cast<size_t>(n));
  }
  throw nb::type_error("text must be str or bytes");
}

std::vector<int32_t> ids_arg(nb::handle seq) {
  std::vector<int32_t> ids;
  for (nb::handle h : seq) ids.push_back(nb::cast<int32_t>(h));
  return ids;
}

std::vector<tok::ChatMessage> messages_arg(nb::handle msgs) {
  std::vector<tok::ChatMessage> out;
  for (nb::handle m : msgs) {
    nb::object role = m["role"], content = m["content"];
    if (!PyUnicode_Check(content.ptr()))
      throw nb::type_error("built-in chat templates take text content only (message 'content' must be a str)");
    out.push_back({text_arg(role), text_arg(content)});
  }
  return out;
}

nb::object opt_id(int32_t id) { return id == tok::kNoToken ? nb::object(nb::none()) : nb::object(nb::int_(id)); }

}  // namespace

void bind_tokenizer(nb::module_& m) {
  nb::class_<PyDecoder>(m, "TokenDecoder",
                        "Streaming detokenizer: feed(id) returns the new text, never half of a UTF-8 "
                        "character (incomplete bytes wait for the next token); flush() returns what is left.")
      .def("feed", [](PyDecoder& d, int32_t id) { return utf8_to_str(d.dec.push(id)); }, nb::arg("id"))
      .def("flush", [](PyDecoder& d) { return utf8_to_str(d.dec.flush()); })
      .def_prop_ro("pending", [](const PyDecoder& d) { return d.dec.pending(); },
                   "bytes held back because they do not yet form a whole character");

  nb::class_<PyTokenizer>(m, "Tokenizer",
                          "The tokenizer stored in a GGUF file (byte-level BPE or SentencePiece), "
                          "token for token the same as llama.cpp's.")
      .def(nb::init<const std::string&>(), nb::arg("path"), nb::call_guard<nb::gil_scoped_release>())
      .def("tokenize", [](const PyTokenizer& t, nb::handle text, bool add_special, bool parse_special) {
            const std::string s = text_arg(text);
            std::vector<int32_t> ids;
            {
              nb::gil_scoped_release unlock;
              ids = t.tk->tokenize(s, add_special, parse_special);
            }
            return ids;
          }, nb::arg("text"), nb::arg("add_special") = true, nb::arg("parse_special") = false,
          "Token ids of `text` (str, or bytes for raw input). add_special: BOS/EOS as the model "
          "wants them; parse_special: also turn control-token texts like '<|im_start|>' into tokens.")
      .def("detokenize", [](const PyTokenizer& t, nb::handle ids, bool remove_special, bool unparse_special) {
            const std::vector<int32_t> v = ids_arg(ids);
            return utf8_to_str(t.tk->detokenize(v.data(), v.size(), remove_special, unparse_special));
          }, nb::arg("ids"), nb::arg("remove_special") = false, nb::arg("unparse_special") = false,
          "Text of a token sequence (bytes that are not valid UTF-8 become U+FFFD).")
      .def("detokenize_bytes", [](const PyTokenizer& t, nb::handle ids, bool remove_special, bool unparse_special) {
            const std::vector<int32_t> v = ids_arg(ids);
            return to_bytes(t.tk->detokenize(v.data(), v.size(), remove_special, unparse_special));
          }, nb::arg("ids"), nb::arg("remove_special") = false, nb::arg("unparse_special") = false)
      .def("token_to_piece", [](const PyTokenizer& t, int32_t id, bool special) {
            return to_bytes(t.tk->token_to_piece(id, special));
          }, nb::arg("id"), nb::arg("special") = false,
          "The bytes of one token (a piece may be part of a UTF-8 character).")
      .def("decoder", [](const PyTokenizer& t, bool special) {
            return PyDecoder{tok::StreamDecoder(t.tk->shared_vocab(), special)};
          }, nb::arg("special") = false, "A new streaming TokenDecoder.")
      .def("is_eog", [](const PyTokenizer& t, int32_t id) { return t.tk->is_eog(id); }, nb::arg("id"),
           "Whether generating this token ends the turn (the whole end-of-generation set, not just EOS).")
      .def("token_text", [](const PyTokenizer& t, int32_t id) {
            const std::string& s = t.vocab().token_text(id);
            PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
            if (!o) throw nb::python_error();
            return nb::steal<nb::str>(o);
          }, nb::arg("id"), "The token's text as stored in the GGUF.")
      .def("token_attr", [](const PyTokenizer& t, int32_t id) {
            t.vocab().check_id(id, "token_attr");
            return t.vocab().attr[id];
          }, nb::arg("id"), "Attribute bits (llama_token_attr values: 1 unknown, 2 unused, 4 normal, 8 control, ...).")
      .def("apply_chat_template_builtin", [](const PyTokenizer& t, nb::handle messages, bool add_generation_prompt,
                                             nb::handle tmpl) {
            const std::vector<tok::ChatMessage> msgs = messages_arg(messages);
            std::string name;
            if (!tmpl.is_none()) name = text_arg(tmpl);
            const tok::ChatTemplate ct = t.builtin(tmpl.is_none() ? nullptr : &name);
            return utf8_to_str(tok::chat_apply(ct, msgs, add_generation_prompt));
          }, nb::arg("messages"), nb::arg("add_generation_prompt") = true, nb::arg("template") = nb::none(),
          "Format messages with the C++ built-in chat format detected from the GGUF (or named / "
          "detected from `template`).")
      .def_prop_ro("builtin_chat_format", [](const PyTokenizer& t) { return std::string(t.builtin(nullptr).name()); },
                   "Name of the built-in format used for this model (raises when its template is unknown).")
      .def_prop_ro("chat_template", [](const PyTokenizer& t) -> nb::object {
            return t.has_template ? nb::object(utf8_to_str(t.template_source)) : nb::none();
          }, "The GGUF's Jinja chat template source, or None.")
      .def_prop_ro("architecture", [](const PyTokenizer& t) { return t.architecture; })
      .def_prop_ro("path", [](const PyTokenizer& t) { return t.path; })
      .def_prop_ro("model_type", [](const PyTokenizer& t) { return t.vocab().model; }, "'gpt2' (BPE) or 'llama' (SentencePiece)")
      .def_prop_ro("pre", [](const PyTokenizer& t) { return std::string(tok::pre_type_name(t.vocab().pre)); },
                   "pre-tokenizer family (BPE)")
      .def_prop_ro("vocab_size", [](const PyTokenizer& t) { return t.vocab().n_tokens(); })
      .def_prop_ro("bos_id", [](const PyTokenizer& t) { return opt_id(t.vocab().bos); })
      .def_prop_ro("eos_id", [](const PyTokenizer& t) { return opt_id(t.vocab().eos); })
      .def_prop_ro("eot_id", [](const PyTokenizer& t) { return opt_id(t.vocab().eot); })
      .def_prop_ro("eog_ids", [](const PyTokenizer& t) { return t.vocab().eog; }, "end-of-generation ids, ascending")
      .def_prop_ro("add_bos", [](const PyTokenizer& t) { return t.vocab().add_bos; })
      .def_prop_ro("add_eos", [](const PyTokenizer& t) { return t.vocab().add_eos; })
      .def_prop_ro("add_space_prefix", [](const PyTokenizer& t) { return t.vocab().add_space_prefix; });

  m.def("chat_template_names", [] { return tok::chat_template_names(); }, "names of the built-in chat formats");
  m.def("apply_chat_template_builtin", [](const std::string& name_or_source, nb::handle messages, bool add_generation_prompt) {
        return utf8_to_str(tok::chat_apply(tok::chat_template_detect(name_or_source), messages_arg(messages),
                                           add_generation_prompt));
      }, nb::arg("template"), nb::arg("messages"), nb::arg("add_generation_prompt") = true,
      "Format messages with a built-in chat format given by name or detected from a Jinja source.");
}

}  // namespace gaacrt::py
